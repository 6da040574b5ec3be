/* auth.h - mutual proof that both ends of a connection hold the job token
 * (challenge-response both ways; the token never crosses the wire).
 *
 * The acceptor sends a fresh nonce; the connector answers with its own
 * fresh nonce and HMAC-SHA256 over both; the acceptor checks it in
 * constant time and proves itself with a second HMAC over both nonces
 * under another label. Each MAC covers both nonces, the service ("store",
 * "data") and the direction, so nothing recorded on one connection is
 * worth anything on another, to either side. An empty token means "no
 * authentication" and both sides agree on that in the exchange (a peer
 * with a token never talks to one without). The pieces are separate so an
 * event-loop server can run the exchange as a state machine; the blocking
 * helpers are for clients and data-plane handshakes. */
#ifndef DIST_AUTH_H
#define DIST_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <dist/internal/launch.h>

#include "base/dist_int.h"

#define DIST_AUTH_NONCE_LEN 32
#define DIST_AUTH_MAC_LEN 32
#define DIST_AUTH_TOKEN_MAX 256 /* longer tokens are refused */

/* The three messages: acceptor -> connector challenge (40 bytes: nonce_a,
 * whether a token is required), connector -> acceptor answer (72 bytes:
 * nonce_c, mac_c), acceptor -> connector result (40 bytes: ok, mac_a). */
#define DIST_AUTH_CHALLENGE_LEN 40
#define DIST_AUTH_ANSWER_LEN 72
#define DIST_AUTH_RESULT_LEN 40

/* Which side a MAC speaks for. */
typedef enum { DIST_AUTH_CONNECTOR, DIST_AUTH_ACCEPTOR } dist__auth_side;

/* Fills buf with cryptographically random bytes (getrandom). */
int dist__auth_random(void *buf, size_t len);
/* A fresh token (dist__auth_make_token): dist/internal/launch.h, distrun
 * makes them too. */
/* mac = HMAC-SHA256(token, "libdist-auth-2" side role NUL nonce_a nonce_c). */
void dist__auth_mac(const char *token, dist__auth_side side, const char *role,
                    const uint8_t nonce_a[DIST_AUTH_NONCE_LEN],
                    const uint8_t nonce_c[DIST_AUTH_NONCE_LEN], uint8_t mac[DIST_AUTH_MAC_LEN]);
/* Constant-time check of a received mac. */
bool dist__auth_verify(const char *token, dist__auth_side side, const char *role,
                       const uint8_t nonce_a[DIST_AUTH_NONCE_LEN],
                       const uint8_t nonce_c[DIST_AUTH_NONCE_LEN],
                       const uint8_t mac[DIST_AUTH_MAC_LEN]);

/* Blocking exchange on a connected socket; role names the service
 * ("store", "data"). A failed proof on either side is DIST_E_INVAL with a
 * message ("peer did not prove the job token"). A connector without a
 * token that meets a loopback store requiring one looks for the store's
 * local secret (dist__auth_local_secret_read) before it gives up. An
 * acceptor that closes without its verdict (it stopped waiting) is
 * DIST_E_CLOSED for the connector: worth another connection while time
 * remains. */
int dist__auth_accept(int fd, const char *token, const char *role, int64_t deadline_ms,
                      dist__errbuf *e);
int dist__auth_connect(int fd, const char *token, const char *role, int64_t deadline_ms,
                       dist__errbuf *e);

/* The acceptor's steps, for the TCP store's event loop. */
/* Fresh nonce_a into nonce, the challenge into msg. */
int dist__auth_challenge(const char *token, uint8_t nonce[DIST_AUTH_NONCE_LEN],
                         uint8_t msg[DIST_AUTH_CHALLENGE_LEN]);
/* Checks an answer against our nonce_a and writes the result to send back
 * (with our proof when the answer is good, a refusal otherwise);
 * DIST_E_INVAL with the reason in e when it fails. */
int dist__auth_check_answer(const char *token, const uint8_t nonce[DIST_AUTH_NONCE_LEN],
                            const char *role, const uint8_t msg[DIST_AUTH_ANSWER_LEN],
                            uint8_t result[DIST_AUTH_RESULT_LEN], dist__errbuf *e);

/* Local secrets: a store that listens on loopback without a job token
 * (no DIST_TOKEN, no DIST_ALLOW_NO_TOKEN) still requires one, made when it
 * starts and kept in a file only its user can read:
 *   ${TMPDIR:-/tmp}/libdist-<uid>/store-<netns inode>-<port>.secret
 * (directory 0700, file 0600, both owned by the user and checked to be).
 * Processes of the same user on the same host and network namespace find
 * it from the port they connected to; nobody else can. */
/* Makes a token, writes it for port (atomically, replacing a stale one);
 * the path into path. */
int dist__auth_local_secret_make(uint16_t port, char *token, size_t token_len, char *path,
                                 size_t path_len, dist__errbuf *e);
/* Removes port's secret, if any: a store that binds port with a job token
 * owns the port, so a file there was left by a store that died without its
 * cleanup (SIGKILL), and a client without a token must not answer with it. */
void dist__auth_local_secret_forget(uint16_t port);
/* Reads the secret of the loopback store at port into token; DIST_E_INVAL
 * when there is none or it is not private (the reason in e). */
int dist__auth_local_secret_read(uint16_t port, char *token, size_t len, dist__errbuf *e);
/* The secret's path for port, and its directory (made 0700 when absent,
 * refused when it is not ours or not private). */
int dist__auth_local_secret_path(uint16_t port, bool make_dir, char *path, size_t len,
                                 dist__errbuf *e);

#endif
