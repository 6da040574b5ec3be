/* absent.c - naming the members that never reached an exchange.
 *
 * When the exchange fails (the helper's collective timed out, or a peer was
 * lost), each rank that did arrive says so in the job's store under a key
 * for this group and collective count, then waits a bounded moment (a
 * quarter of the timeout, at most 2 s, which the exchange left over: the
 * whole check ends within the group's timeout) for the other arrivals:
 * ranks that arrived together time out together. Members without a key
 * are named with their host and pid (exchanged when the helper was made)
 * and their last collective on the group with its call site (from the last
 * exchange that agreed, resolved here: the record carries module and
 * offset, not a raw address), and, when their own check failed too, the
 * operation of another group they are waiting in. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "wpg_int.h"

static void key(char *buf, size_t len, const wpg *w, uint64_t count, int grank) {
  snprintf(buf, len, "wpg/%s/here/%" PRIu64 "/%d", w->info->name, count, grank);
}

static void seconds(int64_t ms, char *buf, size_t len) {
  if (ms % 1000 == 0)
    snprintf(buf, len, "%" PRId64 " s", ms / 1000);
  else
    snprintf(buf, len, "%" PRId64 " ms", ms);
}

/* present[r]: whether member r said it arrived. */
static void arrivals(wpg *w, dist_store *st, uint64_t count, const bool *gone, bool *present) {
  int n = w->size, k = 0;
  size_t nz = n > 0 ? (size_t)n : 1;
  char (*keys)[128] = calloc(nz, sizeof *keys);
  const char **kp = calloc(nz, sizeof *kp);
  for (int r = 0; keys && kp && r < n; r++) {
    present[r] = r == w->rank;
    if (r != w->rank && !gone[r]) { /* a rank that left will not come */
      key(keys[k], sizeof keys[k], w, count, r);
      kp[k] = keys[k];
      k++;
    }
  }
  if (!keys || !kp) {
    free(keys), free(kp);
    return;
  }
  if (k) /* A timeout here is the answer. */
    dist_store_wait(st, kp, (size_t)k, wpg_grace_ms(w->info->timeout_ms));
  for (int r = 0, i = 0; r < n; r++) {
    if (r == w->rank || gone[r])
      continue;
    bool here = false;
    dist_store_check(st, &kp[i++], 1, &here);
    present[r] = here;
  }
  free(keys), free(kp);
}

/* Job-wide: where each rank stopped when its own check failed, so a rank
 * absent here can be found waiting in another group's operation. */
static void where_key(char *buf, size_t len, int global) {
  snprintf(buf, len, "wpg/at/%d/%d", wpg_generation(), global);
}

static void say_where(const wpg *w, dist_store *st, const dist_coll *c) {
  char k[64], v[256], gname[160];
  where_key(k, sizeof k, w->info->global_rank);
  wpg_group_name(w->info, gname, sizeof gname);
  int n = snprintf(v, sizeof v, "%s #%" PRIu64 " of %s", dist_op_name(wpg_kind(c)), c->seq, gname);
  dist_store_set(st, k, v, (size_t)n); /* best effort: the report stands without it */
}

/* "waiting in BARRIER #1 of group 1 (g1, 3 ranks); " or "". */
static void waiting_in(dist_store *st, int global, char *buf, size_t len) {
  char k[64];
  where_key(k, sizeof k, global);
  const char *keys[1] = {k};
  bool there = false;
  void *v = NULL;
  size_t n = 0;
  buf[0] = '\0';
  if (dist_store_check(st, keys, 1, &there) == DIST_OK && there &&
      dist_store_get(st, k, &v, &n) == DIST_OK)
    snprintf(buf, len, "waiting in %.*s; ", (int)n, (char *)v);
  dist_free(v);
}

static void last_op(const wpg *w, int r, char *buf, size_t len) {
  wpg_fp last;
  if (!wpg_last_of(w, r, &last)) {
    snprintf(buf, len, "it has run no collective on this group");
    return;
  }
  const wpg_fp *p = &last;
  char site[200];
  wpg_site_resolve_off(p->module, p->caller_off, site, sizeof site);
  snprintf(buf, len, "its last operation was %s #%" PRIu64 ", called from %s",
           dist_op_name((dist_op_kind)p->kind), p->seq, site);
}

