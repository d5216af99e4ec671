#!/usr/bin/env bash
# npm run bench:restore [-- --quick]: restore (a) the largest of typescript-10 and (b) their parent folder
# (one source) as a zip and into a folder through the real UI, checked byte for byte, timed
# beside `restic restore` of the same snapshots.
source "$(dirname "$0")/lib.sh"
command -v restic >/dev/null || die "restic missing: run npm run setup"
command -v unzip >/dev/null || die "unzip missing: run npm run setup"
bash scripts/build.sh wasm web server
node bench/restore.mjs "$@"
