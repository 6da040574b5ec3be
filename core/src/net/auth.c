/* auth.c - mutual proof that both ends of a connection hold the job token
 * (HMAC-SHA256 challenge-response both ways; the token never crosses the
 * wire), and the local secrets of loopback stores started without one.
 *
 * Messages (version 2):
 *   challenge  "DAUT" ver=2 kind=1 flags(bit0: token required) 0 nonce_a[32]      40 B
 *   answer     "DAUT" ver=2 kind=2 flags(bit0: has a token)    0 nonce_c[32] mac_c[32] 72 B
 *   result     "DAUT" ver=2 kind=3 ok(0/1)                     0 mac_a[32]        40 B
 * mac_X = HMAC-SHA256(token, "libdist-auth-2" || X || role || NUL || nonce_a
 * || nonce_c) with X "connector" or "acceptor". Both nonces are fresh per
 * connection (getrandom), so an answer recorded on one connection fails on
 * another (the acceptor's nonce differs) and so does a recorded challenge
 * and result played to a connector (its nonce differs); the direction
 * label stops a peer from reflecting one side's MAC as the other's, and
 * the role one service's ("store") as another's ("data"). Both sides agree
 * on "no token": a connector with a token refuses an acceptor without one,
 * and the reverse. */
#include "auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"

#define KIND_CHALLENGE 1
#define KIND_ANSWER 2
#define KIND_RESULT 3
#define AUTH_VERSION 2
#define ROLE_MAX 64
#define LABEL "libdist-auth-2"

int dist__auth_random(void *buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = getrandom((char *)buf + done, len - done, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return dist__set_last_error(DIST_E_SYS, "getrandom: %s", strerror(errno));
    }
    done += (size_t)n;
  }
  return DIST_OK;
}

int dist__auth_make_token(char *out, size_t len) {
  uint8_t raw[32];
  if (len < 2 * sizeof raw + 1)
    return dist__set_last_error(DIST_E_INVAL, "token buffer of %zu bytes is too small",
                                len);
  DIST_TRY(dist__auth_random(raw, sizeof raw));
  for (size_t i = 0; i < sizeof raw; i++)
    snprintf(out + 2 * i, 3, "%02x", raw[i]);
  return DIST_OK;
}

/* OpenSSL frees its global state at exit (an atexit handler it installs
 * at its first use) while the library's threads may still be in HMAC: a
 * rank ending after a failure, its acceptor or checking thread answering
 * a handshake, died of SIGSEGV inside libcrypto and was recorded as a
 * crash. Initialised without that handler, the state lives until the
 * process is gone. */
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;

static void crypto_init(void) { OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL); }

void dist__auth_mac(const char *token, dist__auth_side side, const char *role,
                    const uint8_t nonce_a[DIST_AUTH_NONCE_LEN],
                    const uint8_t nonce_c[DIST_AUTH_NONCE_LEN], uint8_t mac[DIST_AUTH_MAC_LEN]) {
  pthread_once(&crypto_once, crypto_init);
  uint8_t msg[sizeof LABEL + 16 + ROLE_MAX + 1 + 2 * DIST_AUTH_NONCE_LEN];
  const char *who = side == DIST_AUTH_ACCEPTOR ? "acceptor" : "connector";
  size_t off = 0, rl = strnlen(role ? role : "", ROLE_MAX), wl = strlen(who);
  memcpy(msg, LABEL, sizeof LABEL - 1);
  off += sizeof LABEL - 1;
  memcpy(msg + off, who, wl);
  off += wl;
  memcpy(msg + off, role ? role : "", rl);
  off += rl;
  msg[off++] = 0;
  memcpy(msg + off, nonce_a, DIST_AUTH_NONCE_LEN);
  off += DIST_AUTH_NONCE_LEN;
  memcpy(msg + off, nonce_c, DIST_AUTH_NONCE_LEN);
  off += DIST_AUTH_NONCE_LEN;
  unsigned int ml = DIST_AUTH_MAC_LEN;
  const char *t = token ? token : "";
  if (!HMAC(EVP_sha256(), t, (int)strnlen(t, DIST_AUTH_TOKEN_MAX), msg, off, mac, &ml))
    memset(mac, 0, DIST_AUTH_MAC_LEN); /* never verifies: a zero mac is rejected */
}

