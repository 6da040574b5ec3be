#!/usr/bin/env python3
"""otlp_dead_cost.py - what live OTLP export to a dead collector costs a job.

    bench/otlp_dead_cost.py [--build build] [--rounds 5] [--sizes 4,65536,1048576]
                            [--target-ms 1500] [--mode both]

Paired rounds of bench_collectives (all_reduce, 2 ranks over shared memory,
under distrun) in four setups, their order rotated each round:
  none      no observer at all (--no-observer)
  traced    the tracer recording (the default), no live export
  closed    traced + DIST_OTLP_ENDPOINT=http://127.0.0.1:<a closed port>
            (every connection is refused at once)
  blackhole traced + DIST_OTLP_ENDPOINT to a port that accepts connections
            (the kernel's backlog) but never reads nor answers (each request
            waits its DIST_OTLP_TIMEOUT_MS)
Each run lasts several live-export cycles (DIST_OTLP_INTERVAL_MS, 1000 by
default), so the exporter runs while the job is timed.

Prints CSV `round,setup,mode,bytes,median_us` for every run, then per setup,
mode and size the median and the minimum over rounds and the median of the
per-round differences against `traced` (paired: the machine's load moves
both), in us and in percent; and the CPU time the exporter threads took, per second of
job (from each rank's otlp_export event in trace.db: load does not move
that figure). On a loaded machine single runs spike (a rank
preempted while it spins); the paired median and the minimum resist that. The speed goal: recording adds at most 0.05 us to a 4 B
all_reduce and 1% from 64 KiB; a dead collector should add nothing
measurable on top of recording."""
import argparse
import os
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


def run(args, setup, endpoint, tmp):
    env = dict(os.environ)
    env["DIST_TRACE"] = os.path.join(tmp, "trace")
    env.pop("DIST_OTLP_ENDPOINT", None)
    if endpoint:
        env["DIST_OTLP_ENDPOINT"] = endpoint
        if args.interval_ms:
            env["DIST_OTLP_INTERVAL_MS"] = str(args.interval_ms)
    cmd = [os.path.join(args.build, "bin", "distrun"), "-n", "2", "--no-prefix",
           "--trace-out", os.path.join(tmp, "trace.db"),
           os.path.join(args.build, "bin", "bench_collectives"), "--ops", "all_reduce",
           "--sizes", args.sizes, "--target-ms", str(args.target_ms), "--mode", args.mode]
    if setup == "none":
        cmd.append("--no-observer")
    tdb = os.path.join(tmp, "trace.db")
    if os.path.exists(tdb):
        os.unlink(tdb)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"{setup}: exit {out.returncode}\n{out.stderr}")
    rows = []
    for line in out.stdout.splitlines():
        f = line.split(",")
        if len(f) == 8 and f[2] == "all_reduce":
            rows.append((f[7], int(f[3]), float(f[5])))
    # the exporter threads' CPU time and the job's length, from the trace
    cpu_ms, job_s = 0.0, 0.0
    if not os.path.exists(tdb):  # no observer: no trace
        return rows, cpu_ms, job_s
    db = sqlite3.connect(tdb)
    for (m,) in db.execute("SELECT message FROM events WHERE kind = 'otlp_export'"):
        g = re.search(r"used ([0-9.]+) ms of CPU", m or "")
        cpu_ms += float(g.group(1)) if g else 0.0
    (span,) = db.execute("SELECT (ended_ns - started_ns) / 1e9 FROM job").fetchone()
    db.close()
    return rows, cpu_ms, span or job_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="4,65536,1048576")
    ap.add_argument("--target-ms", type=int, default=1500)
    ap.add_argument("--mode", default="both")
    ap.add_argument("--interval-ms", type=int, default=0,
                    help="DIST_OTLP_INTERVAL_MS for the export setups (0: the default, 1000);"
                         " small values make the exporter try far more often")
    args = ap.parse_args()
    hole = socket.socket()  # accepts (backlog) but never reads or answers
    hole.bind(("127.0.0.1", 0))
    hole.listen(4096)
    setups = {"none": None, "traced": None,
              "closed": f"http://127.0.0.1:{closed_port()}",
              "blackhole": f"http://127.0.0.1:{hole.getsockname()[1]}"}
    names = list(setups)
    res = {}  # (setup, mode, bytes) -> [median_us per round]
    cpu = {}  # setup -> [(exporter CPU ms over both ranks, job seconds)]
    print("round,setup,mode,bytes,median_us", flush=True)
    with tempfile.TemporaryDirectory(prefix="dist-otlp-cost-") as tmp:
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for setup in order:
                rows, cpu_ms, job_s = run(args, setup, setups[setup], tmp)
                cpu.setdefault(setup, []).append((cpu_ms, job_s))
                for mode, size, us in rows:
                    res.setdefault((setup, mode, size), [None] * args.rounds)[r] = us
                    print(f"{r},{setup},{mode},{size},{us:.3f}", flush=True)
    hole.close()
    print("\nsetup,exporter_cpu_ms_per_job_s (both ranks' exporter threads, median over rounds)")
    for setup in ("closed", "blackhole"):
        v = [c / s for c, s in cpu.get(setup, []) if s > 0]
        print(f"{setup},{statistics.median(v):.3f}" if v else f"{setup},n/a")
    print("\nsetup,mode,bytes,median_us,min_us,median_delta_vs_traced_us,delta_pct")
    for (setup, mode, size), v in sorted(res.items()):
        base = res.get(("traced", mode, size))
        d = [a - b for a, b in zip(v, base) if a is not None and b is not None]
        md = statistics.median(d) if d else float("nan")
        bm = statistics.median([b for b in base if b is not None])
        xs = [x for x in v if x is not None]
        print(f"{setup},{mode},{size},{statistics.median(xs):.3f},{min(xs):.3f},"
              f"{md:+.3f},{100 * md / bm:+.2f}")


if __name__ == "__main__":
    main()
