/* pg_cause.c - a group's failures as the job's cause (job/cause.c posts).
 *
 * A desync that a group meets (a backend's own size checks, or the
 * checking layer's report relayed by its wrapper) becomes the job's cause
 * with the fields that name what it blames: the ranks its report marks,
 * the group, the operation. And the first rank to leave with its default
 * group live claims DIST_KEY_FIRST_EXIT before its connections close, so
 * distrun can tell the rank that ended first from the ones that lost it.
 * A group the program aborts (dist_abort_group) is the job's cause too,
 * naming the rank that aborted it: its peers' failures follow from it. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/report.h"
#include "pg_int.h"
#include "store/store_int.h"

/* The ranks a report in the house format marks ("  rank 3 (group rank 1):
 * ...  <- dtype differs", status.h) and the field of its header ("ranks
 * disagree on the dtype"): what the report blames, for the verdict. */
static size_t marked_ranks(const char *rep, int *out, size_t cap, char *field, size_t flen) {
  size_t n = 0;
  field[0] = '\0';
  const char *f = strstr(rep, "ranks disagree on the ");
  if (f) {
    f += strlen("ranks disagree on the ");
    size_t k = strcspn(f, "\n");
    snprintf(field, flen, "%.*s", (int)(k < flen ? k : flen - 1), f);
  } else if (strstr(rep, "  <- collective count differs")) /* members left: counts parted */
    snprintf(field, flen, "collective count");
  for (const char *l = rep; *l && n < cap;) {
    const char *end = strchr(l, '\n');
    size_t ll = end ? (size_t)(end - l) : strlen(l);
    int r;
    if (sscanf(l, "  rank %d", &r) == 1 && memmem(l, ll, "  <- ", 5))
      out[n++] = r;
    l += ll + (end != NULL);
  }
  return n;
}

/* The operation a marked line names ("  rank 5 (group rank 1): RECV #21
 * float32[8] from rank 6 ...  <- size differs", "  rank 3: SEND #6 ..." in
 * the default group, or a collective's "  rank 3 (group rank 1): BARRIER
 * <- operation differs", whose number is the collective's, *seq as it
 * is): a point-to-point pair's two sides are different operations, and so
 * are a collective's when one rank skipped or swapped a call; the verdict
 * names the culprit's own, not the reporter's (whose operation the header
 * names, and which may report first). */
static bool marked_op(const char *rep, int rank, int *kind, uint64_t *seq) {
  for (const char *l = rep; *l;) {
    const char *end = strchr(l, '\n');
    size_t ll = end ? (size_t)(end - l) : strlen(l);
    const char *colon = memchr(l, ':', ll);
    char name[28];
    unsigned long long n = 0;
    int r, k, at = 0;
    if (colon && sscanf(l, "  rank %d", &r) == 1 && r == rank && memmem(l, ll, "  <- ", 5) &&
        sscanf(colon, ": %27[A-Z0-9_]%n", name, &at) == 1 && at > 0) {
      sscanf(colon + at, " #%llu", &n); /* a send's or receive's own number */
      for (k = 0; k < DIST_OP_COUNT_ && strcmp(dist_op_name((dist_op_kind)k), name); k++)
        ;
      if (k < DIST_OP_COUNT_ && (n > 0 || !dist_op_is_p2p((dist_op_kind)k))) {
        *kind = k;
        *seq = n > 0 ? n : *seq;
        return true;
      }
    }
    l += ll + (end != NULL);
  }
  return false;
}

/* A call that failed for an earlier one ("ALL_REDUCE #12 not run: BROADCAST
 * #11 (an earlier call): ...", a small broadcast's deferred check,
 * shm_settle.c; "ALL_REDUCE #12 not run: an earlier broadcast, which ...
 * failed: BROADCAST #11: ...", tcp_coll.c): the earlier call's kind and
 * number into *kind and *seq, which the report's lines describe. */
