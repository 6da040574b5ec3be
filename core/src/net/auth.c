/* auth.c - proving a connection holds the job token (challenge-response
 * with HMAC-SHA256; the token never crosses the wire).
 *
 * Messages (DIST_AUTH_MSG_LEN = 40 bytes each):
 *   challenge  "DAUT" ver=1 kind=1 flags(bit0: token required) 0 nonce[32]
 *   answer     "DAUT" ver=1 kind=2 flags(bit0: has a token)    0 mac[32]
 *   result     "DAUT" ver=1 kind=3 ok(0/1)                     0 zero[32]
 * mac = HMAC-SHA256(token, nonce || role), so an answer for one service
 * ("store") cannot be replayed to another ("data"), and a fresh nonce per
 * connection defeats replays. Both sides agree on "no token": a connector
 * with a token refuses an acceptor without one, and the reverse. */
#include "auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <sys/random.h>

#include "net.h"

#define KIND_CHALLENGE 1
#define KIND_ANSWER 2
#define KIND_RESULT 3
#define AUTH_VERSION 1
#define ROLE_MAX 64

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

void dist__auth_mac(const char *token, const uint8_t nonce[DIST_AUTH_NONCE_LEN],
                    const char *role, uint8_t mac[DIST_AUTH_MAC_LEN]) {
  uint8_t msg[DIST_AUTH_NONCE_LEN + ROLE_MAX];
  size_t rl = strnlen(role ? role : "", ROLE_MAX);
  memcpy(msg, nonce, DIST_AUTH_NONCE_LEN);
  memcpy(msg + DIST_AUTH_NONCE_LEN, role ? role : "", rl);
  unsigned int ml = DIST_AUTH_MAC_LEN;
  const char *t = token ? token : "";
  if (!HMAC(EVP_sha256(), t, (int)strlen(t), msg, DIST_AUTH_NONCE_LEN + rl, mac, &ml))
    memset(mac, 0, DIST_AUTH_MAC_LEN); /* never verifies: a zero mac is rejected */
}

bool dist__auth_verify(const char *token, const uint8_t nonce[DIST_AUTH_NONCE_LEN],
                       const char *role, const uint8_t mac[DIST_AUTH_MAC_LEN]) {
  uint8_t want[DIST_AUTH_MAC_LEN], zero[DIST_AUTH_MAC_LEN] = {0};
  dist__auth_mac(token, nonce, role, want);
  if (CRYPTO_memcmp(want, zero, sizeof zero) == 0)
    return false;
  return CRYPTO_memcmp(want, mac, DIST_AUTH_MAC_LEN) == 0;
}

static bool has_token(const char *token) { return token && *token; }

static void put_head(uint8_t msg[DIST_AUTH_MSG_LEN], uint8_t kind, uint8_t flags) {
  memset(msg, 0, DIST_AUTH_MSG_LEN);
  memcpy(msg, "DAUT", 4);
  msg[4] = AUTH_VERSION;
  msg[5] = kind;
  msg[6] = flags;
}

/* DIST_OK when msg is a well-formed message of this kind. */
static int check_head(const uint8_t msg[DIST_AUTH_MSG_LEN], uint8_t kind, dist__errbuf *e) {
  if (memcmp(msg, "DAUT", 4) != 0)
    return dist__err_set(e, DIST_E_INVAL, "not a libdist authentication message "
                         "(bad magic %02x%02x%02x%02x)", msg[0], msg[1], msg[2], msg[3]);
  if (msg[4] != AUTH_VERSION)
    return dist__err_set(e, DIST_E_INVAL, "authentication protocol version %u, expected %u",
                         msg[4], AUTH_VERSION);
  if (msg[5] != kind)
    return dist__err_set(e, DIST_E_INVAL, "authentication message of kind %u, expected %u",
                         msg[5], kind);
  return DIST_OK;
}

