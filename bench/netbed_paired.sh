#!/bin/sh
# netbed_paired.sh - libdist hierarchical, libdist flat TCP and Open MPI on
# the namespace test bed (tests/multihost/netbed.sh: one network namespace
# per host, veth links through a bridge), same placement, in paired rounds
# (issue 23).
#
#   bench/netbed_paired.sh HOSTS RANKS_PER_HOST ROUNDS [RATE [BURST [LIMIT]]]
#   e.g. bench/netbed_paired.sh 2 2 5              links as they are
#        bench/netbed_paired.sh 4 2 5 10gbit       tbf on every host's link
#
# Brings a bed of HOSTS hosts up (named dtb<this pid>), optionally shapes
# every host's link both ways with `netbed.sh shape P K RATE BURST LIMIT`
# (tbf; BURST default 256kb: iperf3 through one link reads 9.5 Gbit/s at
# 10gbit with 256kb, 3.75 with 64kb; LIMIT, the queue in bytes, default
# 1mb as netbed.sh's; the kernel has no netem, so no fixed delay: a queue
# delays only what waits in it), then per round runs three systems back to
# back on the same ranks (rank r on host r / RANKS_PER_HOST), the first
# system rotating from round to round so none always runs on a machine
# another just warmed:
#   hier     libdist's default: shared memory inside a host, TCP between
#            host leaders (one distrun per host, node 0's store on host 0)
#   flat     the same with DIST_HIER=0: one TCP mesh over all ranks
#   openmpi  shared/peers/mpi's bench_ompi under mpirun in host 0's
#            namespace; remote orteds start through an agent script that
#            enters host K's namespace (plm_rsh_agent), pml ob1, btl
#            self,vader,tcp (vader inside a host, tcp on eth0 between
#            hosts), --bind-to none, mpi_yield_when_idle 1 (each "host" has
#            as many slots as ranks, so Open MPI does not know the machine
#            is oversubscribed and would busy-poll; with --oversubscribe, as
#            the peers' own runs use, it yields by itself)
# The bed goes down at the end, on Ctrl-C or TERM (trap), and if this
# script is SIGKILLed (a guardian, `netbed.sh guard`, holds a pipe only
# this script writes; any later `netbed.sh up` also sweeps it).
#
# Prints CSV, per op and size: the median over rounds of each system (µs),
# the median per-round ratio hier/flat and hier/openmpi (below 1: hier
# faster) and in how many rounds hier was ahead of each:
#   op,bytes,flat_us,hier_us,openmpi_us,hier_flat,hier_ahead_of_flat,hier_ompi,hier_ahead_of_ompi
# bytes are each rank's input (Open MPI's bench counts an allgather's
# gathered output: its all_gather rows are divided by the world size).
#
# Environment: BUILD_DIR (default build), PEERS (default ../shared/peers
# beside the repository), OPS (all_reduce,broadcast,all_gather), SIZES
# (4,1048576,16777216), MODE (throughput; or latency), ITERS (minimum
# samples, 15), TARGET_MS (300), RAW=FILE keeps every round's rows.
# With RATE, each host's tbf counters (bytes, drops, overlimits) go to
# stderr at the end: drops mean TCP retransmissions inside the figures.
# Needs root, iproute2, Open MPI (shared/peers/mpi/build.sh builds it).
set -eu
[ $# -ge 3 ] || {
  echo "usage: $0 HOSTS RANKS_PER_HOST ROUNDS [RATE [BURST [LIMIT]]]" >&2
  exit 2
}
hosts=$1 per=$2 rounds=$3 rate=${4:-} burst=${5:-256kb} limit=${6:-1mb}
for v in "$hosts" "$per" "$rounds"; do
  case $v in '' | *[!0-9]*) echo "$0: HOSTS, RANKS_PER_HOST and ROUNDS are numbers" >&2; exit 2 ;; esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD_DIR:-$here/build}" && pwd)
