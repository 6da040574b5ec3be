#!/bin/sh
# sockets_paired.sh - paired rounds of bench_collectives over TCP with 1, 2
# and 4 sockets per peer (DIST_SOCKETS_PER_PEER), as CSV.
#
#     bench/sockets_paired.sh [ROUNDS] [SIZES] [SOCKETS] [RANKS]
#     defaults: 9  16777216,67108864  "1 2 4"  2      (BUILD=build, OP=all_reduce)
#
# Each round runs every socket count back to back (1 first), so a round's
# figures share the machine's state of the moment; a ratio is taken within
# a round, never across rounds. Per size and socket count it prints
#     size,sockets,rounds,median_us,median_ratio_vs_1,rounds_ahead_of_1
# where ratio = time with 1 socket / time with N (above 1: N is faster),
# the median over rounds of the per-round ratios, and rounds_ahead_of_1
# counts the rounds in which N was faster. The raw rows go to stderr
# (round,sockets,<bench_collectives' CSV row>). Throughput mode, traces
# off (DIST_TRACE=0) and the observer out (--no-observer): the data plane
# alone. ORDER=rotate starts round r at the r-th count instead (1 2 4,
# 2 4 1, 4 1 2, ...), so no count always runs first in its round.
set -eu
ROUNDS=${1:-9}
SIZES=${2:-16777216,67108864}
SOCKETS=${3:-"1 2 4"}
RANKS=${4:-2}
BUILD=${BUILD:-build}
OP=${OP:-all_reduce}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
r=1
k=$(echo $SOCKETS | wc -w)
while [ "$r" -le "$ROUNDS" ]; do
  order=$SOCKETS
  if [ "${ORDER:-}" = rotate ]; then
    set -- $SOCKETS
    i=0
    while [ "$i" -lt $(((r - 1) % k)) ]; do
      first=$1
      shift
      set -- "$@" "$first"
      i=$((i + 1))
    done
    order="$*"
  fi
  for s in $order; do
    DIST_TRANSPORT=tcp DIST_SOCKETS_PER_PEER=$s DIST_TRACE=0 \
      "$BUILD/bin/distrun" -n "$RANKS" --no-prefix "$BUILD/bin/bench_collectives" \
      --ops "$OP" --sizes "$SIZES" --mode throughput --no-observer --system "sockets$s" |
      grep "^sockets$s,tcp,$OP," | sed "s/^/$r,$s,/" >>"$raw"
  done
  r=$((r + 1))
done
cat "$raw" >&2
echo "size,sockets,rounds,median_us,median_ratio_vs_1,rounds_ahead_of_1"
# raw: round,sockets,system,transport,op,bytes,ranks,median_us,algbw,mode
awk -F, '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { us[$1, $2, $6] = $8; sizes[$6] = 1; socks[$2] = 1; rounds[$1] = 1 }
  END {
    for (z in sizes) for (s in socks) {
      n = 0; m = 0; ahead = 0
      for (r in rounds) {
        if (!((r SUBSEP s SUBSEP z) in us) || !((r SUBSEP 1 SUBSEP z) in us)) continue
        n++; t[n] = us[r, s, z]; q[n] = us[r, 1, z] / us[r, s, z]
        if (q[n] > 1) ahead++
      }
      if (n) printf "%s,%s,%d,%.1f,%.3f,%d\n", z, s, n, median(t, n), median(q, n), ahead
    }
  }' "$raw" | sort -t, -k1,1n -k2,2n