/* What a report of ranks missing from c names, for the job's verdict. */
static dist_cause_info named(const wpg *w, const dist_coll *c, const int *ranks, int n,
                             const char *field) {
  dist_cause_info in = dist_cause_info_none();
  in.culprits = ranks;
  in.n_culprits = (size_t)n;
  in.group_id = w->info->group_id;
  in.group_name = wpg_group_label(w->info);
  in.op = wpg_kind(c);
  in.seq = c->seq;
  in.field = field;
  return in;
}

/* The report: status.h's header naming the absent ranks, one line each. */
static int report(wpg *w, dist_store *st, const dist_coll *c, int rc, const bool *present,
                  int lowest) {
  char *msg = malloc(WPG_MSG_LEN);
  int *absent = calloc((size_t)w->size, sizeof *absent), n = 0;
  if (!msg || !absent) {
    free(msg), free(absent);
    return wpg_set_error(w, rc, "out of memory naming absent ranks");
  }
  for (int r = 0; r < w->size; r++)
    if (!present[r])
      absent[n++] = w->info->global_ranks[r];
  char gname[160], tmo[32], list[256];
  wpg_group_name(w->info, gname, sizeof gname);
  seconds(w->info->timeout_ms, tmo, sizeof tmo);
  size_t lo = 0;
  for (int i = 0; i < n; i++)
    wpg_appendf(list, sizeof list, &lo, "%s%d", i ? "," : "", absent[i]);
  size_t off = 0;
  wpg_appendf(msg, WPG_MSG_LEN, &off, "%s in %s at %s #%" PRIu64 ": %s %s ",
              rc == DIST_E_PEER_LOST ? "peer lost" : "timeout", gname, dist_op_name(wpg_kind(c)),
              c->seq, n > 1 ? "ranks" : "rank", list);
  if (rc == DIST_E_PEER_LOST)
    wpg_appendf(msg, WPG_MSG_LEN, &off, "%s lost before arriving", n > 1 ? "were" : "was");
  else
    wpg_appendf(msg, WPG_MSG_LEN, &off, "did not arrive within %s", tmo);
  for (int r = 0; r < w->size; r++) {
    if (present[r])
      continue;
    char last[320], where[300];
    last_op(w, r, last, sizeof last);
    waiting_in(st, w->info->global_ranks[r], where, sizeof where);
    wpg_appendf(msg, WPG_MSG_LEN, &off, "\n  rank %d (", w->info->global_ranks[r]);
    if (w->info->global_ranks[r] != r)
      wpg_appendf(msg, WPG_MSG_LEN, &off, "group rank %d, ", r);
    if (w->ident[r].pid) /* unknown when the helper was never made */
      wpg_appendf(msg, WPG_MSG_LEN, &off, "host %s, pid %d): %s%s", w->ident[r].host,
                  w->ident[r].pid, where, last);
    else
      wpg_appendf(msg, WPG_MSG_LEN, &off, "never joined the check): %s%s", where, last);
  }
  dist_cause_info in = named(w, c, absent, n, NULL);
  rc = wpg_fail(w, rc, msg, lowest, &in);
  free(msg), free(absent);
  return rc;
}

static const char *what(int rc) {
  switch (rc) {
  case DIST_E_TIMEOUT: return "timeout";
  case DIST_E_PEER_LOST: return "peer lost";
  case DIST_E_ABORTED: return "aborted";
  case DIST_E_NOMEM: return "out of memory";
  case DIST_E_CLOSED: return "closed";
  default: return "backend error";
  }
}

/* A failure that is not about who arrived (an abort, a broken helper): the
 * helper's message under this group's header. */
static int relay(wpg *w, const dist_coll *c, int rc, const char *gname, const char *why) {
  return wpg_set_error(w, rc, "%s in %s at %s #%" PRIu64 ": %s", what(rc), gname,
                                dist_op_name(wpg_kind(c)), c->seq, why);
}

/* --- a member that left -------------------------------------------------- */

static void left_key(char *buf, size_t len, const wpg *w, int grank) {
  snprintf(buf, len, "wpg/%s/left/%d/%d", w->info->name, wpg_generation(), grank);
}

void wpg_leave(wpg *w, bool exiting) {
  if (w->size < 2 || !w->helper || !dist_get_default_store())
    return;
  wpg_left me = {.count = w->coll_count, .pending_from = exiting ? 0 : w->pending_from,
                 .have_last = w->have_prev, .exited = exiting};
  if (w->have_prev)
    me.last = w->last_mine;
  /* The job's own handle, on the thread that destroys the group (or
   * exits): a new connection would wait out the store's timeout when the
   * rank hosting the store has already gone. Best effort: without the
   * record the others name this rank as absent. */
  char k[128];
  left_key(k, sizeof k, w, w->rank);
  dist_store_set(dist_get_default_store(), k, &me, sizeof me);
}

