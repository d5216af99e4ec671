#!/usr/bin/env bash
# npm run test:robust: the two long robustness suites, kept out of `npm test` to hold it near
# 15 minutes (CI runs both):
#  1. the API fuzzer (scripts/fuzz-api.sh): schemathesis generates requests from
#     server/src/openapi.json against the real server (20 s of reads of a stored chunk and
#     its container, then 150 s of every operation); any 5xx or panic fails;
#  2. the power-loss replay (scripts/powerloss.sh): the server's writes and fsyncs recorded
#     with strace, every crash state at every fsync boundary replayed, everything
#     acknowledged must survive; then the replay with fsyncs dropped must find lost data.
# Both run the debug server `cargo test --workspace` builds (`npm test` builds it first).
source "$(dirname "$0")/lib.sh"

suite "API fuzz (schemathesis from the OpenAPI document, zero 5xx)" bash scripts/fuzz-api.sh
suite "power loss (strace replay of every crash state)" bash scripts/powerloss.sh
summary
