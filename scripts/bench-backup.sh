#!/usr/bin/env bash
# npm run bench:backup [-- --quick]: Ditto through the real UI vs restic on typescript-10.
source "$(dirname "$0")/lib.sh"
command -v restic >/dev/null || die "restic missing: run npm run setup"
bash scripts/build.sh wasm web server
node bench/backup.mjs "$@"
