# Shared helpers for the scripts in this folder (sourced, not run).
# shellcheck shell=bash
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The wasm-bindgen version pinned in Cargo.lock: the CLI must match it exactly.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

# True when $1 is missing or older than any file under the remaining paths.
stale() {
  local out=$1; shift
  [[ ! -e $out ]] && return 0
  [[ -n $(find "$@" -newer "$out" -type f -print -quit 2>/dev/null) ]]
}

# Suites run in order, each even when one before it failed; `summary` prints a table of all
# and fails if any did.
declare -a suite_names=() suite_results=()
suite() { # name, command...
  local name=$1; shift
  log "$name"
  local t0=$SECONDS status=PASS
  "$@" || status=FAIL
  suite_names+=("$name"); suite_results+=("$status $((SECONDS - t0))s")
}
summary() {
  local i failed=0
  echo
  echo "Summary"
  for i in "${!suite_names[@]}"; do
    printf '  %-50s %s\n' "${suite_names[$i]}" "${suite_results[$i]}"
    [[ ${suite_results[$i]} == PASS* ]] || failed=1
  done
  return $failed
}
