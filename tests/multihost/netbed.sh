#!/usr/bin/env bash
# netbed.sh - a multi-host test bed on one machine (issue 23): each "host"
# is a network namespace with its own address, joined to the others by a
# veth pair into one bridge. Ranks started in host k's namespace have their
# own host identity (DESIGN.md: boot id + netns inode), so they talk to
# ranks of other hosts over TCP through the bridge, as on real machines.
# Needs root and iproute2; faults need nftables (loss, partition).
#
#   netbed.sh up P N [SKEW_S]  hosts P-h0 .. P-h(N-1) at 10.213.0.1 ..
#                              (sweeps stale beds first; prints the addresses).
#                              SKEW_S: host k's monotonic clock runs k*SKEW_S
#                              seconds ahead (a time namespace, applied by exec)
#   netbed.sh exec P K CMD...  runs CMD inside host K: its network namespace,
#                              its host name P-h<K> (a UTS namespace) and, when
#                              the bed has a skew, its time namespace
#   netbed.sh addr P K         host K's address
#   netbed.sh down P           kills every process inside the bed's hosts,
#                              removes links, bridge, nftables tables and
#                              namespaces; idempotent
#   netbed.sh guard P          waits for EOF on stdin, then `down P` (a test
#                              holds the pipe's other end: when the test ends
#                              in any way, even SIGKILL, the bed goes)
#   netbed.sh sweep            `down` for every bed whose owner pid is gone
#   netbed.sh left P           prints what of bed P still exists (namespaces,
#                              links, processes); empty output: nothing
#   netbed.sh shape P K RATE [BURST] [LIMIT_BYTES]
#                              tbf on both directions of host K's link
#                              (RATE like 100mbit; the queue turns rate into
#                              delay: this kernel has no netem)
#   netbed.sh loss P K PCT     nftables drops PCT% of host K's packets both
#                              ways (numgen random)
#   netbed.sh partition P K    nftables drops all of host K's packets
#   netbed.sh reorder P K PCT [SLOW_RATE]
#                              PCT% of host K's packets go through a slow htb
#                              class and arrive late: reordering
#   netbed.sh dup P K PCT      nftables sends PCT% of host K's packets twice
#   netbed.sh heal P K         removes host K's shaping and nftables rules
#   netbed.sh stats P K        tc and nftables counters of host K
#
# Names: P is "dtb<owner pid>" or "dtb<owner pid>x<tag>" (at most 11
# characters); namespaces P-h<K>, the bridge P-br, host K's root-side link
# P-v<K> (its namespace side is eth0). A bed belongs to the process whose
# pid it names; `sweep` removes beds of dead owners only, so parallel tests
# never touch each other's beds.
set -u
export PATH=/usr/sbin:/sbin:$PATH

