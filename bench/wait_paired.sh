#!/bin/sh
# wait_paired.sh - how the CPU engines wait when the ranks outnumber the
# cores: paired rounds of the waiting cpu_fit.c picks (yield and sleep,
# no spinning) against the old fixed 50 us spin (DIST_SHM_SPIN_US=50), at
# N ranks, all_reduce 4 B and 64 KiB and barrier, latency mode.
#
#   bench/wait_paired.sh BUILD_DIR N ROUNDS
#
# Prints paired_rounds.sh's summary: op,bytes,spin50_us,fit_us,
# median_ratio,rounds_ahead (ahead: the machine's choice was faster).
set -eu
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR N ROUNDS" >&2; exit 2; }
build=$1 n=$2 rounds=$3
if [ "${WAIT_PAIRED_ROUND:-}" = 1 ]; then # one round: both systems back to back
  for sys in spin50 fit; do
    spin=; [ $sys = spin50 ] && spin=50
    DIST_SHM_SPIN_US=$spin DIST_DEBUG=OFF "$build/bin/distrun" --no-prefix -n "$n" \
      "$build/bin/bench_collectives" --ops all_reduce,barrier --sizes 4,65536 \
      --mode latency --system $sys --target-ms 300 2>/dev/null | grep -v '^system'
  done
  exit 0
fi
WAIT_PAIRED_ROUND=1 exec "$(dirname "$0")/paired_rounds.sh" "$rounds" spin50 fit -- \
  env WAIT_PAIRED_ROUND=1 sh "$0" "$build" "$n" "$rounds"
