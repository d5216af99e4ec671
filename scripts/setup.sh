#!/usr/bin/env bash
# One-command, idempotent setup of everything a fresh Debian machine lacks.
# Nothing here downloads a prebuilt binary or a browser: only Debian packages, crates
# built from source, and npm packages.
source "$(dirname "$0")/lib.sh"

SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
apt_pkgs=()
command -v chromium >/dev/null || apt_pkgs+=(chromium)
command -v chromedriver >/dev/null || apt_pkgs+=(chromium-driver)
command -v clang >/dev/null || apt_pkgs+=(clang)          # zstd-sys for wasm32
command -v llvm-ar >/dev/null || apt_pkgs+=(llvm)
command -v restic >/dev/null || apt_pkgs+=(restic)        # benchmark anchors
command -v borg >/dev/null || apt_pkgs+=(borgbackup)
command -v rg >/dev/null || apt_pkgs+=(ripgrep)
command -v bc >/dev/null || apt_pkgs+=(bc)
command -v strace >/dev/null || apt_pkgs+=(strace)      # the power-loss test records the server with it
command -v unzip >/dev/null || apt_pkgs+=(unzip)        # e2e: restored zips are checked with it
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || apt_pkgs+=(postgresql) # the index's PostgreSQL backend suite
if ((${#apt_pkgs[@]})); then
  log "apt: ${apt_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null ||
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null; }
fi

log "rust: wasm32 target"
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || rustup target add wasm32-unknown-unknown

want=$(wasm_bindgen_version)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [[ $have != "$want" ]]; then
  log "wasm-bindgen-cli $want (building from source, ~2 min)"
  # No --locked: one of its pinned dependencies is missing from the registry.
  cargo install -q wasm-bindgen-cli --version "$want"
fi
if ! command -v wasm-pack >/dev/null; then
  log "wasm-pack (building from source)"
  cargo install -q wasm-pack
fi

# The S3-compatible object store the scale-out suites run against (scripts/s3.sh). Newer
# releases need a newer rustc than the toolchain here.
want_s3=0.14.1
if [[ $(s3s-fs --version 2>/dev/null | awk '{print $2}') != "$want_s3" ]]; then
  log "s3s-fs $want_s3 (building from source, ~2 min)"
  cargo install -q s3s-fs --version "$want_s3" --features binary
fi

log "npm dependencies"
npm ci --no-audit --no-fund --loglevel=error

# The API fuzzer (scripts/fuzz-api.sh), from PyPI.
want_st=4.32.5
if [[ $(python3 -c 'import schemathesis; print(schemathesis.__version__)' 2>/dev/null) != "$want_st" ]]; then
  log "schemathesis $want_st (PyPI)"
  python3 -m pip install -q --disable-pip-version-check "schemathesis==$want_st"
fi

log "cargo dependencies"
cargo fetch -q

log "setup complete"
