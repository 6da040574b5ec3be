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

Test(auth, a_mac_verifies_only_with_the_same_token_nonce_and_role, .timeout = 5) {
  uint8_t nonce[DIST_AUTH_NONCE_LEN], other[DIST_AUTH_NONCE_LEN], mac[DIST_AUTH_MAC_LEN];
  dist__auth_random(nonce, sizeof nonce);
  memcpy(other, nonce, sizeof other);
  other[0] ^= 1;
  dist__auth_mac("secret", nonce, "store", mac);
  cr_assert(dist__auth_verify("secret", nonce, "store", mac));
  cr_assert(!dist__auth_verify("Secret", nonce, "store", mac));
  cr_assert(!dist__auth_verify("secret", other, "store", mac));
  cr_assert(!dist__auth_verify("secret", nonce, "data", mac));
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
  uint8_t nonce[DIST_AUTH_NONCE_LEN], msg[DIST_AUTH_MSG_LEN];
  cr_assert_eq(dist__auth_challenge("tok", nonce, msg), DIST_OK);
  memset(msg, 0x5a, sizeof msg);
  dist__errbuf e;
  dist__err_clear(&e);
  cr_assert_eq(dist__auth_check_answer("tok", nonce, "store", msg, &e), DIST_E_INVAL);
  cr_assert(strstr(e.msg, "bad magic"), "%s", e.msg);
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