/* Fills gone[r] and left[r] for the members that left the group before
 * collective count (a member that reached it, said so, or counted it left
 * later, for its own reason: it is not named); returns how many did. */
static int read_left(wpg *w, dist_store *st, uint64_t count, wpg_left *gone, bool *left) {
  int n = 0;
  for (int r = 0; r < w->size; r++) {
    char k[128];
    const char *kp[1] = {k};
    bool there = false;
    void *v = NULL;
    size_t len = 0;
    left[r] = false;
    if (r == w->rank)
      continue;
    left_key(k, sizeof k, w, r);
    if (dist_store_check(st, kp, 1, &there) == DIST_OK && there &&
        dist_store_get(st, k, &v, &len) == DIST_OK && len == sizeof *gone) {
      memcpy(&gone[r], v, sizeof *gone);
      char hk[128];
      const char *hp[1] = {hk};
      bool arrived = false;
      key(hk, sizeof hk, w, count, r);
      dist_store_check(st, hp, 1, &arrived);
      left[r] = gone[r].count < count && !arrived;
      n += left[r];
    }
    dist_free(v);
  }
  return n;
}

/* A member ran out of calls: it destroyed the group (or exited) after
 * fewer collectives than this rank issued. A desync, not a timeout: the
 * counts parted. */
static int report_left(wpg *w, dist_store *st, const dist_coll *c, uint64_t count,
                       const wpg_left *gone, const bool *left) {
  char *msg = malloc(WPG_MSG_LEN);
  if (!msg)
    return wpg_set_error(w, DIST_E_DESYNC, "desync: a member left the group");
  char gname[160], site[200], here[200], list[256];
  wpg_group_name(w->info, gname, sizeof gname);
  size_t lo = 0, off = 0;
  int n = 0, lowest = w->info->global_rank;
  for (int r = 0; r < w->size; r++)
    if (left[r])
      wpg_appendf(list, sizeof list, &lo, "%s%d", n++ ? "," : "", w->info->global_ranks[r]);
  wpg_appendf(msg, WPG_MSG_LEN, &off, "desync in %s at %s #%" PRIu64 ": %s %s left the group "
              "(destroyed it or exited) before this collective; the collective counts differ",
              gname, dist_op_name(wpg_kind(c)), c->seq, n > 1 ? "ranks" : "rank", list);
  wpg_site_resolve(c->caller, here, sizeof here);
  wpg_appendf(msg, WPG_MSG_LEN, &off, "\n  rank %d: at %s #%" PRIu64 " (collective %" PRIu64
              " of the group), called from %s", w->info->global_rank, dist_op_name(wpg_kind(c)),
              c->seq, count, here);
  for (int r = 0; r < w->size; r++) {
    if (!left[r])
      continue;
    wpg_appendf(msg, WPG_MSG_LEN, &off, "\n  rank %d (", w->info->global_ranks[r]);
    if (w->info->global_ranks[r] != r)
      wpg_appendf(msg, WPG_MSG_LEN, &off, "group rank %d, ", r);
    wpg_appendf(msg, WPG_MSG_LEN, &off, "host %s, pid %d): left after %" PRIu64 " collective%s",
                w->ident[r].host, w->ident[r].pid, gone[r].count, gone[r].count == 1 ? "" : "s");
    if (gone[r].have_last) {
      wpg_site_resolve_off(gone[r].last.module, gone[r].last.caller_off, site, sizeof site);
      wpg_appendf(msg, WPG_MSG_LEN, &off, "; its last operation was %s #%" PRIu64
                  ", called from %s", dist_op_name((dist_op_kind)gone[r].last.kind),
                  gone[r].last.seq, site);
    }
    /* Its process ended, not its part in the group: distrun tells a rank
     * that failed on its own (and exited with the group live) from one
     * that left the group and called on elsewhere. */
    if (gone[r].exited)
      wpg_appendf(msg, WPG_MSG_LEN, &off, "; its process exited with the group live");
    wpg_appendf(msg, WPG_MSG_LEN, &off, "  <- collective count differs");
  }
  /* The lowest rank that reached this collective logs and posts: the
   * others that wait see the same records and name the same ranks. Not a
   * rank merely not counted left yet: it may be exiting cleanly too (every
   * other rank finished, this one calls on), and then nobody would post. */
  for (int r = 0; r < w->size; r++) {
    char k[128];
    const char *kp[1] = {k};
    bool there = r == w->rank;
    if (!left[r] && !there) {
      key(k, sizeof k, w, count, r);
      dist_store_check(st, kp, 1, &there);
    }
    if (there && !left[r]) {
      lowest = w->info->global_ranks[r];
      break;
    }
  }
  int *gone_ranks = calloc(w->size > 0 ? (size_t)w->size : 1, sizeof *gone_ranks), k = 0;
  for (int r = 0; gone_ranks && r < w->size; r++)
    if (left[r])
      gone_ranks[k++] = w->info->global_ranks[r];
  dist_cause_info in = named(w, c, gone_ranks, k, "collective count");
  /* The line of the collective the ranks that left never called (as a
   * hang names the call a rank never made: where its peers wait). */
  in.site = here[0] ? here : NULL;
  int rc = wpg_fail(w, DIST_E_DESYNC, msg, lowest, &in);
  free(gone_ranks);
  free(msg);
  return rc;
}

