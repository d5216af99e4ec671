#!/usr/bin/env bash
# npm run bench:reduction [-- --runs N] [-- --quick]: typescript-10 backed up through the real
# UI into a server with the delta pass on and one with it off (DITTO_DELTA=0), each pass
# waited for and timed; stored bytes against restic and borg on the same folders; the newest
# version restored from both servers in interleaved rounds. Last line JSON.
source "$(dirname "$0")/lib.sh"
command -v restic >/dev/null || die "restic missing: run npm run setup"
command -v borg >/dev/null || die "borg missing: run npm run setup"
command -v unzip >/dev/null || die "unzip missing: run npm run setup"
bash scripts/build.sh wasm web server
node bench/reduction.mjs "$@"
