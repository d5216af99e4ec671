#!/usr/bin/env bash
# Crash test of the storage server: SIGKILL during uploads, restart, `check`, read back
# everything acknowledged. Usage: scripts/crash-test.sh [ROUNDS]   (default 100)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-server}"
DITTO_CRASH_ROUNDS="${1:-100}" exec cargo test -p ditto-server --test crash -- --nocapture
