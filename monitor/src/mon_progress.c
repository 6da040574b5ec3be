/* mon_progress.c - each rank's progress record in the job's store.
 *
 * One key per rank, dist/mon/<job>/<init>/p/<R>, rewritten by the watchdog
 * at most once a second (and at once when a stall needs fresh figures):
 * the write time is the rank's heartbeat. The text format, and its parser,
 * are in mon_record.h; call sites are symbolised here, since an address
 * means nothing in another process. */
#include <stdio.h>
#include <stdlib.h>

#include <dist/internal/launch.h>
#include "mon_int.h"

#define REC_MAX (1 << 16)

void dist__mon_key(char *buf, size_t len, const char *kind, int rank) {
  snprintf(buf, len, "%s%s/%d", dist__mon.prefix, kind, rank);
}

static void put_group(char *buf, size_t len, size_t *off, mon_group *g) {
  uint64_t done = atomic_load_explicit(&g->done, memory_order_acquire);
  uint64_t enq = atomic_load_explicit(&g->enq, memory_order_acquire);
  uint64_t started = atomic_load_explicit(&g->started, memory_order_relaxed);
  int kind = -1, peer = MON_PEER_NONE, peer2 = MON_PEER_NONE, tag = 0, sync = 0;
  uint64_t num = 0, coll = 0, pair = 0, colls_done = atomic_load_explicit(&g->colls_done, memory_order_acquire);
  uint64_t colls_enq = atomic_load_explicit(&g->colls_enq, memory_order_relaxed);
  int64_t since = 0;
  char site[MON_SITE_LEN] = "-", last_site[MON_SITE_LEN] = "-";
  if (enq > done) {
    mon_op *op = &g->ring[(done + 1) % MON_RING];
    if (atomic_load_explicit(&op->seq, memory_order_acquire) == done + 1) {
      kind = atomic_load_explicit(&op->kind, memory_order_relaxed);
      peer = atomic_load_explicit(&op->peer, memory_order_relaxed);
      peer2 = atomic_load_explicit(&op->peer2, memory_order_relaxed);
      coll = atomic_load_explicit(&op->coll, memory_order_relaxed);
      num = atomic_load_explicit(&op->num, memory_order_relaxed);
      tag = atomic_load_explicit(&op->tag, memory_order_relaxed);
      sync = atomic_load_explicit(&op->sync, memory_order_relaxed);
      pair = atomic_load_explicit(&op->pair, memory_order_relaxed);
      since = dist__mon_wall_ms(atomic_load_explicit(&op->t_enq_ns, memory_order_relaxed));
      dist__mon_symbolize(atomic_load_explicit(&op->caller, memory_order_relaxed), site,
                          sizeof site);
    }
  }
  int last_kind = done ? atomic_load_explicit(&g->last_kind, memory_order_relaxed) : -1;
  uint64_t last_num = atomic_load_explicit(&g->last_num, memory_order_relaxed);
  int64_t last_ms = 0;
  if (done) {
    last_ms = dist__mon_wall_ms(atomic_load_explicit(&g->last_done_ns, memory_order_relaxed));
    dist__mon_symbolize(atomic_load_explicit(&g->last_caller, memory_order_relaxed), last_site,
                        sizeof last_site);
  }
  char desc[sizeof g->desc];
  snprintf(desc, sizeof desc, "%s", g->desc[0] ? g->desc : g->name);
  for (char *p = desc; *p; p++)
    if (*p == '\t' || *p == '\n')
      *p = ' ';
  dist__appendf(buf, len, off,
                "g\t%d\t%d\t%llu\t%llu\t%llu\t%d\t%lld\t%d\t%lld\t%s\t%s\t%s\t%d\t%llu\t%llu\t%llu"
                "\t%llu\t%d\t%llu\t%llu\t%d\t%d\t%llu\n",
                g->gid, g->size, (unsigned long long)enq, (unsigned long long)started,
                (unsigned long long)done, kind, (long long)since, last_kind, (long long)last_ms,
                site, last_site, desc, peer, (unsigned long long)colls_enq,
                (unsigned long long)colls_done, (unsigned long long)coll,
                (unsigned long long)atomic_load_explicit(&g->last_seq, memory_order_relaxed), tag,
                (unsigned long long)num, (unsigned long long)last_num, sync, peer2,
                (unsigned long long)pair);
}

