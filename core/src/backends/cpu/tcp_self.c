/* tcp_self.c - point to point between a rank and itself: an isend to this
 * rank and an irecv from it match in this process, without a socket (the
 * engine has no connection to itself), as torch allows.
 *
 * Semantics are the engine's: a send completes when a receive matched it,
 * sizes must agree exactly (else both fail with DIST_E_DESYNC), messages of
 * one tag arrive in the order sent. A receive from this rank waits in the
 * engine's posted list, where no network message can match it (those come
 * from other ranks); a send that finds no such receive waits in
 * t->self_sends. A receive from DIST_ANY_SOURCE takes messages from other
 * ranks only. Everything here runs under t->mu. */
#include <stdio.h>

#include "tcp_int.h"

static void deliver(dist__tcp *t, dist__tcp_req *s, dist__tcp_req *r) {
  r->src = t->g->rank;
  if (s->len != r->len) {
    char m[200];
    snprintf(m, sizeof m, "isend to self of %zu bytes matched irecv from self of %zu bytes "
             "(tag %lld, rank %d)", s->len, r->len, (long long)s->tag, t->g->rank);
    dist__tcp_complete(t, s, DIST_E_DESYNC, "%s", m);
    dist__tcp_complete(t, r, DIST_E_DESYNC, "%s", m);
    return;
  }
  if (s->len)
    memcpy(r->buf, s->buf, s->len);
  dist__tcp_complete(t, s, DIST_OK, "%s", "");
  dist__tcp_complete(t, r, DIST_OK, "%s", "");
}

void dist__tcp_self_post(dist__tcp *t, dist__tcp_req *r) {
  int me = t->g->rank;
  if (!r->is_send) {
    for (dist__tcp_req *s = t->self_sends; s; s = s->snext)
      if (s->ctx == r->ctx && s->tag == r->tag) {
        deliver(t, s, r); /* completing s unqueues it */
        return;
      }
    dist__tcp_start_recv(t, r); /* posted; only a send to self matches it */
    return;
  }
  for (dist__tcp_req *q = t->posted; q; q = q->pnext)
    if (q->peer == me && q->ctx == r->ctx && q->tag == r->tag) {
      deliver(t, r, q);
      return;
    }
  r->state = RQ_SEND_SELF;
  r->snext = NULL;
  dist__tcp_req **pp = &t->self_sends;
  while (*pp)
    pp = &(*pp)->snext;
  *pp = r;
}

void dist__tcp_self_unqueue(dist__tcp *t, dist__tcp_req *r) {
  for (dist__tcp_req **pp = &t->self_sends; *pp; pp = &(*pp)->snext)
    if (*pp == r) {
      *pp = r->snext;
      r->snext = NULL;
      return;
    }
}
