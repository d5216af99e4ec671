#!/usr/bin/env bash
# The test suites, in order (the PostgreSQL and scale-out ones are `npm run test:scale`'s, the
# API fuzzer and the power-loss replay `npm run test:robust`'s); each runner prints its own
# summary, then a table of all.
# Runs every suite even when one fails, and fails at the end if any did.
source "$(dirname "$0")/lib.sh"

suite "build: wasm-core (wasm32+simd128) and web bundle" bash scripts/build.sh wasm web
suite "cargo test (workspace, native)" cargo test --workspace --no-fail-fast
suite "wasm tests (wasm-bindgen-test in Node)" cargo test -p wasm-core --target wasm32-unknown-unknown --tests --no-fail-fast
suite "web unit tests (vitest)" npm run --silent test -w web
suite "typecheck (tsc strict: web, e2e)" bash -c 'npm run --silent typecheck -w web && npx tsc -p e2e --noEmit'
# `cargo test` above built target/debug/ditto-server (with the test build's feature set; a
# plain `cargo build` would resolve features differently and rebuild every dependency).
suite "e2e (Playwright, real server, Chromium)" bash -c \
  '[[ -x target/debug/ditto-server ]] || cargo build -q -p ditto-server; npx playwright test -c e2e'
summary
