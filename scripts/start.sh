#!/usr/bin/env bash
# Builds whatever is missing, then runs the server (web app included) on 127.0.0.1:$PORT.
source "$(dirname "$0")/lib.sh"
bash scripts/build.sh wasm web server
export PORT=${PORT:-8080} DATA_DIR=${DATA_DIR:-$ROOT/data} WEB_DIR=${WEB_DIR:-$ROOT/web/dist}
exec "$ROOT/target/release/ditto-server" serve
