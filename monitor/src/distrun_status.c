/* distrun_status.c - SIGUSR1 to distrun prints a live status table of the
 * job, as NCCL's ncclras does, without stopping it: per rank its state
 * (running, blocked, exited), the group and operation it is in or last
 * completed, the sequence number, and for how long.
 *
 * It reads what the ranks' monitors publish in the job's store (one record
 * per rank, rewritten every second, read with the monitor's own parser:
 * mon_record.h) and what distrun knows of the processes. Only this node's
 * ranks' processes are known here; every rank's record is read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "distrun.h"
#include "mon_record.h"

#define STATUS_STORE_MS 1000

typedef struct row {
  bool present;
  char desc[96], last_desc[96]; /* the groups' descriptions */
  char state[16];
  int64_t hb_ms;
  int gid;          /* the group of the oldest operation in flight, or -1 */
  int kind;
  unsigned long long seq;
  int64_t since_ms;
  char site[MON_SITE_LEN], last_site[MON_SITE_LEN];
  int last_gid, last_kind;
  unsigned long long last_seq;
  int64_t last_ms, last_ns;
  mon_rec_refused refused; /* its last refused call */
  char refused_desc[96];
  bool creating, in_store;  /* its "c" and "w" lines (mon_record.h) */
  int64_t lib_ms;           /* its "l" line, 0 none */
  int n_nm;                 /* its calls on groups it is not a member of */
  mon_rec_nonmember nm[MON_NM_MAX];
} row;

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether g's last completion came after the one r holds: by the
 * writer's nanoseconds when the record has them (a step's operations
 * complete within one millisecond), else by the milliseconds. */
static bool completed_later(const row *r, const mon_rec_group *g) {
  if (g->last_ns && r->last_ns)
    return g->last_ns > r->last_ns;
  return g->last_ms >= r->last_ms;
}

/* One group of a record: the oldest in-flight operation across groups
 * wins; else the most recent completion. */
static void take_group(row *r, const mon_rec_group *g) {
  if (g->kind >= 0 && (r->gid < 0 || g->since_ms < r->since_ms)) {
    r->gid = g->gid;
    r->kind = g->kind;
    r->seq = (unsigned long long)(g->has_num ? g->num : g->done + 1);
    r->since_ms = g->since_ms;
    snprintf(r->site, sizeof r->site, "%s", g->site);
    snprintf(r->desc, sizeof r->desc, "%s", g->desc);
  }
  if (g->last_seq && completed_later(r, g)) {
    r->last_gid = g->gid;
    r->last_ns = g->last_ns;
    r->last_kind = g->last_kind;
    r->last_seq = (unsigned long long)(g->has_num ? g->last_num : g->last_seq);
    r->last_ms = g->last_ms;
    snprintf(r->last_site, sizeof r->last_site, "%s", g->last_site);
    snprintf(r->last_desc, sizeof r->last_desc, "%s", g->desc);
  }
}

static void parse(char *text, row *r) {
  *r = (row){.gid = -1, .last_gid = -1};
  mon_rec rec = {0};
  if (dist__mon_rec_parse(text, &rec)) {
    r->present = true;
    snprintf(r->state, sizeof r->state, "%s", rec.state);
    r->hb_ms = rec.hb_ms;
    for (int i = 0; i < rec.n; i++)
      take_group(r, &rec.g[i]);
    r->refused = rec.refused;
    r->creating = rec.creating.on;
    r->in_store = rec.store.on;
    r->lib_ms = rec.lib_ms;
    r->n_nm = rec.n_nm;
    memcpy(r->nm, rec.nm, sizeof r->nm);
    for (int i = 0; i < rec.n; i++)
      if (rec.refused.on && rec.g[i].gid == rec.refused.gid)
        snprintf(r->refused_desc, sizeof r->refused_desc, "%s", rec.g[i].desc);
    /* a call on the handle of a group it destroyed: its "d" line names it */
    for (int i = 0; i < rec.n_destroyed && !r->refused_desc[0]; i++)
      if (rec.refused.on && rec.destroyed[i].gid == rec.refused.gid)
        snprintf(r->refused_desc, sizeof r->refused_desc, "%s", rec.destroyed[i].desc);
  }
  dist__mon_rec_free(&rec);
}

