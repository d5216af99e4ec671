#!/usr/bin/env bash
# npm run test:scale: the server's other backends and the scale-out setup, kept out of
# `npm test` to hold it near 15 minutes (CI runs both):
#  1. the server suite with the index on PostgreSQL and the containers in DATA_DIR
#     (scripts/test-pg.sh, a throwaway cluster of its own);
#  2. a throwaway PostgreSQL cluster (scripts/pg.sh) and a throwaway S3-compatible object
#     store (scripts/s3.sh) on loopback, then the server suite (every integration test and
#     the index contract) with the index on PostgreSQL and the containers on S3, each test
#     in a database and key prefix of its own;
#  3. the replicated e2e spec (e2e/tests/replicas.spec.ts): two server replicas on one
#     database and bucket behind scripts/lb.mjs, backup, restore and search in Chromium, one
#     replica killed.
# Each runs even when one before it fails; a table of all ends the run, and the script fails
# if any did. Both services are stopped and their directories removed on every exit.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pg.sh"
source "$(dirname "$0")/s3.sh"

suite "server suite on PostgreSQL (throwaway cluster)" bash scripts/test-pg.sh

base=${TMPDIR:-/tmp}/ditto-test-scale-$$
trap 's3_stop; pg_stop' EXIT
pg_start "$base-pg" "${PG_TEST_PORT:-55420}"
s3_start "$base-s3" "${S3_TEST_PORT:-9400}"
log "PostgreSQL on $DITTO_TEST_PG, S3 on $DITTO_TEST_S3 (bucket $DITTO_TEST_S3_BUCKET)"

suite "server suite on PostgreSQL + S3" \
  cargo test -p ditto-server --no-fail-fast -- --include-ignored --test-threads=2

# `cargo test` above built the debug ditto-server, which the spec starts.
export DITTO_SERVER_BIN=${DITTO_SERVER_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/ditto-server}
export DITTO_E2E_PG=$DITTO_TEST_PG DITTO_E2E_S3=$DITTO_TEST_S3
bash scripts/build.sh wasm web
suite "e2e: two replicas behind a balancer (Chromium)" npx playwright test -c e2e replicas.spec.ts
summary
