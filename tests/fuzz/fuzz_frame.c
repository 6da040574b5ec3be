/* fuzz_frame.c - libFuzzer target: the data plane's frame parser and
 * receive state machine (tcp_frame.c, tcp_p2p.c), fed by a member gone
 * bad. Each input creates a real two-rank TCP engine: this process is rank
 * 0 (dist__tcp_create over an in-process store), and a thread plays rank
 * 1, which passes the token exchange and the hello as a member would and
 * then sends the input's bytes as its frames:
 *   byte 0, bits 0-2: what rank 0 is doing meanwhile: 0 nothing but
 *         progress (every message is unexpected), 1 a receive from rank 1,
 *         2 a receive from any source, 3 a small send to rank 1 (eager: it
 *         waits for ACK/NACK), 4 a large send (RTS, waits for CTS), 5 an
 *         all_reduce of float32, 6 a broadcast from rank 1, 7 a broadcast
 *         from rank 0;
 *   byte 1: the size (elements or bytes) of that operation;
 *   byte 2: its tag (point-to-point);
 *   the rest: rank 1's bytes (tcp_hdr frames, tcp_int.h, host byte order).
 * Rank 1 then closes. Whatever came, rank 0 must end the operation with a
 * status (DIST_E_PEER_LOST naming the malformed frame, or success) once
 * the connection ends: never crash, leak, or wait for its deadline. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dist/dist.h>

#include "net/auth.h"
#include "backends/cpu/tcp.h"
#include "backends/cpu/tcp_int.h"
#include "net/net.h"

#define GROUP "fuzz-group"
#define DEADLINE_MS 6000 /* the engine must notice the end well before */

static void quiet(void *arg, dist_log_level level, dist_subsys subsys, const char *line) {
  (void)arg;
  (void)level;
  (void)subsys;
  (void)line;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  dist_log_set_sink(quiet, NULL);
  setenv("MASTER_ADDR", "127.0.0.1", 1); // the engine listens on loopback
  setenv("DIST_TCP_SPIN_US", "0", 1);
  setenv("DIST_TCP_LAZY", "0", 1); // rank 1 joins at creation, as in a whole mesh
  setenv("DIST_TCP_EAGER_BYTES", "1024", 1); // small and large messages from small inputs
  return 0;
}

typedef struct peer {
  dist_store *store;
  const uint8_t *bytes;
  size_t len;
} peer;

static void die(const char *what, const char *why) {
  fprintf(stderr, "fuzz_frame: %s: %s\n", what, why);
  abort();
}

/* Rank 1: connect, prove the (empty) token, hello, then the bytes; reads
 * all the while, closes its side, and reads until rank 0 closes. */
static void *peer_main(void *arg) {
  peer *p = arg;
  const char *key = "tcp/addr/0";
  void *val = NULL;
  size_t vl = 0;
  char host[DIST_NET_HOSTLEN];
  uint16_t port = 0;
  if (dist_store_wait(p->store, &key, 1, 5000) != DIST_OK ||
      dist_store_get(p->store, key, &val, &vl) != DIST_OK ||
      dist__net_split_hostport(val, host, sizeof host, &port) != DIST_OK)
    die("rank 0's address", dist_last_errmsg());
  dist_free(val);
  int fd = -1;
  dist__errbuf e;
  dist__err_clear(&e);
  int64_t dl = dist__now_ms() + 5000;
  tcp_hello h = {TCP_HELLO_MAGIC, TCP_VERSION, 1, 2, 1, 0, GROUP};
  if (dist__net_connect(host, port, dl, &fd, &e) != DIST_OK ||
      dist__auth_connect(fd, "", "data", dl, &e) != DIST_OK ||
      dist__net_write_all(fd, &h, sizeof h, dl, &e) != DIST_OK ||
      dist__net_read_all(fd, &h, sizeof h, dl, &e) != DIST_OK)
    die("handshake", e.msg);
  dist__net_set_nonblock(fd, true);
  static __thread uint8_t sink[1 << 16];
  size_t off = 0;
  bool shut = false;
  for (int64_t end = dist__now_ms() + DEADLINE_MS + 2000;;) {
    if (!shut && off == p->len) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    struct pollfd pf = {fd, (short)(POLLIN | (shut ? 0 : POLLOUT)), 0};
    if (poll(&pf, 1, 100) < 0 && errno != EINTR)
      die("poll", strerror(errno));
    if (pf.revents & POLLOUT) {
      ssize_t k = send(fd, p->bytes + off, p->len - off, MSG_NOSIGNAL);
      if (k > 0)
        off += (size_t)k;
      else if (k < 0 && errno != EAGAIN && errno != EINTR)
        off = p->len; // rank 0 dropped us
    }
    if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t k = recv(fd, sink, sizeof sink, 0);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
        break;
    }
    if (dist__now_ms() > end)
      die("rank 0", "never closed the connection");
  }
  close(fd);
  return NULL;
}