static const char *op(int kind) {
  return kind >= 0 && kind < DIST_OP_COUNT_ ? dist_op_name((dist_op_kind)kind) : "-";
}

/* The monitor's prefix of the job's current init: dist/mon/<job>/<init>/. */
static bool prefix_of(dist_store *s, const char *job, int world, char *out, size_t len) {
  char key[160];
  snprintf(key, sizeof key, "dist/mon/%s/inits", job);
  const char *keys[] = {key};
  bool there = false;
  int64_t inits = 0;
  if (dist_store_check(s, keys, 1, &there) != DIST_OK || !there ||
      dist_store_add(s, key, 0, &inits) != DIST_OK) /* reads the counter */
    return false;
  snprintf(out, len, "dist/mon/%s/%lld/", job, (long long)(inits > 0 ? (inits - 1) / world : 0));
  return true;
}

static void print_row(char *buf, size_t len, size_t *off, int rank, const row *r,
                      const drun_rank *local, int64_t now) {
  const char *state = !r->present ? "no record" : strcmp(r->state, "run") ? r->state
                      : r->gid >= 0                                        ? "in op"
                                                                           : "outside";
  if (local && !local->running)
    state = "exited";
  else if (r->present && now - r->hb_ms > 2500)
    state = "silent";
  dist__appendf(buf, len, off, "  %-5d %-8d %-10s", rank, local ? (int)local->pid : -1, state);
  if (r->gid >= 0)
    dist__appendf(buf, len, off, " %-5d %-22s #%-6llu %7.1f s  %s\n", r->gid, op(r->kind),
                  r->seq, (double)(now - r->since_ms) / 1000, r->site);
  else if (r->last_gid >= 0)
    dist__appendf(buf, len, off, " %-5d %-22s #%-6llu %7.1f s  (since it completed)\n",
                  r->last_gid, op(r->last_kind), r->last_seq, (double)(now - r->last_ms) / 1000);
  else
    dist__appendf(buf, len, off, " -\n");
}

void dist__run_status_table(const drun_cfg *c, drun_job *job, const drun_rank *ranks) {
  int world = c->nproc * c->nnodes;
  char prefix[200];
  int64_t old = dist_store_get_timeout(job->store);
  dist_store_set_timeout(job->store, STATUS_STORE_MS);
  if (!prefix_of(job->store, job->job_id, world, prefix, sizeof prefix)) {
    dist__run_say("status: the ranks have published no progress yet (not initialised, or "
                  "running without the monitor)");
    dist_store_set_timeout(job->store, old);
    return;
  }
  size_t len = 256 + (size_t)world * 240, off = 0;
  char *buf = dist__malloc(len);
  if (!buf)
    return;
  dist__appendf(buf, len, &off, "distrun: status of job %s (SIGUSR1):\n  %-5s %-8s %-10s %-5s %-22s "
                "%-7s %9s  %s\n", job->job_id, "rank", "pid", "state", "group", "operation",
                "seq", "for", "call site");
  int64_t now = wall_ms();
  for (int rk = 0; rk < world; rk++) {
    char key[260];
    snprintf(key, sizeof key, "%sp/%d", prefix, rk);
    const char *keys[] = {key};
    bool there = false;
    row r = {.gid = -1, .last_gid = -1};
    void *v = NULL;
    size_t n = 0;
    if (dist_store_check(job->store, keys, 1, &there) == DIST_OK && there &&
        dist_store_get(job->store, key, &v, &n) == DIST_OK)
      parse((char *)v, &r);
    dist_free(v);
    int local = rk - c->node_rank * c->nproc;
    print_row(buf, len, &off, rk, &r, local >= 0 && local < c->nproc ? &ranks[local] : NULL,
              now);
  }
  dist_store_set_timeout(job->store, old);
  /* One write, as dist__run_say, but the table may be longer than a line. */
  ssize_t w = write(2, buf, off);
  (void)w;
  dist__free(buf);
}