static void earlier_call(const char *rep, int *kind, uint64_t *seq) {
  const char *at = strstr(rep, " not run: ");
  char name[28];
  unsigned long long n = 0;
  int used = 0;
  const char *tcp = at ? strstr(at, ", failed: ") : NULL;
  if (at && !strncmp(at, " not run: an earlier broadcast, ", 32) && tcp) {
    if (sscanf(tcp, ", failed: %27[A-Z0-9_] #%llu:%n", name, &n, &used) != 2 || used == 0 ||
        n == 0)
      return;
  } else if (!at || sscanf(at, " not run: %27[A-Z0-9_] #%llu (an earlier call)%n", name, &n,
                           &used) != 2 || used == 0 || n == 0) {
    return;
  }
  for (int k = 0; k < DIST_OP_COUNT_; k++)
    if (!strcmp(dist_op_name((dist_op_kind)k), name)) {
      *kind = k;
      *seq = n;
      return;
    }
}

void dist__cause_post_failure(dist_pg *g, const dist_coll *c, int rc, const char *msg) {
  if (rc != DIST_E_DESYNC || !dist_get_default_store())
    return;
  const dist_pg_info *in = &g->info;
  size_t cap = DIST_ERRMSG_LEN + 512;
  char *rep = dist__malloc(cap);
  if (!rep)
    return;
  size_t off = 0;
  if (msg && dist__report_has_head(msg)) {
    dist__appendf(rep, cap, &off, "%s", msg); /* pg.c headed it: the report as logged */
  } else {
    dist__report_group rg = {in->group_id, in->name, in->desc, in->size};
    dist__report_head(rep, cap, rc, &rg, c ? c->kind : DIST_OP_BARRIER, c ? c->seq : 0,
                      msg && *msg ? msg : dist_strerror(rc));
    off = strlen(rep);
  }
  /* distrun prints it away from the rank's own output: name the origin
   * once, as status.h's "seen by" line does for relayed reports. */
  dist__appendf(rep, cap, &off, "\n  reported by rank %d (host %s, pid %d)", in->global_rank,
                dist__hostname(), (int)getpid());
  int culprits[DIST_CAUSE_CULPRITS_MAX];
  char field[32];
  int n = marked_ranks(rep, culprits, DIST_CAUSE_CULPRITS_MAX, field, sizeof field);
  if (g->inner && (n == 0 || !c || !dist_op_is_p2p(c->kind))) {
    /* A wrapper's failure: the checking layer posts its own report with
     * what it blames, which replaces this plain relay (cause.c's rule), so
     * the job's cause does not depend on which rank posted first. A send
     * and receive, which the layer forwards unchecked, are the exception:
     * what the inner group found and marked (sizes that differ) is posted
     * with its culprits. A collective's marked relay would race the
     * layer's own report, so it stays plain. */
    dist_post_cause(rc, rep);
    dist__free(rep);
    return;
  }
  dist_cause_info ci = dist_cause_info_none();
  ci.culprits = culprits;
  ci.n_culprits = n;
  ci.group_id = in->group_id;
  ci.group_name = in->desc && in->desc[0] ? in->desc : in->name;
  ci.op = c ? (int)c->kind : -1;
  ci.seq = c ? c->seq : 0;
  int kind;
  uint64_t seq = ci.seq;
  /* A blob collective's report marks its pieces ("BROADCAST int64[1]"):
   * the verdict names the call the program made (BROADCAST_BYTES). */
  bool blob = c && strstr(dist_op_name(c->kind), "_BYTES") != NULL;
  if (c && n == 1 && culprits[0] != in->global_rank && marked_op(rep, culprits[0], &kind, &seq) &&
      dist_op_is_p2p((dist_op_kind)kind) == dist_op_is_p2p(c->kind) && !blob) {
    ci.op = kind;
    ci.seq = seq;
  }
  if (c && !dist_op_is_p2p(c->kind))
    earlier_call(rep, &ci.op, &ci.seq);
  ci.field = field[0] ? field : NULL;
  dist_post_cause_info(rc, &ci, rep);
  dist__free(rep);
}

