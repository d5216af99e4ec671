#!/usr/bin/env bash
# npm run bench:core [-- --quick]: chunking and SHA-1 of wasm-core, native and in Wasm
# (Node and headless Chromium), on the same bytes: typescript-10 (10 npm releases) and
# seeded random data. Prints a table, then one JSON line. See docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
for a in "$@"; do [[ $a == --quick ]] && quick=1; done

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-bench}
cache=${DITTO_BENCH_CACHE:-$HOME/.cache/ditto-bench}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ((quick)); then random_mb=32; reps=1; ts_limit=48; else random_mb=256; reps=3; ts_limit=; fi

log() { echo "[bench:core] $*" >&2; }

log "dataset typescript-10 (tarballs cached by scripts/npm-versions.mjs)"
node scripts/npm-versions.mjs typescript 10 "$cache/ds" >&2
files=$(node wasm-core/bench/prepare.mjs "$cache/ds/typescript" "$cache" "$random_mb")
ts_bin=$(node -e 'console.log(JSON.parse(process.argv[1]).typescript)' "$files")
rnd_bin=$(node -e 'console.log(JSON.parse(process.argv[1]).random)' "$files")

log "building (release): native bench, Wasm for Node and for the browser"
cargo test --release -q -p wasm-core --test bench_core --no-run >&2 2>"$work/build.log" || { cat "$work/build.log" >&2; exit 1; }
# `bench`: the measured loops and Wasm-resident buffers (wasm-core/src/bindings/bench.rs),
# which the page's build (scripts/build.sh) leaves out.
wasm-pack --quiet build wasm-core --release --target nodejs --out-dir pkg-bench -- --features bench >&2
wasm-pack --quiet build wasm-core --release --target web --out-dir pkg-bench-web -- --features bench >&2

log "native"
DITTO_BENCH_DATASET="$cache/ds/typescript" DITTO_BENCH_CONCAT="$ts_bin" DITTO_BENCH_RANDOM_FILE="$rnd_bin" \
  DITTO_BENCH_REPS=$reps DITTO_BENCH_QUICK=$quick DITTO_BENCH_TS_LIMIT_MB=$ts_limit \
  cargo test --release -q -p wasm-core --test bench_core -- --ignored --nocapture >"$work/native.log" 2>&1 ||
  { cat "$work/native.log" >&2; exit 1; }

log "Wasm in Node"
node wasm-core/bench/node.mjs "$PWD/wasm-core/pkg-bench" "$ts_bin" "$rnd_bin" $reps $ts_limit >"$work/node.json" 2>/dev/null

log "Wasm in headless Chromium"
if ! node wasm-core/bench/chromium.mjs "$PWD/wasm-core/pkg-bench-web" "$ts_bin" "$rnd_bin" $reps $ts_limit >"$work/chromium.json" 2>"$work/chromium.err"; then
  log "Chromium run failed (continuing without it):"; tail -5 "$work/chromium.err" >&2; : >"$work/chromium.json"
fi

node wasm-core/bench/report.mjs "$work/native.log" "$work/node.json" "$work/chromium.json"
