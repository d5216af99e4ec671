# A throwaway PostgreSQL cluster on loopback for the PostgreSQL test suite (sourced).
# pg_start DIR PORT: initdb into DIR (trust auth, owner `postgres` when run as root, since
# PostgreSQL refuses to run as root), start it on 127.0.0.1:PORT (or the next free port), export DITTO_TEST_PG (the
# admin database's URL). pg_stop: stop it and remove DIR.
# shellcheck shell=bash

pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [[ -x $d/initdb ]] && { echo "$d"; return; }
  done
  die "PostgreSQL is not installed (npm run setup installs Debian's postgresql)"
}

pg_as() { # run a command as the cluster's owner
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start() {
  PG_DIR=$1 PG_PORT=$2
  local bin; bin=$(pg_bin)
  rm -rf "$PG_DIR"; mkdir -p "$PG_DIR"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$PG_DIR"
  pg_as "$bin/initdb" -D "$PG_DIR/data" -A trust -U postgres >"$PG_DIR.initdb.log" 2>&1 ||
    { cat "$PG_DIR.initdb.log"; die "initdb failed"; }
  PG_CTL="$bin/pg_ctl"
  # The port may be taken by something else on the machine: the next ones are tried.
  local tries=0
  until pg_as "$PG_CTL" -D "$PG_DIR/data" -l "$PG_DIR/data/server.log" -w \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1" start >/dev/null; do
    if ! grep -q "Address already in use" "$PG_DIR/data/server.log" || ((++tries >= 20)); then
      cat "$PG_DIR/data/server.log"; die "PostgreSQL did not start"
    fi
    : >"$PG_DIR/data/server.log"
    PG_PORT=$((PG_PORT + 1))
  done
  export DITTO_TEST_PG="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
}

pg_stop() {
  [[ -n ${PG_DIR:-} ]] || return 0
  [[ -n ${PG_CTL:-} ]] && pg_as "$PG_CTL" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR" "$PG_DIR.initdb.log"
}
