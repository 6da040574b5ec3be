/* auth.h - proving a connection holds the job token (challenge-response;
 * the token never crosses the wire).
 *
 * The acceptor sends a random nonce; the connector answers
 * HMAC-SHA256(token, nonce || role); the acceptor compares in constant
 * time. An empty token means "no authentication" and both sides agree on
 * that in the exchange (a peer with a token never talks to one without).
 * The pieces are separate so an event-loop server can run the exchange as
 * a state machine; the blocking helpers are for clients and data-plane
 * handshakes. */
#ifndef DIST_AUTH_H
#define DIST_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/dist_int.h"

#define DIST_AUTH_NONCE_LEN 32
#define DIST_AUTH_MAC_LEN 32

/* Fills buf with cryptographically random bytes (getrandom). */
int dist__auth_random(void *buf, size_t len);
/* A fresh token: 64 hex characters plus NUL into out (len >= 65). */
int dist__auth_make_token(char *out, size_t len);
/* mac = HMAC-SHA256(token, nonce || role). */
void dist__auth_mac(const char *token, const uint8_t nonce[DIST_AUTH_NONCE_LEN],
                    const char *role, uint8_t mac[DIST_AUTH_MAC_LEN]);
/* Constant-time check of a received mac. */
bool dist__auth_verify(const char *token, const uint8_t nonce[DIST_AUTH_NONCE_LEN],
                       const char *role, const uint8_t mac[DIST_AUTH_MAC_LEN]);
/* Blocking exchange on a connected socket; role names the service
 * ("store", "data"). DIST_E_STORE/DIST_E_BACKEND-free: a failed proof is
 * DIST_E_INVAL with a message ("peer did not prove the job token"). */
int dist__auth_accept(int fd, const char *token, const char *role, int64_t deadline_ms,
                      dist__errbuf *e);
int dist__auth_connect(int fd, const char *token, const char *role, int64_t deadline_ms,
                       dist__errbuf *e);

/* The exchange's three messages, for acceptors that run it as a state
 * machine (the TCP store's event loop). Each message is DIST_AUTH_MSG_LEN
 * bytes: acceptor -> connector challenge (nonce, whether a token is
 * required), connector -> acceptor answer (mac), acceptor -> connector
 * result. */
#define DIST_AUTH_MSG_LEN 40
/* Fresh nonce into nonce, the challenge message into msg. */
int dist__auth_challenge(const char *token, uint8_t nonce[DIST_AUTH_NONCE_LEN],
                         uint8_t msg[DIST_AUTH_MSG_LEN]);
/* Checks an answer; DIST_E_INVAL with the reason in e when it fails. */
int dist__auth_check_answer(const char *token, const uint8_t nonce[DIST_AUTH_NONCE_LEN],
                            const char *role, const uint8_t msg[DIST_AUTH_MSG_LEN],
                            dist__errbuf *e);
void dist__auth_result(bool ok, uint8_t msg[DIST_AUTH_MSG_LEN]);

#endif