bool dist__auth_verify(const char *token, dist__auth_side side, const char *role,
                       const uint8_t nonce_a[DIST_AUTH_NONCE_LEN],
                       const uint8_t nonce_c[DIST_AUTH_NONCE_LEN],
                       const uint8_t mac[DIST_AUTH_MAC_LEN]) {
  uint8_t want[DIST_AUTH_MAC_LEN], zero[DIST_AUTH_MAC_LEN] = {0};
  dist__auth_mac(token, side, role, nonce_a, nonce_c, want);
  if (CRYPTO_memcmp(want, zero, sizeof zero) == 0)
    return false;
  return CRYPTO_memcmp(want, mac, DIST_AUTH_MAC_LEN) == 0;
}

static bool has_token(const char *token) { return token && *token; }

static void put_head(uint8_t *msg, size_t len, uint8_t kind, uint8_t flags) {
  memset(msg, 0, len);
  memcpy(msg, "DAUT", 4);
  msg[4] = AUTH_VERSION;
  msg[5] = kind;
  msg[6] = flags;
}

/* DIST_OK when msg is a well-formed message of this kind (8-byte head). */
static int check_head(const uint8_t *msg, uint8_t kind, dist__errbuf *e) {
  if (memcmp(msg, "DAUT", 4) != 0)
    return dist__err_set(e, DIST_E_INVAL, "not a libdist authentication message "
                         "(bad magic %02x%02x%02x%02x)", msg[0], msg[1], msg[2], msg[3]);
  if (msg[4] != AUTH_VERSION)
    return dist__err_set(e, DIST_E_INVAL, "authentication protocol version %u, expected %u "
                         "(a libdist of another version)", msg[4], AUTH_VERSION);
  if (msg[5] != kind)
    return dist__err_set(e, DIST_E_INVAL, "authentication message of kind %u, expected %u",
                         msg[5], kind);
  return DIST_OK;
}

int dist__auth_challenge(const char *token, uint8_t nonce[DIST_AUTH_NONCE_LEN],
                         uint8_t msg[DIST_AUTH_CHALLENGE_LEN]) {
  DIST_TRY(dist__auth_random(nonce, DIST_AUTH_NONCE_LEN));
  put_head(msg, DIST_AUTH_CHALLENGE_LEN, KIND_CHALLENGE, has_token(token) ? 1 : 0);
  memcpy(msg + 8, nonce, DIST_AUTH_NONCE_LEN);
  return DIST_OK;
}

int dist__auth_check_answer(const char *token, const uint8_t nonce[DIST_AUTH_NONCE_LEN],
                            const char *role, const uint8_t msg[DIST_AUTH_ANSWER_LEN],
                            uint8_t result[DIST_AUTH_RESULT_LEN], dist__errbuf *e) {
  put_head(result, DIST_AUTH_RESULT_LEN, KIND_RESULT, 0);
  DIST_TRY(check_head(msg, KIND_ANSWER, e));
  const uint8_t *nonce_c = msg + 8, *mac_c = msg + 8 + DIST_AUTH_NONCE_LEN;
  if (!has_token(token)) {
    result[6] = 1;
    return DIST_OK;
  }
  if (!(msg[6] & 1))
    return dist__err_set(e, DIST_E_INVAL, "peer has no job token (DIST_TOKEN unset)");
  if (!dist__auth_verify(token, DIST_AUTH_CONNECTOR, role, nonce, nonce_c, mac_c))
    return dist__err_set(e, DIST_E_INVAL, "peer did not prove the job token (wrong token, "
                         "or an answer made for another connection)");
  result[6] = 1;
  dist__auth_mac(token, DIST_AUTH_ACCEPTOR, role, nonce, nonce_c, result + 8);
  return DIST_OK;
}

