#!/usr/bin/env bash
# npm run bench:backup [-- --quick] [-- --only typescript|smallfiles]: Ditto through the real UI vs
# restic and borg on typescript-10 and on 10 Django 5.2.x sdists (many small files).
source "$(dirname "$0")/lib.sh"
command -v restic >/dev/null || die "restic missing: run npm run setup"
bash scripts/build.sh wasm web server
node bench/backup.mjs "$@"
