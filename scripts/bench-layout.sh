#!/usr/bin/env bash
# npm run bench:layout [-- --quick]: the HiDeStore mover's thresholds on typescript-10 (bench/layout.mjs).
source "$(dirname "$0")/lib.sh"
bash scripts/build.sh wasm web server
node bench/layout.mjs "$@"