int dist__auth_accept(int fd, const char *token, const char *role, int64_t deadline_ms,
                      dist__errbuf *e) {
  uint8_t nonce[DIST_AUTH_NONCE_LEN], ch[DIST_AUTH_CHALLENGE_LEN];
  uint8_t ans[DIST_AUTH_ANSWER_LEN], res[DIST_AUTH_RESULT_LEN];
  DIST_TRY(dist__auth_challenge(token, nonce, ch));
  DIST_TRY(dist__net_write_all(fd, ch, sizeof ch, deadline_ms, e));
  DIST_TRY(dist__net_read_all(fd, ans, sizeof ans, deadline_ms, e));
  int rc = dist__auth_check_answer(token, nonce, role, ans, res, e);
  /* On a refusal the result is a courtesy so the connector can say why; a
   * failure to deliver it changes nothing. */
  dist__errbuf scratch;
  dist__err_clear(&scratch);
  int wrc = dist__net_write_all(fd, res, sizeof res, deadline_ms,
                                rc == DIST_OK ? e : &scratch);
  return rc != DIST_OK ? rc : wrc;
}

/* The port of a loopback peer, or 0 when fd's peer is not on loopback. */
static uint16_t loopback_port(int fd) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
    return 0;
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127 ? ntohs(a->sin_port) : 0;
  }
  if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
    bool lo = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
              (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127);
    return lo ? ntohs(a->sin6_port) : 0;
  }
  return 0;
}

/* The token to answer with: ours, or a loopback store's local secret. */
static const char *answer_token(int fd, const char *token, const char *role, bool required,
                                char *local, size_t len) {
  if (has_token(token) || !required || strcmp(role, "store") != 0)
    return token;
  uint16_t port = loopback_port(fd);
  dist__errbuf ignore;
  dist__err_clear(&ignore);
  if (port && dist__auth_local_secret_read(port, local, len, &ignore) == DIST_OK)
    return local;
  DIST_LOG(DEBUG, STORE, "no local secret for the store on port %u: %s", port, ignore.msg);
  return token;
}

int dist__auth_connect(int fd, const char *token, const char *role, int64_t deadline_ms,
                       dist__errbuf *e) {
  uint8_t ch[DIST_AUTH_CHALLENGE_LEN], ans[DIST_AUTH_ANSWER_LEN], res[DIST_AUTH_RESULT_LEN];
  char local[DIST_AUTH_TOKEN_MAX + 1];
  DIST_TRY(dist__net_read_all(fd, ch, sizeof ch, deadline_ms, e));
  DIST_TRY(check_head(ch, KIND_CHALLENGE, e));
  bool required = ch[6] & 1;
  const char *own = token;
  token = answer_token(fd, token, role, required, local, sizeof local);
  bool stale = token == local && !has_token(own); /* answered with the port's local secret */
  if (has_token(token) && !required)
    return dist__err_set(e, DIST_E_INVAL, "peer runs without a job token while this "
                         "process has one (DIST_TOKEN); refusing to talk to it");
  const uint8_t *nonce_a = ch + 8;
  uint8_t *nonce_c = ans + 8;
  put_head(ans, sizeof ans, KIND_ANSWER, has_token(token) ? 1 : 0);
  DIST_TRY(dist__auth_random(nonce_c, DIST_AUTH_NONCE_LEN));
  if (has_token(token))
    dist__auth_mac(token, DIST_AUTH_CONNECTOR, role, nonce_a, nonce_c,
                   ans + 8 + DIST_AUTH_NONCE_LEN);
  int rc = dist__net_write_all(fd, ans, sizeof ans, deadline_ms, e);
  dist__errbuf io;
  dist__err_clear(&io);
  if (rc == DIST_OK)
    rc = dist__net_read_all(fd, res, sizeof res, deadline_ms, &io);
  /* An acceptor that refuses says so (a verdict frame) before it closes;
   * a close without one means it stopped waiting for this answer (its
   * handshake deadline passed on a loaded machine, or it shed the oldest
   * pending handshake), which says nothing about the token. */
  bool refused = rc == DIST_OK && memcmp(res, "DAUT", 4) == 0 && res[5] == KIND_RESULT &&
                 !(res[6] & 1);
  if (rc == DIST_E_CLOSED)
    rc = dist__err_set(e, DIST_E_CLOSED, "peer closed the connection before its verdict on "
                       "this process's answer: it stopped waiting for it (its handshake "
                       "deadline%s passed, or it sheds pending handshakes)",
                       strcmp(role, "store") == 0 ? ", DIST_STORE_HANDSHAKE_MS," : "");
  else if (refused && stale) /* that store's port was another's, whose file stayed behind */
    rc = dist__err_set(e, DIST_E_INVAL, "peer rejected this process: it requires a job token "
                       "(DIST_TOKEN unset here; the local secret found for its port, left by "
                       "an earlier store, is not its token)");
  else if (refused)
    rc = dist__err_set(e, DIST_E_INVAL, "peer rejected this process: %s",
                       has_token(token) ? "wrong job token (DIST_TOKEN)"
                                        : "it requires a job token (DIST_TOKEN unset here)");
  else if (rc != DIST_OK && io.msg[0])
    rc = dist__err_set(e, rc, "%s", io.msg);
  else if (rc == DIST_OK)
    rc = check_head(res, KIND_RESULT, e);
  if (rc == DIST_OK && has_token(token) &&
      !dist__auth_verify(token, DIST_AUTH_ACCEPTOR, role, nonce_a, nonce_c, res + 8))
    rc = dist__err_set(e, DIST_E_INVAL, "peer did not prove it holds the job token: not "
                       "this job's %s (or a replayed handshake)", role);
  OPENSSL_cleanse(local, sizeof local);
  return rc;
}

