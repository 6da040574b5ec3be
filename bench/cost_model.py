#!/usr/bin/env python3
"""cost_model.py - alpha-beta cost of the cpu backend's collectives for
groups that span hosts, flat (one TCP full mesh) against hierarchical
(shared memory inside a host, TCP among the host leaders). The model and its
terms are explained in bench/COST_MODEL_HOSTS.md.

    bench/cost_model.py [--hosts 2,4,...] [--per-host 1,2,...] [--bytes 4,1048576,...]
                        [--alpha-net S] [--beta-net S_PER_B] [--overhead S] [--alpha-shm S]
                        [--beta-shm S_PER_B] [--direct-bytes B] [--op all_reduce,...]

Prints CSV: op,hosts,per_host,bytes,schedule,msgs_per_rank,bytes_per_host_link,
conns_per_rank,conns_job,store_ops_create,mem_per_rank,predicted_us
(schedule: flat-direct, flat-rsag, flat-tree, hier-direct, hier-rsag, ...).
"""
import argparse
import math


def flat(op, h, l, s, p):
    n = h * l
    remote = n - l  # peers of a rank that are on other hosts
    if op == "all_reduce":
        if (n - 1) * s <= p.direct:
            sched, msgs, link = "flat-direct", n - 1, l * remote * s
            t = p.an + link * p.bn + (n - 1) * s * p.bs
        else:
            sched, msgs, link = "flat-rsag", 2 * (n - 1), 2 * l * remote * s / n
            t = 2 * p.an + link * p.bn + 2 * s * p.bs
        mem = s
    elif op == "all_gather":
        sched, msgs, link = "flat-direct", n - 1, l * remote * s
        t = p.an + link * p.bn + n * s * p.bs
        mem = 0
    else:  # broadcast: root to everyone up to 4 ranks, else a binomial tree
        if n <= 4:
            sched, msgs, link = "flat-direct", n - 1, remote * s
            t = p.an + link * p.bn
        else:
            steps = math.ceil(math.log2(n))
            sched, msgs, link = "flat-tree", 1, steps * s  # worst host: one send per step
            t = steps * (p.an + s * p.bn)
        mem = 0
    conns = n - 1
    # store: identity (1 set, n-1 gets), TCP addresses (1 set, a wait and
    # get per lower rank), the ready counter and its wait
    store = 1 + (n - 1) + 1 + (n - 1) + 2
    return sched, msgs, link, conns, n * conns // 2, store, mem + conns * p.rbuf, t


def hier(op, h, l, s, p):
    n = h * l
    shm_sync = 2 * p.ash if l > 1 else 0
    if op == "all_reduce":
        local = (l * s + s) * p.bs if l > 1 else 0  # reduce l inputs, broadcast
        if (h - 1) * s <= p.direct:
            sched, msgs, link = "hier-direct", h - 1, (h - 1) * s
            t = p.an + link * p.bn + (h - 1) * s * p.bs
        else:
            sched, msgs, link = "hier-rsag", 2 * (h - 1), 2 * (h - 1) * s / h
            t = 2 * p.an + link * p.bn + 2 * s * p.bs
        t += shm_sync + local
        mem = s
    elif op == "all_gather":
        blk = l * s  # hosts' blocks padded to the largest host
        sched, msgs, link = "hier-direct", h - 1, (h - 1) * blk
        t = p.an + link * p.bn + shm_sync + (blk + 2 * n * s) * p.bs
        mem = blk + n * s
    else:
        if h <= 4:
            sched, msgs, link = "hier-direct", h - 1, (h - 1) * s
            t = p.an + link * p.bn
        else:
            steps = math.ceil(math.log2(h))
            sched, msgs, link = "hier-tree", 1, steps * s
            t = steps * (p.an + s * p.bn)
        t += shm_sync + (s * p.bs if l > 1 else 0)
        mem = 0
    leader_conns = h - 1
    # today the point-to-point mesh stays eager (n-1 on every rank);
    # collectives alone need only the leaders' h-1 (a leader) or 0
    conns = leader_conns + (n - 1)
    job = h * (h - 1) // 2 + n * (n - 1) // 2
    store = (1 + (n - 1) + 1 + (n - 1) + 2) + 3 + (2 + 2 * (h - 1))
    return sched, msgs, link, conns, job, store, mem + conns * p.rbuf, t


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--hosts", default="2,4,8,16,64,256,1024")
    a.add_argument("--per-host", default="1,2,4,8,16")
    a.add_argument("--bytes", default="4,1048576,16777216")
    a.add_argument("--op", default="all_reduce,broadcast,all_gather")
    a.add_argument("--alpha-net", type=float, default=25e-6, help="s per message between hosts")
    a.add_argument("--beta-net", type=float, default=1 / 1.25e9, help="s per byte on a host's link")
    a.add_argument("--overhead", type=float, default=2e-6, help="s of CPU per message sent")
    a.add_argument("--alpha-shm", type=float, default=1e-6, help="s per shared-memory step")
    a.add_argument("--beta-shm", type=float, default=1 / 5e9, help="s per byte copied or reduced")
    a.add_argument("--direct-bytes", type=int, default=256 << 10, help="DIST_TCP_DIRECT_BYTES")
    a.add_argument("--rbuf", type=int, default=64 << 10, help="receive buffer per TCP connection")
    o = a.parse_args()
    o.an, o.bn, o.ash, o.bs, o.direct = o.alpha_net, o.beta_net, o.alpha_shm, o.beta_shm, o.direct_bytes
    print("op,hosts,per_host,bytes,schedule,msgs_per_rank,bytes_per_host_link,conns_per_rank,"
          "conns_job,store_ops_create,mem_per_rank,predicted_us")
    for op in o.op.split(","):
        for h in map(int, o.hosts.split(",")):
            for l in map(int, o.per_host.split(",")):
                for s in map(int, o.bytes.split(",")):
                    for f in (flat, hier):
                        r = list(f(op, h, l, s, o))
                        r[7] += r[1] * o.overhead  # a rank posts its messages one by one
                        print("%s,%d,%d,%d,%s,%d,%.0f,%d,%d,%d,%d,%.1f"
                              % (op, h, l, s, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] * 1e6))


if __name__ == "__main__":
    main()