int dist__mon_publish(dist_store *s, const char *state, const char *note) {
  mon_state *m = &dist__mon;
  char *buf = dist__malloc(REC_MAX);
  if (!buf)
    return DIST_E_NOMEM;
  size_t off = 0;
  dist__appendf(buf, REC_MAX, &off, "v1\t%d\t%d\t%s\t%lld\t%s\t%s\n", m->rank, (int)m->pid,
                m->host, (long long)dist__mon_wall_ms(dist__now_ns()), state,
                note && *note ? note : "-");
  for (int i = 0; i < MON_MAX_GROUPS; i++)
    if (atomic_load_explicit(&m->groups[i].live, memory_order_acquire))
      put_group(buf, REC_MAX, &off, &m->groups[i]);
  char key[200];
  dist__mon_key(key, sizeof key, "p", m->rank);
  int rc = dist_store_set(s, key, buf, off);
  dist__free(buf);
  atomic_fetch_add_explicit(&m->writes, 1, memory_order_relaxed);
  return rc;
}

/* --- reading -------------------------------------------------------------- */

/* Same host: what /proc says of the process ('X' gone, 'Z' zombie, 'T'
 * stopped, 'R'/'S'/'D' alive); 0 when unknown. */
static char proc_state(const mon_rec *r) {
  if (strcmp(r->host, dist__mon.host) != 0 || r->pid <= 0)
    return 0;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)r->pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 'X';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  return p && p[1] == ' ' ? p[2] : 0;
}

/* key into out when it exists (never waits). */
static void read_if_there(dist_store *s, const char *key, char *out, size_t len) {
  const char *keys[] = {key};
  bool there = false;
  if (dist_store_check(s, keys, 1, &there) != DIST_OK || !there)
    return;
  void *v = NULL;
  size_t n = 0;
  if (dist_store_get(s, key, &v, &n) == DIST_OK)
    snprintf(out, len, "%s", (char *)v);
  dist_free(v);
}

/* distrun's line for a rank that ended (distrun/exit/<R>) and the
 * backtrace of its crash (distrun/crash/<R>). */
static void read_exit(dist_store *s, mon_rec *r, int rank) {
  char key[64];
  snprintf(key, sizeof key, DIST_KEY_EXIT_FMT, rank);
  read_if_there(s, key, r->died, sizeof r->died);
  snprintf(key, sizeof key, DIST_KEY_CRASH_FMT, rank);
  if (r->died[0])
    read_if_there(s, key, r->crash, sizeof r->crash);
}

int dist__mon_read_all(dist_store *s, mon_rec *recs) {
  int world = dist__mon.world;
  for (int r = 0; r < world; r++) {
    mon_rec *rec = &recs[r];
    memset(rec, 0, sizeof *rec);
    rec->rank = r;
    char key[200];
    dist__mon_key(key, sizeof key, "p", r);
    const char *keys[] = {key};
    bool there = false;
    int rc = dist_store_check(s, keys, 1, &there);
    if (rc != DIST_OK)
      return rc;
    void *v = NULL;
    size_t n = 0;
    if (there && dist_store_get(s, key, &v, &n) == DIST_OK && v)
      dist__mon_rec_parse((char *)v, rec);
    dist_free(v);
    if (dist__mon.stacks) {
      dist__mon_key(key, sizeof key, "s", r);
      read_if_there(s, key, rec->stack, sizeof rec->stack);
    }
    if (r == dist__mon.rank)
      continue;
    if (rec->present)
      rec->proc_state = proc_state(rec);
    int64_t age = dist__mon_wall_ms(dist__now_ns()) - rec->hb_ms;
    if (!rec->present || age > MON_HB_STALE_MS || strcmp(rec->state, "run") != 0 ||
        rec->proc_state == 'X' || rec->proc_state == 'Z')
      read_exit(s, rec, r);
  }
  return DIST_OK;
}

void dist__mon_recs_free(mon_rec *recs, int n) {
  for (int i = 0; i < n; i++)
    dist__mon_rec_free(&recs[i]);
}

const mon_rec_group *dist__mon_rec_group(const mon_rec *r, int gid) {
  if (!r->present)
    return NULL;
  for (int i = 0; i < r->n; i++)
    if (r->g[i].gid == gid)
      return &r->g[i];
  return NULL;
}