/* The member whose record (read_left) says its destroy of the group
 * failed collective count pending: it issued this one and never waited
 * for it; -1 when none. */
static int left_it_pending(const wpg *w, uint64_t count, const wpg_left *gone) {
  for (int r = 0; r < w->size; r++)
    if (r != w->rank && gone[r].pending_from && gone[r].pending_from <= count &&
        count <= gone[r].count)
      return r;
  return -1;
}

/* Such a member is not absent: it was in the collective, and its destroy
 * failed it here (the helper's message says how, less the number of the
 * helper's own exchange: "ALL_REDUCE #0: ", which is not the user's call). */
static int relay_pending(wpg *w, const dist_coll *c, int rc, const char *gname, int r,
                         const char *why) {
  int skip = 0;
  if (sscanf(why, "%*[A-Z_] #%*u: %n", &skip) != 0 || skip <= 0)
    skip = 0;
  why += skip;
  return wpg_set_error(w, rc, "%s in %s at %s #%" PRIu64 ": rank %d destroyed the group with "
                       "this collective pending (it never waited for it): %s", what(rc), gname,
                       dist_op_name(wpg_kind(c)), c->seq, w->info->global_ranks[r], why);
}

static int name_absent(wpg *w, dist_store *st, const dist_coll *c, uint64_t count, int rc,
                       const char *gname, const char *whyb) {
  size_t n = (size_t)w->size;
  bool *present = calloc(n, sizeof *present), *left = calloc(n, sizeof *left);
  wpg_left *gone = calloc(n, sizeof *gone);
  char k[128];
  key(k, sizeof k, w, count, w->rank);
  if (!present || !left || !gone || dist_store_set(st, k, "1", 1) != DIST_OK) {
    free(present), free(left), free(gone);
    return relay(w, c, rc, gname, whyb);
  }
  say_where(w, st, c);
  if (read_left(w, st, count, gone, left)) {
    rc = report_left(w, st, c, count, gone, left);
    free(present), free(left), free(gone);
    return rc;
  }
  int pending = left_it_pending(w, count, gone);
  if (pending >= 0) {
    rc = relay_pending(w, c, rc, gname, pending, whyb);
    free(present), free(left), free(gone);
    return rc;
  }
  arrivals(w, st, count, left, present);
  free(left), free(gone);
  int lowest = -1, n_absent = 0;
  for (int r = 0; r < w->size; r++) {
    if (present[r] && lowest < 0)
      lowest = w->info->global_ranks[r];
    n_absent += !present[r];
  }
  if (!n_absent) {
    free(present);
    return relay(w, c, rc, gname, whyb);
  }
  rc = report(w, st, c, rc == DIST_E_PEER_LOST ? rc : DIST_E_TIMEOUT, present, lowest);
  free(present);
  return rc;
}

int wpg_absent(wpg *w, const dist_coll *c, uint64_t count, int rc, const char *why) {
  char whyb[512], gname[160];
  snprintf(whyb, sizeof whyb, "%s", why ? why : "");
  wpg_group_name(w->info, gname, sizeof gname);
  if (rc != DIST_E_TIMEOUT && rc != DIST_E_PEER_LOST)
    return relay(w, c, rc, gname, whyb);
  /* A handle of its own: groups may fail on several threads at once, and
   * a store handle serves one thread. */
  dist_store *st = NULL;
  if (!dist_get_default_store() || dist_store_clone(dist_get_default_store(), &st) != DIST_OK)
    return relay(w, c, rc, gname, whyb);
  rc = name_absent(w, st, c, count, rc, gname, whyb);
  dist_store_destroy(st);
  return rc;
}
