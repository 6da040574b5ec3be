#!/usr/bin/env python3
"""make_seeds.py - writes the text and protocol seeds of tests/fuzz/corpus.

Run from anywhere: python3 tests/fuzz/make_seeds.py. The seeds are in the
repository; this script says how they were made and remakes them after a
protocol change. Formats (see each fuzz_*.c):
  store/     byte 0 mode, byte 1 split between two connections, then
             frames of core/src/store/store_tcp_proto.h (little-endian)
  frame/     byte 0 what rank 0 does, byte 1 size, byte 2 tag, then
             tcp_hdr frames of core/src/backends/cpu/tcp_int.h (88 bytes, host order)
  init_env/  NAME=VALUE lines
  trace/     byte 0 mode (0 merged file, 1 rank file, 2 SQL on a merged
             file, 3 SQL on a rank file; +4 screens, +8 subcommands), then
             the file or the SQL. The database seeds (merged-*, rank-*)
             are real traces: distrun -n 2 sgd, and distrun -n 3
             example_bugs --bug shape at DIST_DEBUG=DETAIL, vacuumed with
             page_size 512 (merged-ok keeps operations #1-#20); this script
             does not touch them.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# --- the store (store_tcp_proto.h) -------------------------------------------

OPS = dict(SET=1, GET=2, ADD=3, APPEND=4, CHECK=5, COMPARE_SET=6, DELETE=7, MULTI_GET=8,
           MULTI_SET=9, NUM_KEYS=10, WAIT=11, QUEUE_PUSH=12, QUEUE_POP=13, QUEUE_LEN=14,
           JOIN=15, WAIT_WORKERS=16, PING=17)


def u32(v):
    return struct.pack("<I", v)


def i64(v):
    return struct.pack("<q", v)


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return u32(len(b)) + b + b"\0"


def frame(op, body=b"", seq=1, flags=0):
    return b"DSTP" + bytes([1, OPS[op], flags, 0]) + u32(seq) + u32(len(body)) + body


def store_seeds():
    every = (frame("SET", s("k") + s("v"), 1) + frame("GET", i64(1000) + s("k"), 2)
             + frame("ADD", s("n") + i64(5), 3) + frame("APPEND", s("k") + s("w"), 4)
             + frame("CHECK", u32(2) + s("k") + s("n"), 5)
             + frame("COMPARE_SET", s("k") + s("vw") + s("x"), 6)
             + frame("DELETE", s("n"), 7) + frame("MULTI_GET", i64(10) + u32(1) + s("k"), 8)
             + frame("MULTI_SET", u32(2) + s("a") + s("1") + s("b") + s("2"), 9)
             + frame("NUM_KEYS", b"", 10) + frame("WAIT", i64(10) + u32(2) + s("a") + s("b"), 11)
             + frame("QUEUE_PUSH", s("q") + s("item"), 12)
             + frame("QUEUE_POP", i64(-1) + s("q"), 13) + frame("QUEUE_LEN", s("q"), 14)
             + frame("JOIN", b"", 15) + frame("WAIT_WORKERS", i64(10) + u32(1), 16)
             + frame("PING", b"", 17))
    out("store", "every-op", bytes([0, 255]) + every)
    out("store", "every-op-token", bytes([1, 255]) + every)
    # connection A waits for a key that connection B then sets
    a = frame("GET", i64(5000) + s("late"), 1) + frame("WAIT", i64(5000) + u32(1) + s("w"), 2)
    b = frame("SET", s("late") + s("here"), 1) + frame("SET", s("w") + s("x"), 2, flags=1)
    out("store", "park-and-wake", bytes([0, 255 * len(a) // (len(a) + len(b))]) + a + b)
    out("store", "queue-block", bytes([0, 128]) + frame("QUEUE_POP", i64(3000) + s("q"), 1)
        + frame("QUEUE_PUSH", s("q") + s("1"), 1))
    out("store", "stranger", bytes([2, 255]) + b"\0" * 40 + frame("PING"))
    out("store", "lying-count", bytes([0, 255]) + frame("CHECK", u32(0xFFFFFFFF) + s("k")))
    out("store", "huge-len", bytes([0, 255]) + b"DSTP" + bytes([1, 1, 0, 0]) + u32(1)
        + u32(0x7FFFFFFF))
    out("store", "half-frame", bytes([3, 255]) + frame("SET", s("k") + s("v"))[:20])


# --- the data plane (tcp_int.h) ------------------------------------------------

F = dict(DATA=1, RTS=2, CTS=3, BODY=4, ACK=5, NACK=6, CANCEL=7, ERROR=8, ABORT=9, BYE=10)
MAGIC = 0x31435444
CTX_P2P, CTX_COLL = 1, 2


def hdr(t, ctx=CTX_P2P, tag=0, msg_id=0, size=0, length=0, flags=0, kind=0, dtype=0xFF,
        redop=0xFF, op_seq=0, count=0, peer_count=-1, total=-1, root=-1):
    return struct.pack("<IBBHIBBHqQQqqqQQiI", MAGIC, F[t], flags, kind, ctx, dtype, redop, 0,
                       tag, msg_id, op_seq, count, peer_count, total, size, length, root, 0)


def frame_seeds():
    assert len(hdr("DATA")) == 88
    data = hdr("DATA", tag=7, msg_id=1, size=9, length=9, flags=1) + b"123456789"
    out("frame", "recv-data", bytes([1, 1, 7]) + data)
    out("frame", "any-source", bytes([2, 1, 7]) + data)
    out("frame", "unexpected-then-bye", bytes([0, 1, 7]) + data + hdr("RTS", tag=3, msg_id=2,
        size=100000) + hdr("BYE", length=4) + b"done")
    # the only other member leaves while a receive from any source waits
    out("frame", "any-source-then-bye", bytes([2, 0, 5]) + hdr("BYE"))
    out("frame", "send-ack", bytes([3, 0, 5]) + hdr("ACK", tag=5, msg_id=1))
    out("frame", "send-nack", bytes([3, 0, 5]) + hdr("NACK", tag=5, msg_id=1, size=3))
    # rank 0's large send: RTS from it, CTS from the fuzzer, then nothing
    out("frame", "large-send-cts", bytes([4, 4, 9]) + hdr("CTS", tag=9, msg_id=1, size=4352))
    out("frame", "rts-body", bytes([1, 255, 1]) + hdr("RTS", tag=1, msg_id=1, size=2041)
        + hdr("BODY", tag=1, msg_id=1, size=2041, length=2041, count=0, total=1) + b"x" * 2041)
    out("frame", "cancel", bytes([1, 200, 1]) + hdr("RTS", tag=1, msg_id=1, size=1601)
        + hdr("CANCEL", tag=1, msg_id=1))
    out("frame", "error", bytes([5, 3, 0]) + hdr("ERROR", ctx=CTX_COLL, tag=1 << 16, count=4,
        length=11) + b"it failed!!")
    out("frame", "abort", bytes([6, 3, 0]) + hdr("ABORT", length=5) + b"abort")
    coll = hdr("DATA", ctx=CTX_COLL, tag=(1 << 16) | 0, msg_id=1, size=16, length=16, kind=3,
               dtype=2, redop=0, op_seq=1, count=4, peer_count=4, total=4) + b"\0" * 16
    out("frame", "all-reduce-step", bytes([5, 3, 0]) + coll)
    out("frame", "bad-magic", bytes([1, 1, 1]) + b"A" * 88)


# --- init and environment ------------------------------------------------------

INIT = {
    "env": "MASTER_ADDR=127.0.0.1\nMASTER_PORT=29500\nRANK=0\nWORLD_SIZE=2\ninit=env://\n",
    "env-v6": "MASTER_ADDR=[::1]\nMASTER_PORT=1\nRANK=3\nWORLD_SIZE=4\nLOCAL_RANK=1\n"
              "LOCAL_WORLD_SIZE=2\n",
    "tcp-query": "init=tcp://node-1.example:29500?rank=1&world_size=2\n",
    "tcp-v6": "init=tcp://[fe80::1]:7?world_size=3\nRANK=2\nDIST_TOKEN=abc\nDIST_JOB_ID=j.1_-\n",
    "file": "init=file:///tmp/x?rank=0&world_size=1\nDIST_ALLOW_NO_TOKEN=1\n"
            "DIST_USE_AGENT_STORE=0\n",
    "opts": "opts=1,4\ninit=tcp://h:1\n",
    "logging": "DIST_DEBUG=DETAIL\nDIST_LOG_LEVEL=INFO\nDIST_LOG_SUBSYS=^TCP,SHM\n"
               "TORCH_DISTRIBUTED_DEBUG=INFO\nTORCH_CPP_LOG_LEVEL=ERROR\n",
    "timeouts": "DIST_TIMEOUT=1.5m\nDIST_TCP_SPIN_US=10\nDIST_SOCKETS_PER_PEER=4\n"
                "DIST_STORE_SPIN_US=x\n",
    "ifname": "DIST_SOCKET_IFNAME=lo,eth0,lo\nGLOO_SOCKET_IFNAME=lo\n",
    "backend": "backend=cpu:gloo,cuda:nccl\n",
    "cause": "cause=4 3 1\x01@\tculprits=1,2\tgroup=0\tgname=tp\top=ALL_REDUCE\tseq=7"
             "\tfield=shape\tsite=train.c:42\x01desync in group 0\n",
    "cause-plain": "cause=3 -1\x01rank 1 has not entered #5\n",
}


def init_seeds():
    for name, text in INIT.items():
        out("init_env", name, text)


# --- SQL on an intact trace (trace modes 2 and 3) ---------------------------------

SQL = {
    "future-version": (2, "UPDATE meta SET value = '2' WHERE key = 'schema_version';"),
    "future-columns": (2, "ALTER TABLE operations ADD COLUMN stream INTEGER DEFAULT 7;"
                          "ALTER TABLE ranks ADD COLUMN gpu TEXT;"
                          "CREATE TABLE newer (x);"),
    "view-for-table": (2, "ALTER TABLE groups RENAME TO g2;"
                          "CREATE VIEW groups AS SELECT * FROM g2 WHERE group_id > 0;"),
    "types": (2 | 8, "UPDATE operations SET seq = 'x', shape = X'00ff', t_enqueued_ns = 1e300"
                     " WHERE rowid % 2; UPDATE ranks SET end_state = NULL;"),
    "no-events": (2 | 4, "DROP TABLE events;"),
    "huge-numbers": (2 | 12, "UPDATE groups SET size = 9223372036854775807, members ="
                             " '[0,1,2147483647,-5]'; UPDATE job SET world_size = -1;"),
    "rank-future": (3, "UPDATE meta SET value = '99' WHERE key = 'schema_version';"),
    "rank-columns": (3, "ALTER TABLE ops ADD COLUMN extra BLOB; UPDATE ops SET code = -1;"),
    "rank-clocks": (3 | 8, "INSERT INTO clocks VALUES (0, 1, 9223372036854775807, -1),"
                           " (0, 2, -9223372036854775808, 0);"),
    "rank-wrong-job": (3, "UPDATE meta SET value = 'other' WHERE key = 'job_id';"),
    "writable-schema": (2, "PRAGMA writable_schema = ON; UPDATE sqlite_master SET"
                           " sql = replace(sql, 'INTEGER', 'TEXT') WHERE name = 'ranks';"),
}


def trace_seeds():
    for name, (mode, sql) in SQL.items():
        out("trace", "sql-" + name, bytes([mode]) + sql.encode())


if __name__ == "__main__":
    store_seeds()
    frame_seeds()
    init_seeds()
    trace_seeds()
