#!/usr/bin/env bash
# npm run bench:link [-- --mbit M --rtt MS --runs N]: restore (a) the largest of typescript-10
# and (b) their parent folder as a zip through the real UI over an emulated link (Chromium's
# network emulation), checked byte for byte; bytes fetched and time. DITTO_WEB_DIR_B=<another
# web/dist> compares that build on the same repository, rounds interleaved.
source "$(dirname "$0")/lib.sh"
command -v unzip >/dev/null || die "unzip missing: run npm run setup"
bash scripts/build.sh wasm web server
node bench/link.mjs "$@"
