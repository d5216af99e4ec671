#!/usr/bin/env bash
# Builds what is missing or out of date: `build.sh [wasm] [web] [server] [server-debug]`
# (no argument: wasm, web and the release server).
source "$(dirname "$0")/lib.sh"

build_wasm() {
  if stale web/src/wasm-pkg/wasm_core_bg.wasm wasm-core/src wasm-core/Cargo.toml Cargo.lock .cargo; then
    log "wasm-core -> web/src/wasm-pkg (wasm32 + simd128)"
    # Without the `bench` feature: the page's Wasm carries only what the workers call.
    wasm-pack --log-level warn build wasm-core --release --target web --out-dir ../web/src/wasm-pkg --no-pack
  fi
}

build_web() {
  if stale web/dist/index.html web/src web/index.html web/vite.config.ts public package-lock.json; then
    log "web bundle -> web/dist"
    npm run --silent build -w web
  fi
}

targets=("$@")
((${#targets[@]})) || targets=(wasm web server)
for t in "${targets[@]}"; do
  case $t in
    wasm) build_wasm ;;
    web) build_wasm; build_web ;;
    server) log "server (release)"; cargo build -q --release -p ditto-server ;;
    server-debug) log "server (debug)"; cargo build -q -p ditto-server ;;
    *) die "unknown build target $t" ;;
  esac
done
