#!/usr/bin/env bash
# npm run bench:server-pg: the storage server benchmark (server/examples/bench_server.rs) with
# the index on SQLite and on PostgreSQL (a throwaway cluster on loopback, scripts/pg.sh),
# interleaved, ROUNDS rounds (default 3), a fresh data directory and database every run.
# One line per run: "round N sqlite|postgres {json}". BENCH_INGEST_MB / BENCH_ZSTD_MB as for
# bench:server.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pg.sh"
trap pg_stop EXIT
port=${PG_BENCH_PORT:-55460}
pg_start "${TMPDIR:-/tmp}/ditto-bench-pg-$$" "$port"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-server}"
cargo build --release -q -p ditto-server --bin ditto-server --example bench_server >&2
export DITTO_SERVER_BIN="$CARGO_TARGET_DIR/release/ditto-server"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for backend in sqlite postgres; do
    if [[ $backend == postgres ]]; then
      db=bench_$round
      psql -q "$DITTO_TEST_PG" -c "CREATE DATABASE $db" >/dev/null
      export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$db"
    else
      unset DATABASE_URL
    fi
    echo "round $round $backend $("$CARGO_TARGET_DIR/release/examples/bench_server" 2>/dev/null | tail -1)"
  done
done
