#!/usr/bin/env bash
# npm run bench:search [-- --quick] [-- --runs N]: search typescript-10 (backed up through the
# real UI) for 1, 8 and 128 keywords: DedupSearch and the naive search in the page, ripgrep
# over the 10 release folders; phase times, record counts, last line JSON.
source "$(dirname "$0")/lib.sh"
command -v rg >/dev/null || die "ripgrep (rg) missing: run npm run setup"
bash scripts/build.sh wasm web server
node bench/search.mjs "$@"