/* Rank's record as published (release with dist_free), or NULL. */
static char *read_text(const drun_cfg *c, drun_job *job, int rank) {
  char prefix[200], key[260];
  int world = c->nproc * c->nnodes;
  if (!job->store || !prefix_of(job->store, job->job_id, world, prefix, sizeof prefix))
    return NULL;
  snprintf(key, sizeof key, "%sp/%d", prefix, rank);
  const char *keys[] = {key};
  bool there = false;
  void *v = NULL;
  size_t n = 0;
  if (dist_store_check(job->store, keys, 1, &there) != DIST_OK || !there ||
      dist_store_get(job->store, key, &v, &n) != DIST_OK)
    return NULL;
  return v;
}

/* Reads rank's record (the monitor's, as of its last heartbeat). */
static bool read_row(const drun_cfg *c, drun_job *job, int rank, row *r) {
  *r = (row){.gid = -1, .last_gid = -1};
  char *v = read_text(c, job, rank);
  if (v)
    parse(v, r);
  dist_free(v);
  return r->present;
}

/* read_text within STATUS_STORE_MS, parsed into *r (release with
 * dist__mon_rec_free). */
static bool read_rec_briefly(const drun_cfg *c, drun_job *job, int rank, mon_rec *r) {
  int64_t old = job->store ? dist_store_get_timeout(job->store) : 0;
  if (job->store)
    dist_store_set_timeout(job->store, STATUS_STORE_MS);
  char *v = read_text(c, job, rank);
  if (job->store)
    dist_store_set_timeout(job->store, old);
  *r = (mon_rec){0};
  bool ok = v && dist__mon_rec_parse(v, r);
  dist_free(v);
  return ok;
}

/* The number (per kind) of g's operation in flight, and of its last ended. */
static uint64_t num_in_flight(const mon_rec_group *g) {
  return g->has_num ? g->num : g->done + 1;
}

static uint64_t num_ended(const mon_rec_group *g) {
  return g->has_num ? g->last_num : g->last_seq;
}

/* Whether other's record shows it at g's operation in flight: in it too,
 * or it was the last that ended there (failed, or completed alone). */
static bool other_at(const mon_rec *o, const mon_rec_group *g) {
  for (int i = 0; i < o->n; i++) {
    const mon_rec_group *h = &o->g[i];
    if (h->gid != g->gid)
      continue;
    return (h->kind == g->kind && num_in_flight(h) == num_in_flight(g)) ||
           (h->last_kind == g->kind && num_ended(h) == num_in_flight(g));
  }
  return false;
}

bool dist__run_rank_left_pending(const drun_cfg *c, drun_job *job, int leaver, int other,
                                 drun_position *out) {
  mon_rec l, o;
  bool found = false;
  if (!read_rec_briefly(c, job, leaver, &l))
    return false;
  if (strcmp(l.state, "exit") || !read_rec_briefly(c, job, other, &o)) {
    dist__mon_rec_free(&l);
    return false;
  }
  for (int i = 0; i < l.n && !found; i++) {
    const mon_rec_group *g = &l.g[i];
    if (g->kind < 0 || g->sync || !other_at(&o, g))
      continue; /* nothing in flight, or a call it was inside (not left pending) */
    found = true;
    *out = (drun_position){.in_op = true, .gid = g->gid, .kind = g->kind,
                           .seq = (unsigned long long)num_in_flight(g)};
    snprintf(out->desc, sizeof out->desc, "%s", g->desc);
    snprintf(out->site, sizeof out->site, "%s", g->site);
  }
  dist__mon_rec_free(&l);
  dist__mon_rec_free(&o);
  return found;
}