int dist__auth_challenge(const char *token, uint8_t nonce[DIST_AUTH_NONCE_LEN],
                         uint8_t msg[DIST_AUTH_MSG_LEN]) {
  DIST_TRY(dist__auth_random(nonce, DIST_AUTH_NONCE_LEN));
  put_head(msg, KIND_CHALLENGE, has_token(token) ? 1 : 0);
  memcpy(msg + 8, nonce, DIST_AUTH_NONCE_LEN);
  return DIST_OK;
}

int dist__auth_check_answer(const char *token, const uint8_t nonce[DIST_AUTH_NONCE_LEN],
                            const char *role, const uint8_t msg[DIST_AUTH_MSG_LEN],
                            dist__errbuf *e) {
  DIST_TRY(check_head(msg, KIND_ANSWER, e));
  if (!has_token(token))
    return DIST_OK;
  if (!(msg[6] & 1))
    return dist__err_set(e, DIST_E_INVAL, "peer has no job token (DIST_TOKEN unset)");
  if (!dist__auth_verify(token, nonce, role, msg + 8))
    return dist__err_set(e, DIST_E_INVAL, "peer did not prove the job token (wrong token)");
  return DIST_OK;
}

void dist__auth_result(bool ok, uint8_t msg[DIST_AUTH_MSG_LEN]) {
  put_head(msg, KIND_RESULT, ok ? 1 : 0);
}

int dist__auth_accept(int fd, const char *token, const char *role, int64_t deadline_ms,
                      dist__errbuf *e) {
  uint8_t nonce[DIST_AUTH_NONCE_LEN], msg[DIST_AUTH_MSG_LEN];
  DIST_TRY(dist__auth_challenge(token, nonce, msg));
  DIST_TRY(dist__net_write_all(fd, msg, sizeof msg, deadline_ms, e));
  DIST_TRY(dist__net_read_all(fd, msg, sizeof msg, deadline_ms, e));
  int rc = dist__auth_check_answer(token, nonce, role, msg, e);
  dist__auth_result(rc == DIST_OK, msg);
  /* The result is a courtesy so the connector can say why; a failure to
   * deliver it changes nothing. */
  dist__errbuf scratch;
  dist__err_clear(&scratch);
  int wrc = dist__net_write_all(fd, msg, sizeof msg, deadline_ms,
                                rc == DIST_OK ? e : &scratch);
  return rc != DIST_OK ? rc : wrc;
}

int dist__auth_connect(int fd, const char *token, const char *role, int64_t deadline_ms,
                       dist__errbuf *e) {
  uint8_t msg[DIST_AUTH_MSG_LEN], nonce[DIST_AUTH_NONCE_LEN];
  DIST_TRY(dist__net_read_all(fd, msg, sizeof msg, deadline_ms, e));
  DIST_TRY(check_head(msg, KIND_CHALLENGE, e));
  bool required = msg[6] & 1;
  if (has_token(token) && !required)
    return dist__err_set(e, DIST_E_INVAL, "peer runs without a job token while this "
                         "process has one (DIST_TOKEN); refusing to talk to it");
  memcpy(nonce, msg + 8, sizeof nonce);
  put_head(msg, KIND_ANSWER, has_token(token) ? 1 : 0);
  if (has_token(token))
    dist__auth_mac(token, nonce, role, msg + 8);
  DIST_TRY(dist__net_write_all(fd, msg, sizeof msg, deadline_ms, e));
  dist__errbuf io;
  dist__err_clear(&io);
  int rc = dist__net_read_all(fd, msg, sizeof msg, deadline_ms, &io);
  bool refused = rc == DIST_E_CLOSED ||
                 (rc == DIST_OK && memcmp(msg, "DAUT", 4) == 0 && msg[5] == KIND_RESULT &&
                  !(msg[6] & 1));
  if (refused)
    return dist__err_set(e, DIST_E_INVAL, "peer rejected this process: %s",
                         has_token(token) ? "wrong job token (DIST_TOKEN)"
                                          : "it requires a job token (DIST_TOKEN unset here)");
  if (rc != DIST_OK)
    return dist__err_set(e, rc, "%s", io.msg);
  return check_head(msg, KIND_RESULT, e);
}