static dist_coll coll(dist_op_kind kind, dist_tensor *t, int root) {
  dist_coll c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.inputs = c.outputs = t;
  c.n_inputs = c.n_outputs = 1;
  c.redop = DIST_SUM;
  c.root = root;
  c.seq = 1;
  c.timeout_ms = DEADLINE_MS;
  return c;
}

/* Rank 0's operation; its status. */
static int rank0(dist__tcp *t, int what, size_t n, int tag) {
  dist__errbuf e;
  dist__err_clear(&e);
  int64_t dl = dist__now_ms() + DEADLINE_MS;
  size_t bytes = what == 4 ? 4096 + n * 64 : n * 8 + 1;
  uint8_t *buf = calloc(1, bytes);
  float v[256];
  memset(v, 0, sizeof v);
  dist_tensor ten = dist_tensor_1d(v, DIST_FLOAT32, (int64_t)(n % 256) + 1);
  int rc = DIST_OK;
  dist__tcp_req *q = NULL;
  switch (what) {
  case 0:
    while (!t->conns[1].gone && dist__now_ms() < dl) // gone: lost, or left (BYE)
      dist__tcp_progress(t, 20);
    rc = t->conns[1].gone ? t->lost_rc : DIST_E_TIMEOUT;
    break;
  case 1:
  case 2:
    rc = dist__tcp_irecv(t, what == 1 ? 1 : -1, DIST_TCP_CTX_P2P, tag, buf, bytes, NULL, &q, &e);
    break;
  case 3:
  case 4:
    rc = dist__tcp_isend(t, 1, DIST_TCP_CTX_P2P, tag, buf, bytes, NULL, &q, &e);
    break;
  default: {
    dist_coll c = coll(what == 5 ? DIST_OP_ALL_REDUCE : DIST_OP_BROADCAST, &ten,
                       what == 6 ? 1 : what == 7 ? 0 : -1);
    dist__cpu_op op = {&c, dl, &e, -1};
    rc = dist__tcp_run(t, &op);
  }
  }
  if (q && rc == DIST_OK)
    rc = dist__tcp_wait(t, &q, 1, dl, &e);
  dist__tcp_req_free(q);
  free(buf);
  /* The deadline itself, not the status: rank 1 may send an ERROR frame
   * carrying DIST_E_TIMEOUT (its own collective timed out), which breaks
   * the group with that status at once, as it should. */
  if (dist__now_ms() >= dl)
    die("rank 0 waited for its deadline after rank 1 had closed", e.msg);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3)
    return 0;
  dist_store *store = NULL;
  if (dist_store_hash_create(&store) != DIST_OK)
    die("store", dist_last_errmsg());
  int granks[2] = {0, 1};
  dist__cpu_peer peers[2];
  memset(peers, 0, sizeof peers);
  for (int i = 0; i < 2; i++) {
    peers[i].global_rank = i;
    peers[i].pid = getpid();
    snprintf(peers[i].host, sizeof peers[i].host, "localhost");
  }
  dist__cpu_group g;
  memset(&g, 0, sizeof g);
  g.rank = 0;
  g.size = 2;
  g.global_ranks = granks;
  g.peers = peers;
  g.timeout_ms = DEADLINE_MS;
  snprintf(g.name, sizeof g.name, GROUP);
  g.transport = DIST_CPU_TRANSPORT_TCP;
  peer p = {store, data + 3, size - 3};
  pthread_t thr;
  if (pthread_create(&thr, NULL, peer_main, &p) != 0)
    die("thread", strerror(errno));
  dist__tcp *t = NULL;
  dist__errbuf e;
  dist__err_clear(&e);
  if (dist__tcp_create(&g, store, dist__now_ms() + 5000, &t, &e) != DIST_OK)
    die("dist__tcp_create", e.msg);
  (void)rank0(t, data[0] & 7, data[1], data[2]);
  dist__tcp_destroy(t);
  pthread_join(thr, NULL);
  dist_store_destroy(store);
  return 0;
}
