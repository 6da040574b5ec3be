#!/bin/sh
# run_fuzz.sh BIN SEEDS WORK SECONDS [DICT] - one fuzz target for a bounded
# time (ctest label fuzz): starts from the repository's seeds (read only),
# keeps what it finds in WORK/corpus, and writes a crashing input as
# WORK/crash-* (then exits non-zero, which fails the test). One input may
# take 30 s (-timeout): the slowest seeds take about 1 s under ASan, and a
# loaded machine stretches that; the targets' own deadlines catch a hang
# in the library sooner.
set -eu
bin=$1 seeds=$2 work=$3 secs=$4 dict=${5:-}
mkdir -p "$work/corpus"
set -- -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/"
if [ -n "$dict" ]; then
  set -- "$@" -dict="$dict"
fi
exec "$bin" "$@" "$work/corpus" "$seeds"
