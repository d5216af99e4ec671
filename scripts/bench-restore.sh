#!/usr/bin/env bash
# npm run bench:restore [-- --quick]: restore the newest of typescript-10 as a zip through the
# real UI (after backing the 10 up), checked byte for byte, timed beside `restic restore`.
source "$(dirname "$0")/lib.sh"
command -v restic >/dev/null || die "restic missing: run npm run setup"
command -v unzip >/dev/null || die "unzip missing: run npm run setup"
bash scripts/build.sh wasm web server
node bench/restore.mjs "$@"
