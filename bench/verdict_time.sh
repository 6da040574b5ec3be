#!/bin/sh
# verdict_time.sh - time from a planted fault to distrun's verdict, with the
# group timeout far away (DIST_TIMEOUT=600): a proven deadlock (receive
# against receive, and a wait-for cycle across groups) and a rank that
# exits or dies that others wait for must end the job within seconds.
#
#     bench/verdict_time.sh [build dir] [ranks...]     (default: build 8 64)
#
# CSV on stdout: ranks,fault,exit,fault_to_exit_s,cycle_named
# (exit: distrun's status, 11 hang, 12 a rank ended; cycle_named: the
# verdict holds "deadlock: a wait-for cycle"). Set DIST_EARLY_VERDICT=0 to
# see the old behaviour (each deadlock then waits the whole timeout; the
# script stops it after 60 s and prints exit 124).
set -u
B=${1:-build}
shift 2>/dev/null || true
RANKS=${*:-8 64}
BIN=$B/bin
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo "ranks,fault,exit,fault_to_exit_s,cycle_named"
for n in $RANKS; do
  for fault in recvrecv cross exit kill; do
    (cd "$T" && DIST_TIMEOUT=600 DIST_TRACE=0 timeout 120 "$OLDPWD/$BIN/distrun" -n "$n" \
       "$OLDPWD/$BIN/scale_job" --colls 200 --fault "$fault" >out 2>err)
    rc=$?
    end=$(date +%s%3N)
    at=$(awk '/FAULT_AT_MS/ {for (i = 1; i < NF; i++) if ($i == "FAULT_AT_MS") {print $(i + 1); exit}}' "$T/out")
    named=$(grep -c "deadlock: a wait-for cycle" "$T/err" | awk '{print ($1 > 0) ? "yes" : "no"}')
    if [ -n "$at" ]; then
      s=$(awk -v a="$at" -v b="$end" 'BEGIN {printf "%.2f", (b - a) / 1000}')
    else
      s=NA
    fi
    echo "$n,$fault,$rc,$s,$named"
  done
done
