#!/usr/bin/env bash
# The server suite (every integration test and the index contract) against PostgreSQL: a
# throwaway cluster on loopback (scripts/pg.sh), each test in a database of its own.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pg.sh"

dir=${TMPDIR:-/tmp}/ditto-test-pg-$$
trap pg_stop EXIT
pg_start "$dir" "${PG_TEST_PORT:-55400}"
log "PostgreSQL on $DITTO_TEST_PG"
cargo test -p ditto-server --no-fail-fast -- --include-ignored --test-threads=2
