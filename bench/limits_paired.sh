#!/bin/sh
# limits_paired.sh - paired rounds of libdist's 2-rank shared-memory
# all_reduce against the machine's zero-copy limit (shared/peers/limits:
# both vectors already in shared memory, each rank reduces its half in
# place and copies the other's reduced half; nothing a runtime that cannot
# map its peer's private buffer can reach).
#
#   bench/limits_paired.sh BUILD_DIR SIZES ROUNDS
#   e.g. bench/limits_paired.sh build 1048576,16777216 5
#
# libdist runs bench_collectives --in-place (all_reduce as torch's users
# call it, on its buffer as it is; the probe's vectors are in place too),
# latency mode, DIST_DEBUG=OFF unless set, the recorder on as shipped. A
# round runs both back to back, odd rounds the probe first. Prints
# paired_rounds.sh's summary: op,bytes,zerocopy_us,libdist_us,
# median_ratio,rounds_ahead (ratio libdist / limit: 2.0 is "twice the
# limit"; "ahead" cannot happen). SIZES: the probe's own sizes (8, 1024,
# 65536, 1048576, 16777216, 67108864).
set -eu
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR SIZES ROUNDS" >&2; exit 2; }
build=$1 sizes=$2 rounds=$3
here=$(cd "$(dirname "$0")" && pwd)
peers=${PEERS:-$here/../../shared/peers}
[ -x "$peers/limits/build.sh" ] || { echo "$0: $peers/limits missing" >&2; exit 2; }
"$peers/limits/build.sh" >/dev/null

limit() {
  "$peers/limits/limits" shm_allreduce |
    awk -F, -v sizes=",$sizes," '$2 == "shm-ideal-zerocopy" && index(sizes, "," $4 ",") {
      print "zerocopy,shm,all_reduce," $4 "," $5 "," $6 }'
}
libdist() {
  DIST_DEBUG=${DIST_DEBUG:-OFF} timeout 300 "$build/bin/distrun" --no-prefix -n 2 \
    "$build/bin/bench_collectives" --ops all_reduce --in-place --sizes "$sizes" \
    --mode latency --system libdist 2>/dev/null |
    awk -F, '$1 == "libdist" { print $1 "," $2 ",all_reduce," $4 "," $5 "," $6 }'
}

if [ "${LIMITS_PAIRED_ONE:-}" ]; then # one round (PAIRED_ROUND), both
  if [ $((PAIRED_ROUND % 2)) = 1 ]; then limit; libdist; else libdist; limit; fi
  exit 0
fi
LIMITS_PAIRED_ONE=1 "$here/paired_rounds.sh" "$rounds" zerocopy libdist -- sh "$0" "$@"
