/* ctest: labels=unit timeout=60 */
/* Token authentication: tokens, MACs and the challenge-response exchange,
 * including the refusals in both directions. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/auth.h"
#include "net/net.h"

Test(auth, tokens_are_64_hex_characters_and_differ, .timeout = 5) {
  char a[65], b[65], small[10];
  cr_assert_eq(dist__auth_make_token(a, sizeof a), DIST_OK);
  cr_assert_eq(dist__auth_make_token(b, sizeof b), DIST_OK);
  cr_assert_eq(strlen(a), 64);
  cr_assert_eq(strspn(a, "0123456789abcdef"), 64);
  cr_assert_str_neq(a, b);
  cr_assert_eq(dist__auth_make_token(small, sizeof small), DIST_E_INVAL);
}

Test(auth, a_mac_verifies_only_with_the_same_token_nonces_side_and_role, .timeout = 5) {
  uint8_t na[DIST_AUTH_NONCE_LEN], nc[DIST_AUTH_NONCE_LEN], other[DIST_AUTH_NONCE_LEN];
  uint8_t mac[DIST_AUTH_MAC_LEN];
  dist__auth_random(na, sizeof na);
  dist__auth_random(nc, sizeof nc);
  memcpy(other, na, sizeof other);
  other[0] ^= 1;
  dist__auth_mac("secret", DIST_AUTH_CONNECTOR, "store", na, nc, mac);
  cr_assert(dist__auth_verify("secret", DIST_AUTH_CONNECTOR, "store", na, nc, mac));
  cr_assert(!dist__auth_verify("Secret", DIST_AUTH_CONNECTOR, "store", na, nc, mac));
  cr_assert(!dist__auth_verify("secret", DIST_AUTH_CONNECTOR, "store", other, nc, mac));
  cr_assert(!dist__auth_verify("secret", DIST_AUTH_CONNECTOR, "store", na, other, mac));
  cr_assert(!dist__auth_verify("secret", DIST_AUTH_CONNECTOR, "store", nc, na, mac));
  cr_assert(!dist__auth_verify("secret", DIST_AUTH_ACCEPTOR, "store", na, nc, mac),
            "one side's proof is not the other's (no reflection)");
  cr_assert(!dist__auth_verify("secret", DIST_AUTH_CONNECTOR, "data", na, nc, mac));
}

typedef struct side {
  int fd;
  const char *token, *role;
  int rc;
  dist__errbuf e;
} side;

static void *acceptor(void *arg) {
  side *s = arg;
  dist__err_clear(&s->e);
  s->rc = dist__auth_accept(s->fd, s->token, s->role, dist__deadline_ms(3000), &s->e);
  return NULL;
}

/* Runs the exchange over a socketpair; returns both results. */
static void exchange(const char *acc_token, const char *con_token, const char *con_role,
                     side *acc, side *con) {
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  *acc = (side){sv[0], acc_token, "store", 0, {{0}, 0}};
  *con = (side){sv[1], con_token, con_role, 0, {{0}, 0}};
  pthread_t t;
  pthread_create(&t, NULL, acceptor, acc);
  con->rc = dist__auth_connect(con->fd, con->token, con->role, dist__deadline_ms(3000),
                               &con->e);
  if (con->rc != DIST_OK)
    shutdown(con->fd, SHUT_RDWR); /* the acceptor may still wait for an answer */
  pthread_join(t, NULL);
  close(sv[0]);
  close(sv[1]);
}

Test(auth, the_same_token_passes_on_both_sides, .timeout = 10) {
  side a, c;
  exchange("tok", "tok", "store", &a, &c);
  cr_assert_eq(a.rc, DIST_OK, "%s", a.e.msg);
  cr_assert_eq(c.rc, DIST_OK, "%s", c.e.msg);
  exchange("", NULL, "store", &a, &c); /* no token on either side */
  cr_assert(a.rc == DIST_OK && c.rc == DIST_OK);
}

Test(auth, a_wrong_token_is_refused_with_a_reason_on_both_sides, .timeout = 10) {
  side a, c;
  exchange("tok", "other", "store", &a, &c);
  cr_assert_eq(a.rc, DIST_E_INVAL);
  cr_assert(strstr(a.e.msg, "wrong token"), "%s", a.e.msg);
  cr_assert_eq(c.rc, DIST_E_INVAL);
  cr_assert(strstr(c.e.msg, "wrong job token"), "%s", c.e.msg);
}

Test(auth, an_answer_for_another_role_is_refused, .timeout = 10) {
  side a, c;
  exchange("tok", "tok", "data", &a, &c);
  cr_assert_eq(a.rc, DIST_E_INVAL);
}

Test(auth, token_and_no_token_never_talk, .timeout = 10) {
  side a, c;
  exchange("tok", NULL, "store", &a, &c);
  cr_assert_eq(a.rc, DIST_E_INVAL);
  cr_assert(strstr(a.e.msg, "no job token"), "%s", a.e.msg);
  cr_assert(strstr(c.e.msg, "requires a job token"), "%s", c.e.msg);
  exchange(NULL, "tok", "store", &a, &c);
  cr_assert_eq(c.rc, DIST_E_INVAL);
  cr_assert(strstr(c.e.msg, "without a job token"), "%s", c.e.msg);
}

