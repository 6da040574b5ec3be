/* fuzz_store.c - libFuzzer target: the TCP store server's protocol, as a
 * client on the network speaks it. Each input starts a real server
 * (store_tcp_server.c: its event loop, the token exchange, frame
 * buffering, parking of blocking requests) on loopback and sends the bytes
 * over real connections:
 *   byte 0, bits 0-1: 0 no token (the exchange is done right), 1 a token
 *         and the exchange done right, 2 a token and the bytes are the
 *         answer to its challenge (a stranger), 3 no token and the bytes
 *         start before the challenge was read;
 *   byte 1: where the rest splits between connection A and connection B
 *         (B's requests can wake A's parked ones);
 *   the rest: frames of store_tcp_proto.h (or anything else).
 * The client reads whatever comes back while it writes (replies can be
 * larger than requests), then closes its side and waits until the server
 * has closed both connections: the server must answer or drop, never
 * crash, hang or leak, whatever arrives. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dist/dist.h>

#include "net/auth.h"
#include "net/net.h"
#include "store/store_tcp_proto.h"

#define TOKEN "fuzz-token"

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
  setenv("DIST_STORE_SERVER_SPIN_US", "0", 1); // read once; spinning only burns the core
  return 0;
}

typedef struct side {
  int fd;
  const uint8_t *p;
  size_t len, off;
  bool shut, eof;
} side;

static int connect_to(uint16_t port, const char *token, bool exchange) {
  int fd = -1;
  dist__errbuf e;
  dist__err_clear(&e);
  if (dist__net_connect("127.0.0.1", port, dist__now_ms() + 5000, &fd, &e) != DIST_OK) {
    fprintf(stderr, "connect: %s\n", e.msg);
    abort();
  }
  if (exchange && dist__auth_connect(fd, token, "store", dist__now_ms() + 5000, &e) != DIST_OK) {
    fprintf(stderr, "the exchange with the right token failed: %s\n", e.msg);
    abort();
  }
  dist__net_set_nonblock(fd, true);
  return fd;
}

/* Writes both sides' bytes, reading all the while, then half-closes and
 * reads until the server has closed each connection. */
static void pump(side *s, int n) {
  static uint8_t sink[1 << 16];
  int64_t deadline = dist__now_ms() + 8000; // libFuzzer's -timeout reports a hang first
  for (;;) {
    struct pollfd p[2];
    int open = 0;
    for (int i = 0; i < n; i++) {
      if (!s[i].shut && s[i].off == s[i].len) {
        shutdown(s[i].fd, SHUT_WR);
        s[i].shut = true;
      }
      p[i] = (struct pollfd){s[i].fd, (short)(s[i].eof ? 0 : POLLIN), 0};
      if (!s[i].shut)
        p[i].events |= POLLOUT;
      open += !s[i].eof;
    }
    if (!open)
      return;
    if (dist__now_ms() > deadline) {
      fprintf(stderr, "the server neither answered nor closed a connection in 8 s\n");
      abort();
    }
    if (poll(p, (nfds_t)n, 100) < 0 && errno != EINTR)
      abort();
    for (int i = 0; i < n; i++) {
      if (p[i].revents & POLLOUT) {
        ssize_t k = send(s[i].fd, s[i].p + s[i].off, s[i].len - s[i].off, MSG_NOSIGNAL);
        if (k > 0)
          s[i].off += (size_t)k;
        else if (k < 0 && errno != EAGAIN && errno != EINTR)
          s[i].off = s[i].len; // dropped by the server: nothing more to say
      }
      if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t k = recv(s[i].fd, sink, sizeof sink, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
          s[i].eof = true;
          s[i].off = s[i].len;
        }
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  int mode = data[0] & 3;
  const char *token = mode == 1 || mode == 2 ? TOKEN : "";
  size_t rest = size - 2, split = rest * data[1] / 255;
  stp_server_opts o = {.loopback_only = true, .token = token, .auth_timeout_ms = 5000};
  stp_server *srv = NULL;
  dist__errbuf e;
  dist__err_clear(&e);
  if (dist__stp_server_start(&o, &srv, &e) != DIST_OK) {
    fprintf(stderr, "server: %s\n", e.msg);
    abort();
  }
  uint16_t port = dist__stp_server_port(srv);
  bool exchange = mode == 0 || mode == 1;
  side s[2] = {{.fd = connect_to(port, token, exchange), .p = data + 2, .len = split},
               {.fd = connect_to(port, token, exchange), .p = data + 2 + split,
                .len = rest - split}};
  if (mode == 2) { // a stranger reads the challenge and answers with the bytes
    uint8_t ch[DIST_AUTH_CHALLENGE_LEN];
    for (int i = 0; i < 2; i++) {
      dist__net_set_nonblock(s[i].fd, false);
      if (dist__net_read_all(s[i].fd, ch, sizeof ch, dist__now_ms() + 5000, &e) != DIST_OK)
        abort();
      dist__net_set_nonblock(s[i].fd, true);
    }
  }
  pump(s, 2);
  close(s[0].fd);
  close(s[1].fd);
  dist__stp_server_stop(srv);
  return 0;
}
