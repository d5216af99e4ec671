#!/usr/bin/env bash
# Storage server benchmark: ingest MB/s of new chunks over loopback and the latency of a
# 100 000-fingerprint `chunks/missing` query. Last line: {"ingest_mbps":..,"missing_100k_ms":..}
# BENCH_INGEST_MB (default 256) sets the amount ingested.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-server}"
cargo build --release -q -p ditto-server --bin ditto-server --example bench_server >&2
export DITTO_SERVER_BIN="$CARGO_TARGET_DIR/release/ditto-server"
exec "$CARGO_TARGET_DIR/release/examples/bench_server"