Test(auth, garbage_instead_of_an_answer_is_refused, .timeout = 10) {
  uint8_t nonce[DIST_AUTH_NONCE_LEN], ch[DIST_AUTH_CHALLENGE_LEN];
  uint8_t ans[DIST_AUTH_ANSWER_LEN], res[DIST_AUTH_RESULT_LEN];
  cr_assert_eq(dist__auth_challenge("tok", nonce, ch), DIST_OK);
  memset(ans, 0x5a, sizeof ans);
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_check_answer("tok", nonce, "store", ans, res, &e), DIST_E_INVAL);
  cr_assert(strstr(e.msg, "bad magic"), "%s", e.msg);
  cr_assert_eq(res[6], 0, "the result refuses");
}

/* An acceptor that does not hold the token (an impostor listening where
 * the job expects its store or a peer) cannot prove it: it says "token
 * required", takes the answer and claims success, and the connector
 * refuses it. */
static void *impostor(void *arg) {
  int fd = *(int *)arg;
  uint8_t nonce[DIST_AUTH_NONCE_LEN], ch[DIST_AUTH_CHALLENGE_LEN];
  uint8_t ans[DIST_AUTH_ANSWER_LEN], res[DIST_AUTH_RESULT_LEN];
  dist__auth_challenge("not-the-token", nonce, ch);
  dist__net_write_all(fd, ch, sizeof ch, dist__deadline_ms(3000), NULL);
  dist__net_read_all(fd, ans, sizeof ans, dist__deadline_ms(3000), NULL);
  memset(res, 0, sizeof res);
  memcpy(res, "DAUT", 4);
  res[4] = 2, res[5] = 3, res[6] = 1; /* "ok", with a proof it cannot make */
  dist__auth_mac("not-the-token", DIST_AUTH_ACCEPTOR, "store", nonce, ans + 8, res + 8);
  dist__net_write_all(fd, res, sizeof res, dist__deadline_ms(3000), NULL);
  return NULL;
}

Test(auth, an_acceptor_without_the_token_is_refused_by_the_connector, .timeout = 10) {
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pthread_t t;
  pthread_create(&t, NULL, impostor, &sv[0]);
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_connect(sv[1], "tok", "store", dist__deadline_ms(3000), &e),
               DIST_E_INVAL);
  cr_assert(strstr(e.msg, "did not prove it holds the job token"), "%s", e.msg);
  pthread_join(t, NULL);
  close(sv[0]);
  close(sv[1]);
}

/* A recorded handshake is worth nothing on another connection, to either
 * side: the connector's answer covers the acceptor's nonce, the acceptor's
 * result covers the connector's. */
Test(auth, a_recorded_handshake_replayed_on_another_connection_fails_both_ways,
     .timeout = 10) {
  /* Connection 1, honest: record its three messages. */
  uint8_t na[DIST_AUTH_NONCE_LEN], ch[DIST_AUTH_CHALLENGE_LEN];
  uint8_t ans[DIST_AUTH_ANSWER_LEN], res[DIST_AUTH_RESULT_LEN];
  cr_assert_eq(dist__auth_challenge("tok", na, ch), DIST_OK);
  memset(ans, 0, sizeof ans);
  memcpy(ans, "DAUT", 4);
  ans[4] = 2, ans[5] = 2, ans[6] = 1;
  dist__auth_random(ans + 8, DIST_AUTH_NONCE_LEN);
  dist__auth_mac("tok", DIST_AUTH_CONNECTOR, "store", na, ans + 8, ans + 40);
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_check_answer("tok", na, "store", ans, res, &e), DIST_OK, "%s", e.msg);
  /* Connection 2 to an acceptor: its fresh nonce refuses the old answer. */
  uint8_t na2[DIST_AUTH_NONCE_LEN], ch2[DIST_AUTH_CHALLENGE_LEN], res2[DIST_AUTH_RESULT_LEN];
  cr_assert_eq(dist__auth_challenge("tok", na2, ch2), DIST_OK);
  cr_assert_eq(dist__auth_check_answer("tok", na2, "store", ans, res2, &e), DIST_E_INVAL);
  cr_assert(strstr(e.msg, "another connection"), "%s", e.msg);
  /* Connection 2 to a connector: the old challenge and result are played
   * back; its fresh nonce refuses the old result. */
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  cr_assert_eq(dist__net_write_all(sv[0], ch, sizeof ch, dist__deadline_ms(1000), NULL), DIST_OK);
  cr_assert_eq(dist__net_write_all(sv[0], res, sizeof res, dist__deadline_ms(1000), NULL),
               DIST_OK);
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_connect(sv[1], "tok", "store", dist__deadline_ms(3000), &e),
               DIST_E_INVAL);
  cr_assert(strstr(e.msg, "replayed handshake"), "%s", e.msg);
  close(sv[0]);
  close(sv[1]);
}

Test(auth, a_silent_peer_times_out, .timeout = 10) {
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_connect(sv[0], "tok", "store", dist__deadline_ms(100), &e),
               DIST_E_TIMEOUT);
  close(sv[0]);
  close(sv[1]);
}
