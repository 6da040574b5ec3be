#!/bin/sh
# scale.sh - the same job at growing rank counts on this machine (issue 24):
# init, a 2-D mesh, a few hundred collectives (bench/scale_job.c), at
# DIST_DEBUG=OFF and DETAIL, then one planted desync and one planted hang,
# each checked against what the verdict must name (rank, group, op, field)
# and timed from the fault to distrun's exit; trace sizes and merge time.
#
#     bench/scale.sh [build dir] [ranks...]      (default: build 16 64 256)
#
# CSV on stdout, one row per rank count:
#   ranks,init_ms_off,first_ms_off,per_coll_us_off,init_ms_detail,
#   first_ms_detail,per_coll_us_detail,detail_added_us,desync_exit,desync_ok,
#   desync_fault_to_report_s,hang_exit,hang_ok,hang_fault_to_report_s,
#   deadlock_exit,deadlock_ok,deadlock_fault_to_report_s,rank_files_kb,
#   trace_db_kb,merge_s
# (times of init, first collective and per collective are rank 0's; the
# hang is a busy rank, reported at DIST_TIMEOUT=$HANG_TIMEOUT seconds
# (default 10, and ranks/2 above 64 ranks: the group's timeout bounds init
# too, which takes 15-20 s for 256 ranks on 2 cores); the deadlock a cycle
# across groups with DIST_TIMEOUT=$CROSS_TIMEOUT (default 600, ended early
# by the monitor's proof); *_ok: the verdict of `distview diagnose --json` names the planted
# rank (and for the desync and the hang its group and operation, the tp
# all_reduce, and the desync's field; the deadlock's culprit is blocked in
# the world all_reduce it called first)). Everything
# runs on the same cores, so absolute times are pessimistic: compare rows.
set -u
B=${1:-build}
shift 2>/dev/null || true
RANKS=${*:-16 64 256}
BIN=$(cd "$B/bin" && pwd)
COLLS=${COLLS:-300}
HANG_TIMEOUT=${HANG_TIMEOUT:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# run NAME N [env...] -- args: distrun -n N scale_job args in $T/NAME; sets rc, t_end
run() {
  name=$1 n=$2
  shift 2
  mkdir -p "$T/$name"
  (cd "$T/$name" && env "$@" >out 2>err)
  rc=$?
  t_end=$(date +%s%3N)
}

csv_field() { # the CSV line rank 0 printed, field $2
  grep -h -E '^(\[0\] )?[0-9]+,[0-9.]+,' "$1" | sed 's/^\[0\] //' | head -1 | cut -d, -f"$2"
}

fault_at() {
  awk '/FAULT_AT_MS/ {for (i = 1; i < NF; i++) if ($i == "FAULT_AT_MS") {print $(i + 1); exit}}' "$1"
}

secs() { # from epoch ms $1 to $2
  if [ -n "$1" ]; then awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b - a) / 1000}'; else echo NA; fi
}

verdict_ok() { # dir, then strings the JSON verdict must hold
  d=$1
  shift
  j=$("$BIN/distview" diagnose --json "$d/trace.db" 2>/dev/null | head -c 4000)
  for s in "$@"; do
    case $j in *"$s"*) ;; *) echo no; return ;; esac
  done
  echo yes
}

echo "ranks,init_ms_off,first_ms_off,per_coll_us_off,init_ms_detail,first_ms_detail,per_coll_us_detail,detail_added_us,desync_exit,desync_ok,desync_fault_to_report_s,hang_exit,hang_ok,hang_fault_to_report_s,deadlock_exit,deadlock_ok,deadlock_fault_to_report_s,rank_files_kb,trace_db_kb,merge_s"
for n in $RANKS; do
  last=$((n - 1))
  run off$n "$n" DIST_DEBUG=OFF DIST_TIMEOUT=600 "$BIN/distrun" -n "$n" "$BIN/scale_job" --colls "$COLLS"
  run detail$n "$n" DIST_DEBUG=DETAIL DIST_TIMEOUT=600 "$BIN/distrun" -n "$n" "$BIN/scale_job" --colls "$COLLS"
  io=$(csv_field "$T/off$n/out" 2); fo=$(csv_field "$T/off$n/out" 3); po=$(csv_field "$T/off$n/out" 5)
  id=$(csv_field "$T/detail$n/out" 2); fd=$(csv_field "$T/detail$n/out" 3); pd=$(csv_field "$T/detail$n/out" 5)
  added=$(awk -v a="${pd:-0}" -v b="${po:-0}" 'BEGIN {printf "%.1f", a - b}')
  files_kb=$(du -sk "$T/detail$n/dist-trace" 2>/dev/null | cut -f1)
  db_kb=$(du -sk "$T/detail$n/trace.db" 2>/dev/null | cut -f1)
  job=$(ls -d "$T/detail$n"/dist-trace/*/ 2>/dev/null | head -1)
  m0=$(date +%s%3N)
  "$BIN/distview" merge "$job" -o "$T/detail$n/remerge.db" >/dev/null 2>&1
  merge=$(secs "$m0" "$(date +%s%3N)")

  run desync$n "$n" DIST_DEBUG=DETAIL DIST_TIMEOUT=600 "$BIN/distrun" -n "$n" "$BIN/scale_job" --colls "$COLLS" --fault desync
  d_rc=$rc d_s=$(secs "$(fault_at "$T/desync$n/out")" "$t_end")
  d_ok=$(verdict_ok "$T/desync$n" '"kind":"desync"' "\"culprits\":[$last]" '"group_name":"tp"' '"op":"ALL_REDUCE"' '"fields":"dtype"')

  ht=${HANG_TIMEOUT:-$((n > 64 ? n / 2 : 10))}
  run hang$n "$n" DIST_DEBUG=DETAIL DIST_TIMEOUT="$ht" "$BIN/distrun" -n "$n" "$BIN/scale_job" --colls "$COLLS" --fault hang
  h_rc=$rc h_s=$(secs "$(fault_at "$T/hang$n/out")" "$t_end")
  h_ok=$(verdict_ok "$T/hang$n" '"kind":"hang"' "\"culprits\":[$last]" '"group_name":"tp"' '"op":"ALL_REDUCE"')

  ct=${CROSS_TIMEOUT:-600} # the proof ends it early, at every size
  run cross$n "$n" DIST_DEBUG=DETAIL DIST_TIMEOUT="$ct" "$BIN/distrun" -n "$n" "$BIN/scale_job" --colls "$COLLS" --fault cross
  c_rc=$rc c_s=$(secs "$(fault_at "$T/cross$n/out")" "$t_end")
  c_ok=$(verdict_ok "$T/cross$n" '"kind":"hang"' "\"culprits\":[$last]")

  echo "$n,$io,$fo,$po,$id,$fd,$pd,$added,$d_rc,$d_ok,$d_s,$h_rc,$h_ok,$h_s,$c_rc,$c_ok,$c_s,$files_kb,$db_kb,$merge"
  if [ -n "${SCALE_KEEP:-}" ]; then cp -r "$T" "$SCALE_KEEP.$n"; fi
  rm -rf "$T"/*
done
