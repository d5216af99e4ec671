#!/usr/bin/env bash
# Power-loss test of the server's write path (scripts/powerloss/powerloss.py): every crash
# state at every fsync boundary must keep what was acknowledged. Then the same run with the
# container fsyncs modelled away must fail, which shows the replay can see a missing fsync.
# Usage: scripts/powerloss.sh [SERVER_BINARY]   (default target/debug/ditto-server)
source "$(dirname "$0")/lib.sh"

bin=${1:-target/debug/ditto-server}
[[ -x $bin ]] || cargo build -q -p ditto-server
python3 scripts/powerloss/powerloss.py "$bin"
log "powerloss: the same replay without the container fsyncs must find lost data"
if python3 scripts/powerloss/powerloss.py "$bin" --drop-syncs '\.dct$' >/tmp/powerloss-negative.log 2>&1; then
  cat /tmp/powerloss-negative.log
  die "powerloss: dropping every container fsync went unnoticed"
fi
tail -1 /tmp/powerloss-negative.log
