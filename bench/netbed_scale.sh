#!/bin/sh
# netbed_scale.sh - connections per rank, group-creation time and rendezvous
# time at scale on the namespace test bed (issue 23): HOSTS network
# namespaces (tests/multihost/netbed.sh) of RANKS_PER_HOST ranks each, one
# distrun per host (node 0's store on host 0), running
# build/bin/bench_group_scale (its header says what each column measures:
# init, a second world group, a dp x tp mesh, connections and sockets per
# rank right after creation and after a few collectives).
#
#   bench/netbed_scale.sh [HOSTSxRANKS_PER_HOST ...]   (default: 8x8 16x16)
#   e.g. bench/netbed_scale.sh 8x8
#        MODES="hier flat" bench/netbed_scale.sh 8x8 16x16
#
# Rerun it unchanged after a backend change (lazy connections: made on
# first use) and compare the rows: conns_*_created fall to what creation
# itself needs, conns_*_used show what the collectives made.
#
# Prints CSV, one row per size and mode, bench_group_scale's columns after
#   mode,hosts_x_ranks,run,exit,wall_s,
# (mode hier: the default, hierarchical groups over hosts; flat:
# DIST_HIER=0). Times are the slowest rank's, on whatever cores the
# machine has: at 256 ranks on 2 cores they measure the scheduler as much as
# the library (read them for correctness and as rows to compare).
#
# Environment: BUILD_DIR (default build), MODES (hier), REPEAT (1: jobs per
# size and mode, one row each, on the same bed), COLLS (40),
# JOB_TIMEOUT_S (1800, one job), DIST_TIMEOUT (the groups' timeout, which
# bounds init too; default 900), KEEP=DIR keeps each job's distrun logs.
# The bed goes down after each size, on Ctrl-C or TERM (trap), and if this
# script is SIGKILLed (a guardian holds a pipe only this script writes).
# Needs root and iproute2.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD_DIR:-$here/build}" && pwd)
netbed=$here/tests/multihost/netbed.sh
modes=${MODES:-hier}
colls=${COLLS:-40}
job_timeout=${JOB_TIMEOUT_S:-1800}
sizes=${*:-8x8 16x16}
if [ ! -x "$build/bin/bench_group_scale" ] || [ ! -x "$build/bin/distrun" ]; then
  echo "$0: $build/bin/{distrun,bench_group_scale} missing: build first" >&2
  exit 2
fi
for s in $sizes; do
  case $s in
    *[!0-9x]* | x* | *x | *x*x*) echo "$0: sizes are HOSTSxRANKS_PER_HOST, not '$s'" >&2; exit 2 ;;
    *x*) ;;
    *) echo "$0: sizes are HOSTSxRANKS_PER_HOST, not '$s'" >&2; exit 2 ;;
  esac
done

P=dtb$$
tmp=
guard=
bed_down() {
  if [ -n "$guard" ]; then
    exec 9>&- # the guardian sees EOF and takes the bed down
    wait "$guard" 2>/dev/null || true
    guard=
  fi
  "$netbed" down "$P" >/dev/null 2>&1 || "$netbed" down "$P" || true
}
cleanup() {
  trap '' INT TERM HUP
  bed_down
  [ -z "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

bed_up() { # hosts
  "$netbed" up "$P" "$1" >/dev/null
  tmp=/tmp/netbed-$P-scale # the bed's scratch pattern: `down` removes it
  mkdir -p "$tmp"
  mkfifo "$tmp/guard"
  "$netbed" guard "$P" <"$tmp/guard" >/dev/null 2>&1 &
  guard=$!
  exec 9>"$tmp/guard"
}

header=
for s in $sizes; do
  hosts=${s%x*} per=${s#*x}
  bed_up "$hosts"
  master=$("$netbed" addr "$P" 0)
  run=1
  while [ $run -le "${REPEAT:-1}" ]; do
    for mode in $modes; do
      case $mode in
        hier) hier=1 ;;
        flat) hier=0 ;;
        *) echo "$0: modes are hier and flat, not '$mode'" >&2; exit 2 ;;
      esac
      port=$((29500 + 2 * run + hier))
      t0=$(date +%s.%N)
      pids=
      k=$((hosts - 1))
      while [ $k -ge 0 ]; do
        DIST_TOKEN=netbed-scale-$$ DIST_TRACE=0 DIST_DEBUG=${DIST_DEBUG:-OFF} DIST_HIER=$hier \
          DIST_TIMEOUT=${DIST_TIMEOUT:-900} \
          "$netbed" exec "$P" $k timeout "$job_timeout" "$build/bin/distrun" --no-prefix \
          --nnodes "$hosts" --node-rank $k --master-addr "$master" --master-port $port -n "$per" \
          "$build/bin/bench_group_scale" --colls "$colls" >"$tmp/out$k" 2>"$tmp/err$k" 9>&- &
        pids="$pids $!"
        k=$((k - 1))
      done
      rc=0
      for p in $pids; do wait "$p" || rc=$?; done
      wall=$(echo "$(date +%s.%N) - $t0" | bc)
      if [ -z "$header" ]; then
        header=$(grep -m 1 '^ranks,' "$tmp/out0" || true)
        [ -z "$header" ] || echo "mode,hosts_x_ranks,run,exit,wall_s,$header"
      fi
      row=$(grep -E '^[0-9]+,' "$tmp/out0" | tail -n 1 || true)
      printf '%s,%s,%s,%s,%.1f,%s\n' "$mode" "$s" "$run" "$rc" "$wall" "${row:-NA}"
      [ "$rc" = 0 ] || echo "# $mode $s: exit $rc; node 0: $(tail -n 3 "$tmp/err0")" >&2
      if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP/$mode-$s-$run"
        cp "$tmp"/out* "$tmp"/err* "$KEEP/$mode-$s-$run/"
      fi
    done
    run=$((run + 1))
  done
  bed_down
  tmp=
done