die() { echo "netbed: $*" >&2; exit 1; }
ns() { echo "$1-h$2"; }
addr() { echo "10.213.0.$(($2 + 1))"; }
check_prefix() {
  [[ "$1" =~ ^dtb[0-9]+(x[a-z0-9]+)?$ ]] && [ ${#1} -le 11 ] ||
    die "bad bed prefix '$1' (dtb<pid>[x<tag>], 11 characters at most)"
}
hosts_of() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1-h[0-9]+$"; }
links_of() { ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
             grep -E "^$1-(br|v[0-9]+)$"; }

# Kills every process in the bed's namespaces and waits (deadline) until
# none is left: a namespace outlives `ip netns del` while a process is in it.
kill_all() {
  local p=$1 n pids deadline=$((SECONDS + 10))
  while :; do
    pids=""
    for n in $(hosts_of "$p"); do pids="$pids $(ip netns pids "$n" 2>/dev/null)"; done
    pids=$(echo $pids)
    [ -z "$pids" ] && return 0
    kill -KILL $pids 2>/dev/null
    [ $SECONDS -ge $deadline ] && { echo "netbed: processes survive in $p: $pids" >&2; return 1; }
    sleep 0.05 # polling a condition (processes gone) against a deadline
  done
}

down() {
  local p=$1 n l
  check_prefix "$p"
  kill_all "$p"
  for n in $(hosts_of "$p"); do ip netns exec "$n" nft flush ruleset 2>/dev/null; done
  for l in $(links_of "$p"); do ip link del "$l" 2>/dev/null; done
  for n in $(hosts_of "$p"); do ip netns del "$n" 2>/dev/null; done
  rm -f "/run/netbed-$p.skew"
  [ -z "$(left "$p")" ] || { left "$p" >&2; return 1; }
}

left() {
  local p=$1 n
  for n in $(hosts_of "$p"); do
    echo "namespace $n (processes: $(echo $(ip netns pids "$n" 2>/dev/null)))"
  done
  for n in $(links_of "$p"); do echo "link $n"; done
}

sweep() {
  local p owner
  for p in $( (ip netns list 2>/dev/null | awk '{print $1}'; links_of 'dtb[0-9]+(x[a-z0-9]+)?') |
              sed -nE 's/^(dtb[0-9]+(x[a-z0-9]+)?)-.*/\1/p' | sort -u); do
    owner=${p#dtb}; owner=${owner%%x*}
    kill -0 "$owner" 2>/dev/null && continue
    echo "netbed: removing stale bed $p (owner $owner is gone)" >&2
    down "$p"
  done
}

up() {
  local p=$1 n=$2 skew=${3:-0} k h v
  check_prefix "$p"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "hosts: 1 to 64"
  command -v ip >/dev/null || die "needs iproute2 (apt-get install iproute2)"
  sweep
  [ -z "$(left "$p")" ] || die "bed $p exists"
  ip link add "$p-br" type bridge || die "cannot create a bridge (root? CONFIG_BRIDGE?)"
  ip link set "$p-br" up
  for ((k = 0; k < n; k++)); do
    h=$(ns "$p" $k) v="$p-v$k"
    ip netns add "$h" || { down "$p"; die "cannot create namespace $h"; }
    ip link add "$v" type veth peer name "$p-t$k" || { down "$p"; die "cannot create veth"; }
    ip link set "$p-t$k" netns "$h" &&
      ip -n "$h" link set "$p-t$k" name eth0 &&
      ip -n "$h" addr add "$(addr "$p" $k)/24" dev eth0 &&
      ip -n "$h" link set eth0 up && ip -n "$h" link set lo up &&
      ip link set "$v" master "$p-br" && ip link set "$v" up ||
      { down "$p"; die "cannot wire host $k"; }
  done
  echo "$skew" >"/run/netbed-$p.skew"
  for ((k = 0; k < n; k++)); do echo "host $k $(ns "$p" $k) $(addr "$p" $k)"; done
}

# Host K's processes get its network namespace, a UTS namespace whose host
# name is P-h<K> (real hosts have their own names; the monitor tells hosts
# apart by name), and with a skew a time namespace.
run_in() {
  local p=$1 k=$2 skew=0 time=()
  shift 2
  [ -r "/run/netbed-$p.skew" ] && skew=$(cat "/run/netbed-$p.skew")
  if [ "$skew" != 0 ] && [ "$k" != 0 ]; then
    time=(--time --monotonic $((k * skew)) --boottime $((k * skew)))
  fi
  exec ip netns exec "$(ns "$p" "$k")" unshare --uts "${time[@]}" --fork --kill-child \
    /bin/sh -c 'echo "$0" >/proc/sys/kernel/hostname && exec "$@"' "$(ns "$p" "$k")" "$@"
}

nft_table() { # host, input rule, output rule: one table "netbed"
  local h=$1 rin=$2 rout=$3
  ip netns exec "$h" nft delete table inet netbed 2>/dev/null
  command -v nft >/dev/null || die "needs nftables (apt-get install nftables)"
  ip netns exec "$h" nft -f - <<EOF || die "nft refused the rules"
table inet netbed {
  chain in { type filter hook input priority 0; policy accept; $rin; }
  chain out { type filter hook output priority 0; policy accept; $rout; }
}
EOF
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) [ $# -ge 2 ] || die "up P N [SKEW_S]"; up "$@" ;;
  down) [ $# -eq 1 ] || die "down P"; down "$1" ;;
  guard)
    [ $# -eq 1 ] || die "guard P"
    check_prefix "$1"
    trap '' INT TERM HUP
    cat >/dev/null # returns at EOF: every holder of the pipe has ended
    down "$1" ;;
  sweep) sweep ;;
  left) [ $# -eq 1 ] || die "left P"; check_prefix "$1"; left "$1" ;;
  addr) [ $# -eq 2 ] || die "addr P K"; addr "$1" "$2" ;;
  exec) [ $# -ge 3 ] || die "exec P K CMD..."; check_prefix "$1"; run_in "$@" ;;
  shape)
    [ $# -ge 3 ] || die "shape P K RATE [BURST] [LIMIT_BYTES]"
    h=$(ns "$1" "$2") rate=$3 burst=${4:-16kb} limit=${5:-1mb}
    for dev in "ip netns exec $h tc qdisc replace dev eth0" "tc qdisc replace dev $1-v$2"; do
      $dev root tbf rate "$rate" burst "$burst" limit "$limit" || die "tc tbf refused"
    done ;;
  loss)
    [ $# -eq 3 ] || die "loss P K PCT"
    nft_table "$(ns "$1" "$2")" "iifname \"eth0\" numgen random mod 100 < $3 counter drop" \
      "oifname \"eth0\" numgen random mod 100 < $3 counter drop" ;;
  partition)
    [ $# -eq 2 ] || die "partition P K"
    nft_table "$(ns "$1" "$2")" "iifname \"eth0\" counter drop" "oifname \"eth0\" counter drop" ;;
  reorder)
    # PCT% of host K's outgoing packets take a slow htb class (SLOW_RATE,
    # default 100mbit) and arrive after packets sent later: reordering
    # without netem (nftables picks them: skb priority 1:20 is the class).
    [ $# -ge 3 ] || die "reorder P K PCT [SLOW_RATE]"
    h=$(ns "$1" "$2") slow=${4:-100mbit}
    ip netns exec "$h" tc qdisc replace dev eth0 root handle 1: htb default 10 &&
      ip netns exec "$h" tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit \
        burst 1mb cburst 1mb quantum 60000 &&
      ip netns exec "$h" tc class add dev eth0 parent 1: classid 1:20 htb rate "$slow" ceil "$slow" \
        quantum 1514 || die "tc htb refused"
    ip netns exec "$h" nft -f - <<EOF || die "nft refused the rules"
table ip netbedr {
  chain cslow { type filter hook output priority 0; policy accept;
    oifname "eth0" numgen random mod 100 < $3 counter meta priority set "1:20"; }
}
EOF
    ;;
  dup)
    # PCT% of host K's outgoing packets are sent twice (nftables dup).
    [ $# -eq 3 ] || die "dup P K PCT"
    ip netns exec "$(ns "$1" "$2")" nft -f - <<EOF || die "nft refused the rules"
table ip netbedd {
  chain cdup { type filter hook output priority 10; policy accept;
    oifname "eth0" numgen random mod 100 < $3 counter dup to ip daddr device "eth0"; }
}
EOF
    ;;
  heal)
    [ $# -eq 2 ] || die "heal P K"
    h=$(ns "$1" "$2")
    ip netns exec "$h" nft flush ruleset 2>/dev/null # the namespace's own: only ours
    ip netns exec "$h" tc qdisc del dev eth0 root 2>/dev/null
    tc qdisc del dev "$1-v$2" root 2>/dev/null
    true ;;
  stats)
    [ $# -eq 2 ] || die "stats P K"
    h=$(ns "$1" "$2")
    ip netns exec "$h" tc -s qdisc show dev eth0
    ip netns exec "$h" tc -s class show dev eth0
    ip netns exec "$h" nft list ruleset 2>/dev/null
    true ;;
  *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; [ -z "$cmd" ] || exit 2 ;;
esac
