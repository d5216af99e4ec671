#!/usr/bin/env bash
# Fuzzes the HTTP API from its OpenAPI document with schemathesis (PyPI) against the real
# server process: a fresh data directory, the default repository seeded with one chunk and one
# version; first the reads of a chunk and a container by name, with the seeded ones' names
# fixed (FUZZ_READ_SECONDS, default 20), then every operation generated for FUZZ_SECONDS
# (default 150). Fails on any 5xx answer, on a panic in the server's log, or if the server dies.
# Usage: scripts/fuzz-api.sh [SERVER_BINARY]   (default target/debug/ditto-server)
source "$(dirname "$0")/lib.sh"

bin=${1:-target/debug/ditto-server}
[[ -x $bin ]] || cargo build -q -p ditto-server
here=$(pwd)/scripts/fuzz-api
data=$(mktemp -d)
log_file=$data/server.log
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PORT=$port DATA_DIR=$data/repo WEB_DIR=web/dist "$bin" serve >"$log_file" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do grep -q "Open http" "$log_file" && break; sleep 0.1; done
export DITTO_FUZZ_TOKEN=$(cat "$data/repo/default-repo.token")
url=http://127.0.0.1:$port
read -r DITTO_FUZZ_FP DITTO_FUZZ_CONTAINER < <(python3 "$here/seed.py" "$url" "$DITTO_FUZZ_TOKEN") ||
  die "fuzz: seeding the repository failed"
export DITTO_FUZZ_FP DITTO_FUZZ_CONTAINER

run() { # config, seconds, more schemathesis arguments...
  local config=$1 seconds=$2; shift 2
  # One worker: hypothesis's source inspection is not thread-safe on CPython 3.11.
  SCHEMATHESIS_HOOKS=hooks PYTHONPATH=$here python3 -c "from schemathesis.cli import schemathesis; schemathesis()" \
    --config-file "$here/$config" \
    run server/src/openapi.json --url "$url" --max-time "$seconds" -w 1 \
    --seed "${FUZZ_SEED:-$RANDOM}" --no-color "$@"
}
status=0
log "fuzz: GET chunks/{fp} and containers/{id} of the seeded chunk ($DITTO_FUZZ_FP, container $DITTO_FUZZ_CONTAINER)"
run reads.toml "${FUZZ_READ_SECONDS:-20}" --include-path-regex '/(chunks/\{fp\}|containers/\{id\})$' || status=1
log "fuzz: every operation"
run schemathesis.toml "${FUZZ_SECONDS:-150}" || status=1
if ! kill -0 $pid 2>/dev/null; then echo "fuzz: the server died"; status=1; fi
if grep -n "panicked" "$log_file"; then echo "fuzz: the server panicked"; status=1; fi
exit $status
