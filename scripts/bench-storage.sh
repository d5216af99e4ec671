#!/usr/bin/env bash
# npm run bench:storage [-- --quick] [-- --runs N]: typescript-10 backed up through the real UI
# into two servers (HiDeStore layout on and off); newest and oldest restored, with the
# containers they read; versions expired (keep-last 5) and a middle one deleted, bytes freed
# against the ideal; restic and borg pruning the same history. Last line JSON.
source "$(dirname "$0")/lib.sh"
command -v restic >/dev/null || die "restic missing: run npm run setup"
command -v borg >/dev/null || die "borg missing: run npm run setup"
command -v unzip >/dev/null || die "unzip missing: run npm run setup"
bash scripts/build.sh wasm web server
node bench/storage.mjs "$@"
