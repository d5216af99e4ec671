#!/usr/bin/env bash
# npm run bench:scale: the storage server benchmark (server/examples/bench_server.rs) for
#   embedded  the default: SQLite + containers in the data directory, one server;
#   1         one replica on PostgreSQL + S3 (throwaway cluster and s3s-fs on loopback,
#             scripts/pg.sh and scripts/s3.sh);
#   2         two replicas on the same database and bucket behind scripts/lb.mjs;
# interleaved, ROUNDS rounds (default 3), a fresh data directory, database and key prefix
# every run; ingest MB/s and the latency of a 100 000-fingerprint `chunks/missing` query.
# Then the restore benchmark's ditto half (bench/restore.mjs --no-restic --no-parent:
# typescript-10 backed up through the page, its largest release restored as a zip; the
# newest, 7.0.2, is 2.5 MB, all fixed cost) on one replica on PostgreSQL + S3, and the same
# on the embedded default as its anchor.
# One line per run ("round N embedded|1|2 {json}"), the restore's own output, and last one JSON
# line of medians. BENCH_CLIENTS (default 4, the same for all three) sets the concurrent
# uploaders; BENCH_INGEST_MB / BENCH_ZSTD_MB as for bench:server; BENCH_RESTORE_ARGS is passed
# to bench/restore.mjs (e.g. --quick). BENCH_SCALE_S3=0 leaves object storage off: "1" is then
# one server on PostgreSQL and "2" is skipped (one database takes one server without it).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pg.sh"
source "$(dirname "$0")/s3.sh"

use_s3=${BENCH_SCALE_S3:-1}
base=${TMPDIR:-/tmp}/ditto-bench-scale-$$
declare -a pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$base-run" "$base-results" "$base-restore"
  s3_stop
  pg_stop
}
trap cleanup EXIT

pg_start "$base-pg" "${PG_BENCH_PORT:-55480}"
[[ $use_s3 == 0 ]] || s3_start "$base-s3" "${S3_BENCH_PORT:-9480}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-server}"
cargo build --release -q -p ditto-server --bin ditto-server --example bench_server >&2
export DITTO_SERVER_BIN="$CARGO_TARGET_DIR/release/ditto-server"
bench="$CARGO_TARGET_DIR/release/examples/bench_server"
export BENCH_CLIENTS=${BENCH_CLIENTS:-4}

S3_VARS=(DITTO_S3_ENDPOINT DITTO_S3_REGION DITTO_S3_BUCKET DITTO_S3_ACCESS_KEY_ID DITTO_S3_SECRET_ACCESS_KEY DITTO_S3_PREFIX)

# Exports the environment of a fresh scale-out store named $1: a new database and, with
# object storage on, a key prefix of that name in the bucket.
scale_env() {
  psql -q "$DITTO_TEST_PG" -c "CREATE DATABASE $1" >/dev/null
  export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$1"
  if [[ $use_s3 != 0 ]]; then
    export DITTO_S3_ENDPOINT=$DITTO_TEST_S3 DITTO_S3_REGION=us-east-1 DITTO_S3_BUCKET=$DITTO_TEST_S3_BUCKET \
      DITTO_S3_ACCESS_KEY_ID=$DITTO_TEST_S3_KEY DITTO_S3_SECRET_ACCESS_KEY=$DITTO_TEST_S3_SECRET DITTO_S3_PREFIX=$1
  fi
}
embedded_env() { unset DATABASE_URL "${S3_VARS[@]}"; }

# Starts `ditto-server serve` on a data directory of its own under $base-run; sets $url and
# $token from the line it prints.
start_replica() {
  local dir out
  dir=$(mktemp -d "$base-run/replica.XXXX")
  out=$dir.out
  PORT=0 DATA_DIR=$dir WEB_DIR=$dir/none "$DITTO_SERVER_BIN" serve >"$out" 2>"$dir.err" &
  pids+=($!)
  local tries=0
  until grep -qs "Open http" "$out"; do
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$dir.err"; die "replica on $dir exited"; }
    ((++tries < 300)) || die "replica on $dir did not start"
    sleep 0.1
  done
  url=$(sed -n 's|.*Open \(http://[^/]*\)/#token=.*|\1|p' "$out")
  token=$(sed -n 's|.*#token=||p' "$out")
}

