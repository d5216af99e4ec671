#!/usr/bin/env bash
# Power-loss test of the server's storage engine (scripts/powerloss/powerloss.py): every crash
# state at every fsync boundary of uploads, commits, the mover's moves, forget, delete and
# prune must keep what was acknowledged, and recover and prune to a consistent repository.
# Then the same trace replayed with fsyncs modelled away must fail, which shows the replay can
# see a missing fsync: without the container files' fsyncs (their bytes), and without the
# containers directory's fsyncs (the names of new containers).
# Usage: scripts/powerloss.sh [SERVER_BINARY]   (default target/debug/ditto-server)
source "$(dirname "$0")/lib.sh"

bin=${1:-target/debug/ditto-server}
[[ -x $bin ]] || cargo build -q -p ditto-server
tmp=/tmp
[[ -d /dev/shm && -w /dev/shm ]] && tmp=/dev/shm
saved=$(mktemp -d "$tmp/ditto-powerloss-trace.XXXXXX")
trap 'rm -rf "$saved"' EXIT
python3 scripts/powerloss/powerloss.py "$bin" --save "$saved"

negative() { # what, regex of the paths whose fsyncs are dropped
  log "powerloss: the same replay without $1 must find lost data"
  local out=/tmp/powerloss-negative.log
  if python3 scripts/powerloss/powerloss.py "$bin" --replay "$saved" --drop-syncs "$2" --fail-fast >"$out" 2>&1; then
    cat "$out"
    die "powerloss: dropping $1 went unnoticed"
  fi
  # A failure of the checker itself proves nothing.
  if ! grep -q '^FAIL' "$out" || grep -q 'Traceback\|checking the state raised\|server did not start' "$out"; then
    cat "$out"
    die "powerloss: the replay without $1 failed for another reason"
  fi
  grep -m1 '^FAIL' "$out" | cut -c1-400
}
negative "the container files' fsyncs" '\.dct$'
negative "the containers directory's fsyncs" '/containers$'
