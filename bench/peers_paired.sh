#!/bin/sh
# peers_paired.sh - paired rounds of libdist's CPU backend against Open MPI
# (shared/peers/mpi's bench, built there), same ranks, transport and method.
#
#   bench/peers_paired.sh BUILD_DIR RANKS shm|tcp MODE OPS SIZES ROUNDS
#   e.g. bench/peers_paired.sh build 4 shm latency all_reduce,barrier 4,65536 5
#
# MODE is latency or throughput (both benches time them the same way:
# bench_collectives.c's header). OPS are bench_collectives' names
# (all_reduce, broadcast, all_gather, barrier). SIZES are bytes as
# bench_collectives counts them: each rank's input. Open MPI's bench counts
# an allgather's gathered output, so its all_gather rows are divided by
# RANKS here and both systems run the same per-rank size.
#
# A round runs both systems back to back; odd rounds start with Open MPI,
# even ones with libdist, so neither always runs on a machine the other
# just warmed. Prints paired_rounds.sh's summary:
#   op,bytes,openmpi_us,libdist_us,median_ratio,rounds_ahead
# (ratio libdist / Open MPI; ahead: libdist faster in that round).
# Environment: PEERS (default ../shared/peers beside the repository),
# LOAD=N runs N busy loops beside both for the whole run (a machine with
# other work), DIST_DEBUG as the user sets it (OFF when unset).
set -eu
[ $# -eq 7 ] || {
  echo "usage: $0 BUILD_DIR RANKS shm|tcp latency|throughput OPS SIZES ROUNDS" >&2
  exit 2
}
build=$1 n=$2 transport=$3 mode=$4 ops=$5 sizes=$6 rounds=$7
here=$(cd "$(dirname "$0")" && pwd)
peers=${PEERS:-$here/../../shared/peers}
ompi=$peers/mpi/bench_ompi
[ -x "$ompi" ] || { echo "$0: $ompi missing: run $peers/mpi/build.sh" >&2; exit 2; }
case $transport in
  shm) btl="self,vader" dist_transport= ;;
  tcp) btl="self,tcp --mca btl_tcp_if_include lo" dist_transport=tcp ;;
  *) echo "$0: transport is shm or tcp, not '$transport'" >&2; exit 2 ;;
esac

# Open MPI's op names and sizes, from ours.
mpi_ops=$(echo "$ops" | sed 's/all_reduce/allreduce/; s/all_gather/allgather/')
mpi_sizes=$sizes
case $ops in *all_gather*)
  [ "$ops" = all_gather ] || { echo "$0: run all_gather alone (its sizes differ)" >&2; exit 2; }
  mpi_sizes=$(echo "$sizes" | tr , '\n' | awk -v n="$n" '{ printf "%s%d", NR > 1 ? "," : "", $1 * n }')
esac

openmpi() {
  OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 mpirun.openmpi --allow-run-as-root \
    --oversubscribe -np "$n" --mca pml ob1 --mca btl $btl "$ompi" --system openmpi \
    --transport "$transport" --ops "$mpi_ops" --sizes "$mpi_sizes" --mode "$mode" 2>/dev/null |
    awk -F, -v n="$n" '/^openmpi/ {
      sub(/^allreduce$/, "all_reduce", $3)
      if ($3 == "allgather") { $3 = "all_gather"; $4 = $4 / n }
      print "openmpi," $2 "," $3 "," $4 "," $5 "," $6 }' OFS=,
}
libdist() {
  DIST_TRANSPORT=$dist_transport DIST_DEBUG=${DIST_DEBUG:-OFF} timeout 300 \
    "$build/bin/distrun" --no-prefix -n "$n" "$build/bin/bench_collectives" --ops "$ops" \
    --sizes "$sizes" --mode "$mode" --system libdist 2>/dev/null |
    awk -F, '$1 == "libdist" { print $1 "," $2 "," $3 "," $4 "," $5 "," $6 }'
}

if [ "${PEERS_PAIRED_ONE:-}" ]; then # one round (PAIRED_ROUND), both systems
  if [ $((PAIRED_ROUND % 2)) = 1 ]; then openmpi; libdist; else libdist; openmpi; fi
  exit 0
fi

loaders=
trap 'for p in $loaders; do kill "$p" 2>/dev/null; done' EXIT INT TERM
i=0
while [ "$i" -lt "${LOAD:-0}" ]; do
  sh -c 'while :; do :; done' &
  loaders="$loaders $!"
  i=$((i + 1))
done
PEERS_PAIRED_ONE=1 "$here/paired_rounds.sh" "$rounds" openmpi libdist -- sh "$0" "$@"
