#!/bin/sh
# hier_paired.sh - hierarchical against flat collectives for groups that
# span hosts, on one machine, in paired rounds.
#
#   bench/hier_paired.sh HOSTS RANKS_PER_HOST ROUNDS [bench_collectives options]
#
# Starts HOSTS x RANKS_PER_HOST ranks of build/bin/bench_collectives on this
# machine (env:// over loopback), rank r on fake host r / RANKS_PER_HOST
# (DIST_HOST_ID, a testing aid: the backend treats the ranks as being on
# different hosts), twice per round: DIST_HIER=0 (today's flat TCP full
# mesh, system "flat") and the default (shared memory inside a host, TCP
# between host leaders, system "hier"), back to back so both see the same
# load. bench/paired_rounds.sh summarises: per op and size the median over
# rounds of each, the median per-round ratio hier/flat and the rounds hier
# was ahead. Loopback "links" have no NIC limit, so this measures the
# message and copy counts of the schedules, not a network; the namespace
# test bed (tests/multihost/, branch testbed) gives real veth links.
#
# Defaults: all_reduce, broadcast, all_gather at 4 B, 1 MiB and 16 MiB,
# throughput mode. Example: bench/hier_paired.sh 4 2 5
set -eu
[ $# -ge 3 ] || { echo "usage: $0 HOSTS RANKS_PER_HOST ROUNDS [options]" >&2; exit 2; }
hosts=$1 per=$2 rounds=$3
shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${BENCH_BIN:-$here/build/bin/bench_collectives}
opts=${*:---ops all_reduce,broadcast,all_gather --sizes 4,1048576,16777216 --mode throughput}
world=$((hosts * per))

# One run: every rank in the background, rank 0's CSV on stdout.
run() { # system hier
  port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 30000))
  pids=
  r=0
  while [ $r -lt $world ]; do
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$((r % per)) LOCAL_WORLD_SIZE=$per \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DIST_HOST_ID=h$((r / per)) DIST_HIER=$2 \
      DIST_TRACE=0 "$bin" --system "$1" $opts 2>/dev/null &
    pids="$pids $!"
    r=$((r + 1))
  done
  for p in $pids; do wait "$p"; done
}

round() {
  run flat 0
  run hier 1
}

if [ "${HIER_PAIRED_ONE_ROUND:-}" = 1 ]; then
  round
  exit 0
fi
HIER_PAIRED_ONE_ROUND=1 exec "$here/bench/paired_rounds.sh" "$rounds" flat hier -- \
  env HIER_PAIRED_ONE_ROUND=1 "$0" "$hosts" "$per" 1 $opts