/* --- local secrets ------------------------------------------------------------- */

/* The inode of this process's network namespace (0 when unknown). */
static unsigned long netns_inode(void) {
  struct stat st;
  return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

int dist__auth_local_secret_path(uint16_t port, bool make_dir, char *path, size_t len,
                                 dist__errbuf *e) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || tmp[0] != '/')
    tmp = "/tmp";
  char dir[512];
  snprintf(dir, sizeof dir, "%s/libdist-%u", tmp, (unsigned)geteuid());
  if (make_dir && mkdir(dir, 0700) != 0 && errno != EEXIST)
    return dist__err_sys(e, errno, "making %s", dir);
  struct stat st;
  if (lstat(dir, &st) != 0)
    return dist__err_sys(e, errno, "%s", dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
    return dist__err_set(e, DIST_E_INVAL, "%s is not a private directory of this user "
                         "(owner %u, mode %03o; want %u, 700): remove it", dir,
                         (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
                         (unsigned)geteuid());
  if ((size_t)snprintf(path, len, "%s/store-%lu-%u.secret", dir, netns_inode(),
                       (unsigned)port) >= len)
    return dist__err_set(e, DIST_E_INVAL, "the path of the local secret is too long");
  return DIST_OK;
}

int dist__auth_local_secret_make(uint16_t port, char *token, size_t token_len, char *path,
                                 size_t path_len, dist__errbuf *e) {
  DIST_TRY(dist__auth_local_secret_path(port, true, path, path_len, e));
  DIST_TRY(dist__auth_make_token(token, token_len));
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return dist__err_sys(e, errno, "creating %s", tmp);
  size_t n = strlen(token);
  bool ok = fchmod(fd, 0600) == 0 && write(fd, token, n) == (ssize_t)n;
  int err = errno;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    err = ok ? errno : err;
    unlink(tmp);
    return dist__err_sys(e, err, "writing the store's local secret %s", path);
  }
  return DIST_OK;
}

void dist__auth_local_secret_forget(uint16_t port) {
  char path[600];
  dist__errbuf ignore;
  dist__err_clear(&ignore);
  if (dist__auth_local_secret_path(port, false, path, sizeof path, &ignore) == DIST_OK)
    unlink(path);
}

int dist__auth_local_secret_read(uint16_t port, char *token, size_t len, dist__errbuf *e) {
  char path[600];
  DIST_TRY(dist__auth_local_secret_path(port, false, path, sizeof path, e));
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return dist__err_sys(e, errno, "opening %s", path);
  struct stat st;
  int rc = DIST_OK;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077)) {
    rc = dist__err_set(e, DIST_E_INVAL, "%s is not a private file of this user", path);
  } else {
    ssize_t n = read(fd, token, len - 1);
    if (n <= 0 || (size_t)n >= len - 1)
      rc = dist__err_set(e, DIST_E_INVAL, "%s holds no secret", path);
    else
      token[n] = '\0';
  }
  close(fd);
  return rc;
}