peers=${PEERS:-$here/../shared/peers}
ompi=$(cd "$peers/mpi" 2>/dev/null && pwd)/bench_ompi
netbed=$here/tests/multihost/netbed.sh
ops=${OPS:-all_reduce,broadcast,all_gather}
sizes=${SIZES:-4,1048576,16777216}
mode=${MODE:-throughput}
iters=${ITERS:-15}
target=${TARGET_MS:-300}
world=$((hosts * per))
if [ ! -x "$build/bin/bench_collectives" ] || [ ! -x "$build/bin/distrun" ]; then
  echo "$0: $build/bin/{distrun,bench_collectives} missing: build first" >&2
  exit 2
fi
[ -x "$ompi" ] || { echo "$0: $ompi missing: run $peers/mpi/build.sh" >&2; exit 2; }
command -v mpirun.openmpi >/dev/null || { echo "$0: mpirun.openmpi missing" >&2; exit 2; }

P=dtb$$
tmp=/tmp/netbed-$P-paired # inside the bed's scratch pattern: `down` removes it
guard=
cleanup() {
  trap '' INT TERM HUP
  if [ -n "$guard" ]; then
    exec 9>&-           # the guardian sees EOF and takes the bed down
    wait "$guard" 2>/dev/null || true
  fi
  "$netbed" down "$P" >/dev/null 2>&1 || "$netbed" down "$P" || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

"$netbed" up "$P" "$hosts" >/dev/null
mkdir -p "$tmp"
mkfifo "$tmp/guard"
"$netbed" guard "$P" <"$tmp/guard" >/dev/null 2>&1 &
guard=$!
exec 9>"$tmp/guard"
if [ -n "$rate" ]; then
  k=0
  while [ $k -lt "$hosts" ]; do
    "$netbed" shape "$P" $k "$rate" "$burst" "$limit" 9>&-
    k=$((k + 1))
  done
fi

# mpirun's remote shell: "agent.sh 10.213.0.<K+1> orted ARGS" runs the
# command line in host K's namespace, as ssh would on host K.
cat >"$tmp/agent.sh" <<EOF
#!/bin/sh
h=\$1
shift
exec "$netbed" exec "$P" \$((\${h##*.} - 1)) /bin/sh -c "\$*"
EOF
chmod +x "$tmp/agent.sh"
hostlist=
k=0
while [ $k -lt "$hosts" ]; do
  hostlist="$hostlist${hostlist:+,}$("$netbed" addr "$P" $k):$per"
  k=$((k + 1))
done

mpi_ops=$(echo "$ops" | sed 's/all_reduce/allreduce/; s/all_gather/allgather/')
mpi_sizes=$sizes
ag_sizes=$(echo "$sizes" | tr , '\n' | awk -v n="$world" '{ printf "%s%d", (NR > 1 ? "," : ""), $1 * n }')

# Rows out: system,op,bytes,us
openmpi() {
  out=$( { "$netbed" exec "$P" 0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout 600 mpirun.openmpi --allow-run-as-root --host "$hostlist" -np "$world" \
      --bind-to none --mca plm_rsh_agent "$tmp/agent.sh" --mca pml ob1 \
      --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      --mca mpi_yield_when_idle 1 "$ompi" --system openmpi --transport tcp \
      --ops "$1" --sizes "$2" --mode "$mode" --min-iters "$iters" --target-ms "$target" \
      2>"$tmp/openmpi.err" 9>&-; } || echo "# openmpi failed: $(tail -n 3 "$tmp/openmpi.err")" >&2)
  echo "$out" | awk -F, -v n="$world" '/^openmpi/ {
      sub(/^allreduce$/, "all_reduce", $3)
      if ($3 == "allgather") { $3 = "all_gather"; $4 = $4 / n }
      print "openmpi," $3 "," $4 "," $6 }'
}
# Open MPI's allgather takes gathered sizes: run it apart from the others.
openmpi_all() {
  o=$(echo "$mpi_ops" | tr , '\n' | grep -v '^allgather$' | paste -sd, -)
  [ -z "$o" ] || openmpi "$o" "$mpi_sizes"
  case ,$mpi_ops, in *,allgather,*) openmpi allgather "$ag_sizes" ;; esac
}

libdist() { # system DIST_HIER round: a port of its own per run
  port=$((29500 + 2 * $3 + $2))
  pids=
  k=$((hosts - 1))
  while [ $k -ge 0 ]; do
    DIST_TOKEN=netbed-paired-$$ DIST_TRACE=0 DIST_DEBUG=${DIST_DEBUG:-OFF} DIST_HIER=$2 \
      "$netbed" exec "$P" $k timeout 600 "$build/bin/distrun" --no-prefix --nnodes "$hosts" \
      --node-rank $k --master-addr "$("$netbed" addr "$P" 0)" --master-port $port -n "$per" \
      "$build/bin/bench_collectives" --system "$1" --ops "$ops" --sizes "$sizes" \
      --mode "$mode" --iters "$iters" --target-ms "$target" \
      >"$tmp/out$k" 2>"$tmp/err$k" 9>&- &
    pids="$pids $!"
    k=$((k - 1))
  done
  rc=0
  for p in $pids; do wait "$p" || rc=$?; done
  [ $rc = 0 ] || echo "# libdist $1 failed ($rc): $(tail -n 3 "$tmp/err0")" >&2
  awk -F, -v s="$1" '$1 == s { print s "," $3 "," $4 "," $6 }' "$tmp/out0"
}

raw=$tmp/raw
: >"$raw"
r=1
while [ $r -le "$rounds" ]; do
  case $((r % 3)) in
    1) order="hier flat openmpi" ;;
    2) order="flat openmpi hier" ;;
    *) order="openmpi hier flat" ;;
  esac
  for s in $order; do
    case $s in
      hier) libdist hier 1 $r ;;
      flat) libdist flat 0 $r ;;
      openmpi) openmpi_all ;;
    esac | awk -v r="$r" '{ print r "," $0 }' >>"$raw"
  done
  echo "# round $r of $rounds done ($(date +%T))" >&2
  r=$((r + 1))