void dist__cause_post_abort(dist_pg *g, const char *why) {
  if (!dist_get_default_store())
    return;
  const dist_pg_info *in = &g->info;
  char rep[DIST_ERRMSG_LEN + 256];
  snprintf(rep, sizeof rep, "aborted in group %d (%s, %d ranks): %s\n  reported by rank %d "
           "(host %s, pid %d)", in->group_id, in->desc && in->desc[0] ? in->desc : in->name,
           in->size, why, in->global_rank, dist__hostname(), (int)getpid());
  int me = in->global_rank;
  dist_cause_info ci = dist_cause_info_none();
  ci.culprits = &me;
  ci.n_culprits = 1;
  ci.group_id = in->group_id;
  ci.group_name = in->desc && in->desc[0] ? in->desc : in->name;
  dist_post_cause_info(DIST_E_ABORTED, &ci, rep);
}

void dist__cause_post_destroyed(dist_pg *g, int n, int kind, uint64_t seq) {
  if (!dist_get_default_store())
    return;
  const dist_pg_info *in = &g->info;
  const char *name = in->desc && in->desc[0] ? in->desc : in->name;
  char why[DIST_ERRMSG_LEN];
  snprintf(why, sizeof why, "rank %d destroyed group %d (%s) with %s #%llu%s pending (never "
           "waited): it fails there and on the group's other members", in->global_rank,
           in->group_id, name, dist_op_name((dist_op_kind)kind), (unsigned long long)seq,
           n > 1 ? " and more" : "");
  char rep[DIST_ERRMSG_LEN + 256];
  snprintf(rep, sizeof rep, "aborted in group %d (%s, %d ranks) at %s #%llu: %s\n  reported by "
           "rank %d (host %s, pid %d)", in->group_id, name, in->size,
           dist_op_name((dist_op_kind)kind), (unsigned long long)seq, why, in->global_rank,
           dist__hostname(), (int)getpid());
  int me = in->global_rank;
  dist_cause_info ci = dist_cause_info_none();
  ci.culprits = &me;
  ci.n_culprits = 1;
  ci.group_id = in->group_id;
  ci.group_name = name;
  ci.op = kind;
  ci.seq = seq;
  ci.field = "destroyed";
  dist_post_cause_info(DIST_E_ABORTED, &ci, rep);
}

/* --- the first rank to leave --------------------------------------------- */

static pid_t exit_watch_pid; /* the process that registered the handler */

/* Runs in exit() (and on return from main) while the default group lives,
 * and when the program destroys its default group: before this process's
 * connections close, so before any peer can notice it left, it claims
 * DIST_KEY_FIRST_EXIT (dist/internal/launch.h). A rank that ends its part
 * early by destroying its groups (and then lingers: the monitor's last
 * statistics, the trace's flush) is so told apart from the ranks that
 * report its departure. */
void dist__cause_claim_first_exit(void) {
  dist_store *job = dist_get_default_store();
  dist_pg *g = dist__pg_default();
  if (getpid() != exit_watch_pid || !job || !g || g == DIST_GROUP_NON_MEMBER)
    return; /* a forked child, or the group was destroyed: a clean end */
  dist_store *h;
  if (dist__store_clone_within(job, DIST_CAUSE_TIMEOUT_MS, &h) != DIST_OK)
    return;
  char me[16];
  int n = snprintf(me, sizeof me, "%d", g->info.global_rank);
  void *cur = NULL;
  size_t cur_len = 0;
  dist_store_compare_set(h, DIST_KEY_FIRST_EXIT, "", 0, me, (size_t)n, &cur, &cur_len);
  dist_free(cur);
  dist_store_destroy(h);
}

void dist__cause_watch_exit(void) {
  static bool registered;
  exit_watch_pid = getpid();
  if (!registered)
    registered = atexit(dist__cause_claim_first_exit) == 0;
}
