#!/bin/sh
# paired_rounds.sh - the house's paired-rounds summary over a benchmark that
# prints, per round, a "base" row and a "test" row for the same operation
# and size back to back (so both see the same load).
#
#   bench/paired_rounds.sh ROUNDS BASE_SYSTEM TEST_SYSTEM -- COMMAND...
#
# Runs COMMAND ROUNDS times; every run is one round (PAIRED_ROUND, 1 up,
# in its environment: a command may alternate which system goes first). Its CSV rows
# (system,backend,op,bytes,ranks,median_us,...) are paired by op and bytes.
# Prints per op and size: base and test median µs over rounds, the median
# per-round ratio test/base, and in how many rounds test was ahead (ratio
# below 1). Example, the mpi backend against Open MPI's own calls:
#
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
#   bench/paired_rounds.sh 9 openmpi-raw libdist-mpi -- \
#     mpirun --oversubscribe -np 2 --mca pml ob1 --mca btl self,vader \
#     build/bin/bench_mpi --raw --sizes 65536,1048576,16777216
set -eu
[ $# -ge 5 ] && [ "$4" = "--" ] || {
  echo "usage: $0 ROUNDS BASE_SYSTEM TEST_SYSTEM -- COMMAND..." >&2
  exit 2
}
rounds=$1 base=$2 test=$3
shift 4
case $rounds in '' | *[!0-9]*) echo "$0: ROUNDS must be a number" >&2; exit 2 ;; esac
out=$(mktemp)
trap 'rm -f "$out"' EXIT
r=1
while [ "$r" -le "$rounds" ]; do
  PAIRED_ROUND=$r "$@" | awk -F, -v r="$r" '{ print r "," $0 }' >>"$out"
  r=$((r + 1))
done
echo "op,bytes,${base}_us,${test}_us,median_ratio,rounds_ahead"
awk -F, -v base="$base" -v test="$test" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  $2 == base { b[$1 "," $4 "," $5] = $7 }
  $2 == test { t[$1 "," $4 "," $5] = $7 }
  END {
    for (k in b) {
      if (!(k in t)) continue
      split(k, f, ",")
      key = f[2] "," f[3]
      n[key]++
      bu[key, n[key]] = b[k]; tu[key, n[key]] = t[k]; ra[key, n[key]] = t[k] / b[k]
      if (t[k] < b[k]) ahead[key]++
      if (!(key in seen)) { seen[key] = 1; order[++m] = key }
    }
    for (i = 1; i <= m; i++) {
      key = order[i]
      for (j = 1; j <= n[key]; j++) { x[j] = bu[key, j]; y[j] = tu[key, j]; z[j] = ra[key, j] }
      printf "%s,%.3f,%.3f,%.3f,%d/%d\n", key, median(x, n[key]), median(y, n[key]),
             median(z, n[key]), ahead[key] + 0, n[key]
    }
  }' "$out" | sort -t, -k1,1 -k2,2n