done
[ -z "${RAW:-}" ] || cp "$raw" "$RAW"
if [ -n "$rate" ]; then # what the queues did over the whole run (both directions)
  k=0
  while [ $k -lt "$hosts" ]; do
    "$netbed" stats "$P" $k 9>&- | awk -v k=$k '/^ Sent/ { s += $2; d += $7; o += $9 }
      END { gsub(/,/, "", d); printf "# host %d tbf (its side): sent %.0f bytes, dropped %d, overlimits %d\n", k, s, d, o }' >&2
    tc -s qdisc show dev "$P-v$k" | awk -v k=$k '/^ Sent/ { s += $2; d += $7; o += $9 }
      END { printf "# host %d tbf (bridge side): sent %.0f bytes, dropped %d, overlimits %d\n", k, s, d, o }' >&2
    k=$((k + 1))
  done
fi

echo "op,bytes,flat_us,hier_us,openmpi_us,hier_flat,hier_ahead_of_flat,hier_ompi,hier_ahead_of_ompi"
awk -F, '
  function median(a, n,   i, j, t) {
    if (n == 0) return -1
    for (i = 2; i <= n; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { v[$2, $1, $3 "," $4] = $5; key[$3 "," $4] = 1; round[$1] = 1 }
  END {
    for (k in key) {
      nf = nh = no = nrf = nro = af = ao = 0
      for (r in round) {
        f = v["flat", r, k]; h = v["hier", r, k]; o = v["openmpi", r, k]
        if (f != "") fl[++nf] = f
        if (h != "") hi[++nh] = h
        if (o != "") om[++no] = o
        if (h != "" && f != "") { rf[++nrf] = h / f; if (h < f) af++ }
        if (h != "" && o != "") { ro[++nro] = h / o; if (h < o) ao++ }
      }
      printf "%s,%.1f,%.1f,%.1f,%.2f,%d/%d,%.2f,%d/%d\n", k, median(fl, nf), median(hi, nh),
             median(om, no), median(rf, nrf), af, nrf, median(ro, nro), ao, nro
    }
  }' "$raw" | sort -t, -k1,1 -k2,2n
