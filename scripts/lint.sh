#!/usr/bin/env bash
# Formatting and lints for both languages.
source "$(dirname "$0")/lib.sh"
cargo fmt --all -- --check
cargo clippy -q --workspace --all-targets -- -D warnings
cargo clippy -q -p wasm-core --target wasm32-unknown-unknown --all-targets -- -D warnings
# The benchmarks' exports (`npm run bench:core`) build only with their feature.
cargo clippy -q -p wasm-core --target wasm32-unknown-unknown --features bench -- -D warnings
npx prettier --check web/src e2e bench scripts/*.mjs