stop_all() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  rm -rf "$base-run"
}

results=$base-results
: >"$results"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for setup in embedded 1 2; do
    [[ $setup == 2 && $use_s3 == 0 ]] && continue
    mkdir -p "$base-run"
    case $setup in
      embedded)
        embedded_env
        json=$("$bench" 2>/dev/null | tail -1) ;;
      1)
        scale_env "scale_${round}_1"
        json=$("$bench" 2>/dev/null | tail -1) ;;
      2)
        scale_env "scale_${round}_2"
        # One after the other: the first creates the schema and the default repository.
        start_replica; first_token=$token; ups=$url
        start_replica; ups+=",$url"
        node scripts/lb.mjs --port 0 --to "$ups" >"$base-run/lb.out" &
        pids+=($!)
        until grep -qs "listening on" "$base-run/lb.out"; do
          kill -0 "${pids[-1]}" 2>/dev/null || die "lb.mjs exited"
          sleep 0.1
        done
        lb=$(sed -n 's/listening on //p' "$base-run/lb.out")
        json=$(BENCH_URL=$lb BENCH_TOKEN=$first_token "$bench" 2>/dev/null | tail -1) ;;
    esac
    stop_all
    [[ $json == "{"* ]] || die "round $round $setup: no result"
    echo "round $round $setup $json"
    echo "$setup $json" >>"$results"
  done
done

bash scripts/build.sh wasm web
log "restore: typescript-10, one server on PostgreSQL$([[ $use_s3 == 0 ]] || echo " + S3")"
scale_env scale_restore
# shellcheck disable=SC2086 # BENCH_RESTORE_ARGS is a list of arguments
node bench/restore.mjs --no-restic --no-parent ${BENCH_RESTORE_ARGS:-} >"$base-restore"
cat "$base-restore"
restore=$(tail -1 "$base-restore")
log "restore: the same on the embedded default (the anchor)"
embedded_env
# shellcheck disable=SC2086
node bench/restore.mjs --no-restic --no-parent ${BENCH_RESTORE_ARGS:-} >"$base-restore"
cat "$base-restore"
restore_embedded=$(tail -1 "$base-restore")

node - "$results" "$restore" "$restore_embedded" "$use_s3" <<'EOF'
const [file, restore, restoreEmbedded, useS3] = process.argv.slice(2);
const runs = require('fs').readFileSync(file, 'utf8').trim().split('\n').map((l) => {
  const i = l.indexOf(' ');
  return [l.slice(0, i), JSON.parse(l.slice(i + 1))];
});
const median = (setup, key) => {
  const xs = runs.filter(([s]) => s === setup).map(([, j]) => j[key]).sort((a, b) => a - b);
  if (!xs.length) return null;
  return xs.length % 2 ? xs[(xs.length - 1) / 2] : +((xs[xs.length / 2 - 1] + xs[xs.length / 2]) / 2).toFixed(1);
};
console.log(JSON.stringify({
  ingest_mbps_1: median('1', 'ingest_mbps'),
  ingest_mbps_2: median('2', 'ingest_mbps'),
  embedded_ingest_mbps: median('embedded', 'ingest_mbps'),
  missing_100k_ms_1: median('1', 'missing_100k_ms'),
  missing_100k_ms_2: median('2', 'missing_100k_ms'),
  embedded_missing_100k_ms: median('embedded', 'missing_100k_ms'),
  restore_version: JSON.parse(restore).a_version,
  restore_mbps_s3: JSON.parse(restore).a_restore_mbps,
  restore_mbps_embedded: JSON.parse(restoreEmbedded).a_restore_mbps,
  ...(useS3 === '0' && { object_storage: false }),
  clients: Number(process.env.BENCH_CLIENTS),
  rounds: runs.filter(([s]) => s === 'embedded').length,
}));
EOF