bool dist__run_rank_destroyed(const drun_cfg *c, drun_job *job, int rank, int gid,
                              drun_left *out) {
  mon_rec r;
  if (!read_rec_briefly(c, job, rank, &r))
    return false;
  const mon_rec_destroyed *d = NULL;
  for (int i = 0; i < r.n_destroyed && !d; i++)
    if (r.destroyed[i].gid == gid)
      d = &r.destroyed[i];
  for (int i = 0; d && i < r.n; i++)
    if (r.g[i].gid == gid)
      d = NULL; /* it lists the group again: not the one it destroyed */
  if (d) {
    *out = (drun_left){.has_counts = d->has_counts, .colls = d->colls,
                       .last_kind = d->last_kind, .last_num = d->last_num};
    snprintf(out->desc, sizeof out->desc, "%s", d->desc);
    snprintf(out->last_site, sizeof out->last_site, "%s", d->last_site);
    snprintf(out->site, sizeof out->site, "%s", d->site);
  }
  dist__mon_rec_free(&r);
  return d != NULL;
}

/* read_row within STATUS_STORE_MS, the store's own timeout put back after. */
static bool read_row_briefly(const drun_cfg *c, drun_job *job, int rank, row *r) {
  int64_t old = job->store ? dist_store_get_timeout(job->store) : 0;
  if (job->store)
    dist_store_set_timeout(job->store, STATUS_STORE_MS);
  bool ok = read_row(c, job, rank, r);
  if (job->store)
    dist_store_set_timeout(job->store, old);
  return ok;
}

bool dist__run_rank_exiting(const drun_cfg *c, drun_job *job, int rank) {
  row r;
  bool ok = read_row_briefly(c, job, rank, &r);
  return ok && strcmp(r.state, "exit") == 0;
}

static void refused_position(const row *r, drun_position *out) {
  *out = (drun_position){.refused = true, .gid = r->refused.gid, .kind = r->refused.kind,
                         .seq = r->refused.num};
  snprintf(out->desc, sizeof out->desc, "%s", r->refused_desc[0] ? r->refused_desc : "?");
  snprintf(out->site, sizeof out->site, "%s", r->refused.site);
  snprintf(out->why, sizeof out->why, "%s", r->refused.msg);
}

bool dist__run_rank_refused(const drun_cfg *c, drun_job *job, int rank, drun_position *out) {
  row r;
  if (!read_row_briefly(c, job, rank, &r) || !r.refused.on)
    return false;
  refused_position(&r, out);
  return true;
}

bool dist__run_rank_non_member(const drun_cfg *c, drun_job *job, int rank, int gid,
                               uint64_t num, int *kind, char *site, size_t len) {
  static row r; /* the record's lines are large; distrun's main thread only */
  if (!read_row_briefly(c, job, rank, &r))
    return false;
  for (int i = 0; i < r.n_nm; i++)
    if (r.nm[i].gid == gid && r.nm[i].num == num && r.nm[i].kind >= 0 &&
        r.nm[i].kind < DIST_OP_COUNT_) {
      *kind = r.nm[i].kind;
      snprintf(site, len, "%s", r.nm[i].site);
      return true;
    }
  return false;
}

bool dist__run_rank_position(const drun_cfg *c, drun_job *job, int rank, drun_position *out) {
  row r;
  bool ok = read_row_briefly(c, job, rank, &r);
  if (!ok || (r.gid < 0 && r.last_gid < 0 && !(r.refused.on && r.refused.latest)))
    return false;
  if (r.refused.on && r.refused.latest) { /* the call it ended on, most likely */
    refused_position(&r, out);
    return true;
  }
  bool in = r.gid >= 0;
  *out = (drun_position){.in_op = in, .gid = in ? r.gid : r.last_gid,
                         .kind = in ? r.kind : r.last_kind,
                         .seq = in ? r.seq : r.last_seq};
  snprintf(out->desc, sizeof out->desc, "%s", in ? r.desc : r.last_desc);
  snprintf(out->site, sizeof out->site, "%s", in ? r.site : r.last_site);
  return true;
}

bool dist__run_rank_outside(const drun_cfg *c, drun_job *job, int rank, int64_t *since_ms) {
  row r;
  if (!read_row_briefly(c, job, rank, &r) || strcmp(r.state, "run") != 0 || r.gid >= 0 ||
      r.creating || r.in_store)
    return false;
  int64_t t = r.lib_ms > r.last_ms ? r.lib_ms : r.last_ms;
  *since_ms = t ? t : r.hb_ms;
  return true;
}
