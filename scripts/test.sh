#!/usr/bin/env bash
# The test suites, in order (the PostgreSQL and scale-out ones are `npm run test:scale`'s);
# each runner prints its own summary, then a table of all.
# Runs every suite even when one fails, and fails at the end if any did.
source "$(dirname "$0")/lib.sh"

declare -a names=() results=()
suite() { # name, command...
  local name=$1; shift
  log "$name"
  local t0=$SECONDS status=PASS
  "$@" || status=FAIL
  names+=("$name"); results+=("$status $((SECONDS - t0))s")
}

suite "build: wasm-core (wasm32+simd128) and web bundle" bash scripts/build.sh wasm web
suite "cargo test (workspace, native)" cargo test --workspace --no-fail-fast
suite "wasm tests (wasm-bindgen-test in Node)" cargo test -p wasm-core --target wasm32-unknown-unknown --tests --no-fail-fast
suite "web unit tests (vitest)" npm run --silent test -w web
suite "typecheck (tsc strict: web, e2e)" bash -c 'npm run --silent typecheck -w web && npx tsc -p e2e --noEmit'
# `cargo test` above built target/debug/ditto-server (with the test build's feature set; a
# plain `cargo build` would resolve features differently and rebuild every dependency).
suite "API fuzz (schemathesis from the OpenAPI document, zero 5xx)" bash scripts/fuzz-api.sh
suite "power loss (strace replay of every crash state)" bash scripts/powerloss.sh
suite "e2e (Playwright, real server, Chromium)" bash -c \
  '[[ -x target/debug/ditto-server ]] || cargo build -q -p ditto-server; npx playwright test -c e2e'

echo
echo "Summary"
failed=0
for i in "${!names[@]}"; do
  printf '  %-50s %s\n' "${names[$i]}" "${results[$i]}"
  [[ ${results[$i]} == PASS* ]] || failed=1
done
exit $failed
