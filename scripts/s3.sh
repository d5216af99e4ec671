# A throwaway S3-compatible object store on loopback for the scale-out suites (sourced).
# s3s-fs (crates.io, installed by `npm run setup`) keeps each bucket as a directory under its
# root and each object as the file ROOT/<bucket>/<key>, so tests can find, damage and list
# containers as plain files.
# s3_start DIR PORT: start it on 127.0.0.1:PORT (or the next free port) with fixed test
# credentials, create the bucket `ditto-test`, wait until it answers, export DITTO_TEST_S3
# (endpoint URL), DITTO_TEST_S3_ROOT, DITTO_TEST_S3_BUCKET, DITTO_TEST_S3_KEY and
# DITTO_TEST_S3_SECRET. s3_stop: stop it and remove DIR.
# shellcheck shell=bash

S3_KEY=ditto-test-key
S3_SECRET=ditto-test-secret
S3_BUCKET=ditto-test

# One signed request to the store (curl signs with SigV4; s3s wants the payload hash header).
s3_curl() { # method url [curl args...]
  local method=$1 url=$2; shift 2
  curl -s -o /dev/null -w '%{http_code}' -X "$method" \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_KEY:$S3_SECRET" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    "$@" "$url"
}

s3_start() {
  S3_DIR=$1 S3_PORT=$2
  command -v s3s-fs >/dev/null || die "s3s-fs is not installed (npm run setup installs it)"
  rm -rf "$S3_DIR"; mkdir -p "$S3_DIR/root"
  # The port may be taken by something else on the machine: the next ones are tried.
  local tries=0 code=""
  while :; do
    s3s-fs --host 127.0.0.1 --port "$S3_PORT" --access-key "$S3_KEY" --secret-key "$S3_SECRET" \
      "$S3_DIR/root" >"$S3_DIR/server.log" 2>&1 &
    S3_PID=$!
    local waited=0
    until code=$(s3_curl GET "http://127.0.0.1:$S3_PORT/") && [[ $code == 200 ]]; do
      kill -0 "$S3_PID" 2>/dev/null || break
      ((++waited < 100)) || { s3_stop; die "s3s-fs did not answer on port $S3_PORT"; }
      sleep 0.1
    done
    [[ $code == 200 ]] && break
    wait "$S3_PID" 2>/dev/null || true
    S3_PID=""
    if ! grep -q "Address already in use" "$S3_DIR/server.log" || ((++tries >= 20)); then
      cat "$S3_DIR/server.log"; die "s3s-fs did not start"
    fi
    S3_PORT=$((S3_PORT + 1))
  done
  code=$(s3_curl PUT "http://127.0.0.1:$S3_PORT/$S3_BUCKET") || true
  [[ $code == 200 ]] || { cat "$S3_DIR/server.log"; die "CreateBucket $S3_BUCKET answered $code"; }
  export DITTO_TEST_S3="http://127.0.0.1:$S3_PORT"
  export DITTO_TEST_S3_ROOT="$S3_DIR/root"
  export DITTO_TEST_S3_BUCKET=$S3_BUCKET
  export DITTO_TEST_S3_KEY=$S3_KEY
  export DITTO_TEST_S3_SECRET=$S3_SECRET
}

s3_stop() {
  [[ -n ${S3_DIR:-} ]] || return 0
  if [[ -n ${S3_PID:-} ]]; then
    kill "$S3_PID" 2>/dev/null || true
    wait "$S3_PID" 2>/dev/null || true
  fi
  rm -rf "$S3_DIR"
}
