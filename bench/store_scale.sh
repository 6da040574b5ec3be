#!/bin/sh
# store_scale.sh - what a job asks of its store, at several sizes (issue 23:
# the store at scale). Runs bench/scale_job (a dp x tp mesh, its world and
# group collectives) under distrun at each rank count, with 50 and with 200
# collectives, at DIST_DEBUG=OFF and DETAIL, and reads the store server's
# own count when it stops (core/src/store/store_tcp_server.c, INFO): the
# requests it served and the keys the job left. Requests that do not grow
# with the collectives mean no store traffic on the hot path; the rest is
# rendezvous, group creation, the checking layer's helpers, the tracer's
# clock exchange and the monitor's records (a write a second per rank).
#
#   bench/store_scale.sh BUILD_DIR N...      e.g. bench/store_scale.sh build 8 64 256
#
# Prints CSV: ranks,debug,colls,requests,keys_left,wall_s,by_op
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR N..." >&2; exit 2; }
build=$1
shift
echo "ranks,debug,colls,requests,keys_left,wall_s,by_op"
for n in "$@"; do
  for debug in OFF DETAIL; do
    for colls in 50 200; do
      t0=$(date +%s.%N)
      line=$(DIST_DEBUG=$debug DIST_LOG_LEVEL=INFO DIST_TRACE=0 timeout 900 \
        "$build/bin/distrun" -n "$n" "$build/bin/scale_job" --colls "$colls" 2>&1 |
        grep "STORE INFO store server: [0-9]* requests" | tail -n 1) || true
      t1=$(date +%s.%N)
      echo "$line" | awk -v n="$n" -v d="$debug" -v c="$colls" -v w="$(echo "$t1 - $t0" | bc)" '
        match($0, /: [0-9]+ requests \(/) {
          req = substr($0, RSTART + 2); sub(/ .*/, "", req)
          ops = $0; sub(/.*requests \(/, "", ops); sub(/\), .*/, "", ops); gsub(/, /, ";", ops)
          keys = $0; sub(/.*\), /, "", keys); sub(/ keys left.*/, "", keys)
          printf "%s,%s,%s,%s,%s,%.1f,%s\n", n, d, c, req, keys, w, ops
        }'
    done
  done
done
