/* trace_sink.c - ring records become rows of one rank (reader_int.h).
 *
 * The writer thread feeds it from the live ring; the merge feeds it from a
 * ring dumped at a crash. Operations in flight are kept in a small open-
 * addressing table keyed by (group, seq) until they end, so a record that
 * changes state ends as one row; events, groups and clock samples are
 * written as they come.
 *
 * Operations go to the rank layout's narrow table ops (schema.c): the
 * enums packed into one code, times as deltas, a shape as the id of a
 * shapes row (formatted once per distinct shape), and root, tag, status
 * and message bound only when a row has them (a second statement). A
 * synchronous all_reduce binds 10 values instead of 24: SQLite's cost per
 * row is mostly per column bound and stored. */
#define _GNU_SOURCE
#include "reader_int.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dist/observer.h>

enum { ST_ENQUEUED, ST_STARTED, ST_ENDED };

typedef struct pend {
  bool used, written, dirty;
  uint8_t state;
  tr_head h;          /* the first record (op, dtype, redop, root, ...) */
  tr_shape sh;
  bool has_shape;
  int64_t t_enq, t_start, t_end;
  int32_t status;
  uint8_t end_kind;
  char *msg;
  int64_t rowid;
  uint64_t key;       /* seq, bit 63 set for point-to-point (key_of) */
} pend;

#define MAX_GROUPS_TRACKED 4096
#define SHAPE_CAP 1024 /* a power of two */

struct tr_sink {
  sqlite3 *db;
  tr_sink_opts o;
  sqlite3_stmt *ins_op, *ins_op_full, *ins_shape, *upd_op, *ins_ev, *ins_group, *upd_group,
      *ins_cs, *ins_drop, *upd_clock, *ins_clock, *upd_drops, *ins_stats;
  pend *tab;
  size_t cap, used;
  /* call sites: address -> id */
  uint64_t *cs_addr;
  size_t cs_cap, cs_n;
  /* per kind (0 collectives, 1 point to point) and group: last seq seen,
   * a gap to close (the two kinds are numbered apart) */
  uint64_t last_seq[2][MAX_GROUPS_TRACKED];
  uint64_t gap_records;
  int64_t gap_t;
  uint8_t gap_open[2][MAX_GROUPS_TRACKED];
  uint64_t rows, dropped;
  /* shapes written: key (ndim, dims) -> shapes.shape_id; cleared when full */
  struct shape_ent {
    int64_t key[TR_MAX_DIMS + 1];
    int64_t id;
  } shapes[SHAPE_CAP];
  size_t n_shapes;
  int64_t next_shape_id;
  char err[256];
};

/* The state's code (schema.c: 0 enqueued .. 4 timed_out). */
static unsigned state_code(const pend *p) {
  if (p->state == ST_ENQUEUED)
    return 0;
  if (p->state == ST_STARTED)
    return 1;
  return p->end_kind == DIST_EV_OP_COMPLETED ? 2 : p->end_kind == DIST_EV_OP_TIMED_OUT ? 4 : 3;
}

/* ops.code: op, state, async, dtype, redop, n_inputs, n_outputs. */
static int64_t op_code(const pend *p) {
  const tr_head *h = &p->h;
  uint64_t dtype = tr_dtype_name(h->dtype) ? h->dtype : 0xff;
  uint64_t redop = tr_redop_name(h->redop) ? h->redop : 0xff;
  uint64_t nin = p->has_shape ? p->sh.n_inputs : 0, nout = p->has_shape ? p->sh.n_outputs : 0;
  return (int64_t)(h->op | state_code(p) << 8 | (uint64_t)((h->flags & TR_F_ASYNC) != 0) << 12 |
                   dtype << 16 | redop << 24 | nin << 32 | nout << 48);
}

static int prep(tr_sink *s, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK)
    return 0;
  snprintf(s->err, sizeof s->err, "%s", sqlite3_errmsg(s->db));
  return -1;
}

int tr_sink_open(sqlite3 *db, const tr_sink_opts *o, tr_sink **out) {
  tr_sink *s = calloc(1, sizeof *s);
  if (!s)
    return -1;
  s->db = db;
  s->o = *o;
  s->cap = 1024;
  s->tab = calloc(s->cap, sizeof *s->tab);
  if (!s->tab ||
      prep(s, "INSERT INTO ops (group_id, seq, code, shape_id, numel_in, numel_out, t_enq,"
              " d_start, d_end, callsite_id) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
           &s->ins_op) ||
      prep(s, "INSERT INTO ops (group_id, seq, code, shape_id, numel_in, numel_out, t_enq,"
              " d_start, d_end, callsite_id, root, tag, status, message, pair) VALUES"
              " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)", &s->ins_op_full) ||
      prep(s, "INSERT INTO shapes VALUES (?1, ?2)", &s->ins_shape) ||
      prep(s, "UPDATE ops SET code=?1, d_start=?2, d_end=?3, status=?4, message=?5"
              " WHERE rowid=?6", &s->upd_op) ||
      prep(s, "INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", &s->ins_ev) ||
      prep(s, "INSERT OR IGNORE INTO groups VALUES (?,?,?,?,?,?,?,?,NULL)", &s->ins_group) ||
      prep(s, "UPDATE groups SET destroyed_ns = ?2 WHERE group_id = ?1", &s->upd_group) ||
      prep(s, "INSERT OR IGNORE INTO callsites (rank, callsite_id, address, module, build_id, offset,"
                 " function) VALUES (?,?,?,?,?,?,?)", &s->ins_cs) ||
      prep(s, "INSERT INTO drops VALUES (?,?,?,?,?,?,?)", &s->ins_drop) ||
      prep(s, "UPDATE ranks SET clock_offset_ns = ?2, clock_rtt_ns = ?3 WHERE rank = ?1",
           &s->upd_clock) ||
      prep(s, "INSERT INTO clocks VALUES (?,?,?,?)", &s->ins_clock) ||
      prep(s, "UPDATE ranks SET dropped_records = ?2 WHERE rank = ?1", &s->upd_drops) ||
      prep(s, "INSERT INTO stats VALUES (?,?,?,?,?,?,?,?,?,?)", &s->ins_stats)) {
    *out = s; /* the caller reads the error, then closes */
    return -1;
  }
  *out = s;
  return 0;
}

const char *tr_sink_error(const tr_sink *s) { return s->err; }
uint64_t tr_sink_rows(const tr_sink *s) { return s->rows; }
uint64_t tr_sink_dropped(const tr_sink *s) { return s->dropped; }

static int step(tr_sink *s, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW)
    return 0;
  snprintf(s->err, sizeof s->err, "%s", sqlite3_errmsg(s->db));
  return -1;
}

static void bind_opt_int(sqlite3_stmt *st, int i, bool have, int64_t v) {
  if (have)
    sqlite3_bind_int64(st, i, v);
  else
    sqlite3_bind_null(st, i);
}

/* --- the in-flight table ------------------------------------------------- */

/* An operation's key within its group: collectives and point-to-point
 * operations are numbered apart (SCHEMA.md), so one seq may name one of
 * each. */
static bool op_is_p2p(unsigned op) {
  return op == DIST_OP_SEND || op == DIST_OP_RECV || op == DIST_OP_SEND_BYTES ||
         op == DIST_OP_RECV_BYTES || op == DIST_OP_BATCH_P2P;
}
static uint64_t key_of(const tr_head *h) {
  return h->seq | (op_is_p2p(h->op) ? 1ull << 63 : 0);
}

static size_t slot_of(const tr_sink *s, int32_t g, uint64_t seq) {
  uint64_t h = (seq * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uint32_t)g * 0xC2B2AE3D27D4EB4Full);
  return (size_t)(h >> 17) & (s->cap - 1);
}

static pend *find(tr_sink *s, int32_t g, uint64_t seq) {
  for (size_t i = slot_of(s, g, seq);; i = (i + 1) & (s->cap - 1)) {
    pend *p = &s->tab[i];
    if (!p->used)
      return NULL;
    if (p->h.group_id == g && p->key == seq)
      return p;
  }
}

static int grow(tr_sink *s);

static pend *insert(tr_sink *s, int32_t g, uint64_t seq) {
  if ((s->used + 1) * 2 > s->cap && grow(s) != 0)
    return NULL;
  size_t i = slot_of(s, g, seq);
  while (s->tab[i].used)
    i = (i + 1) & (s->cap - 1);
  s->used++;
  pend *p = &s->tab[i];
  memset(p, 0, sizeof *p);
  p->used = true;
  p->h.group_id = g;
  p->h.seq = seq & ~(1ull << 63);
  p->key = seq;
  return p;
}

static int grow(tr_sink *s) {
  pend *old = s->tab;
  size_t n = s->cap;
  pend *tab = calloc(n * 2, sizeof *tab);
  if (!tab)
    return -1;
  s->tab = tab;
  s->cap = n * 2;
  s->used = 0;
  for (size_t i = 0; i < n; i++)
    if (old[i].used)
      *insert(s, old[i].h.group_id, old[i].key) = old[i];
  free(old);
  return 0;
}

/* Backward-shift deletion keeps probe chains whole without tombstones. */
static void erase(tr_sink *s, pend *p) {
  free(p->msg);
  size_t i = (size_t)(p - s->tab), mask = s->cap - 1;
  s->tab[i].used = false;
  s->used--;
  for (size_t j = (i + 1) & mask; s->tab[j].used; j = (j + 1) & mask) {
    size_t home = slot_of(s, s->tab[j].h.group_id, s->tab[j].key);
    bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (between)
      continue;
    s->tab[i] = s->tab[j];
    s->tab[j].used = false;
    i = j;
  }
}

/* --- rows ------------------------------------------------------------------ */

static int64_t callsite_id(tr_sink *s, uint64_t addr);

static void shape_json(const pend *p, char *buf, size_t len) {
  size_t n = 0;
  int nd = p->h.ndim < TR_MAX_DIMS ? p->h.ndim : TR_MAX_DIMS;
  n += (size_t)snprintf(buf + n, len - n, "[");
  for (int i = 0; i < nd && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "", (long long)p->sh.shape[i]);
  if (n < len)
    snprintf(buf + n, len - n, "%s]", p->h.ndim > TR_MAX_DIMS ? ",..." : "");
}

/* The shapes row of p's first tensor (written the first time it is seen);
 * -1 when it has none. */
static int64_t shape_id(tr_sink *s, const pend *p) {
  if (!p->has_shape || !tr_dtype_name(p->h.dtype))
    return -1;
  int64_t key[TR_MAX_DIMS + 1] = {p->h.ndim};
  memcpy(key + 1, p->sh.shape, sizeof p->sh.shape);
  uint64_t hash = 0;
  for (int i = 0; i <= TR_MAX_DIMS; i++)
    hash = (hash ^ (uint64_t)key[i]) * 0x100000001B3ull;
  size_t i = (size_t)(hash >> 20) & (SHAPE_CAP - 1);
  for (; s->shapes[i].id; i = (i + 1) & (SHAPE_CAP - 1))
    if (!memcmp(s->shapes[i].key, key, sizeof key))
      return s->shapes[i].id;
  if (s->n_shapes * 2 >= SHAPE_CAP) { /* many distinct shapes: start over (rows repeat) */
    memset(s->shapes, 0, sizeof s->shapes);
    s->n_shapes = 0;
    i = (size_t)(hash >> 20) & (SHAPE_CAP - 1);
  }
  char text[128];
  shape_json(p, text, sizeof text);
  int64_t id = ++s->next_shape_id;
  sqlite3_bind_int64(s->ins_shape, 1, id);
  sqlite3_bind_text(s->ins_shape, 2, text, -1, SQLITE_TRANSIENT);
  if (step(s, s->ins_shape) != 0)
    return -1;
  memcpy(s->shapes[i].key, key, sizeof key);
  s->shapes[i].id = id;
  s->n_shapes++;
  return id;
}

static int write_new(tr_sink *s, pend *p) {
  const tr_head *h = &p->h;
  bool p2p = op_is_p2p(h->op);
  bool full = h->root >= 0 || p2p || p->status != 0 || p->msg;
  sqlite3_stmt *st = full ? s->ins_op_full : s->ins_op;
  sqlite3_bind_int(st, 1, h->group_id);
  sqlite3_bind_int64(st, 2, (int64_t)h->seq);
  sqlite3_bind_int64(st, 3, op_code(p));
  int64_t sid = shape_id(s, p);
  bind_opt_int(st, 4, sid >= 0, sid);
  sqlite3_bind_int64(st, 5, p->has_shape ? p->sh.numel_in : 0);
  sqlite3_bind_int64(st, 6, p->has_shape ? p->sh.numel_out : 0);
  sqlite3_bind_int64(st, 7, p->t_enq);
  bind_opt_int(st, 8, p->state >= ST_STARTED && p->t_start, p->t_start - p->t_enq);
  bind_opt_int(st, 9, p->state == ST_ENDED, p->t_end - p->t_enq);
  int64_t cs = h->caller ? callsite_id(s, h->caller) : -1;
  bind_opt_int(st, 10, cs >= 0, cs);
  if (full) {
    bind_opt_int(st, 11, h->root >= 0, h->root);
    bind_opt_int(st, 12, p2p, h->tag);
    sqlite3_bind_int(st, 13, p->status);
    p->msg ? sqlite3_bind_text(st, 14, p->msg, -1, SQLITE_STATIC) : sqlite3_bind_null(st, 14);
    bind_opt_int(st, 15, p2p && h->aux > 0, h->aux);
  }
  if (step(s, st) != 0)
    return -1;
  p->rowid = sqlite3_last_insert_rowid(s->db);
  p->written = true;
  p->dirty = false;
  s->rows++;
  return 0;
}

static int write_update(tr_sink *s, pend *p) {
  sqlite3_stmt *st = s->upd_op;
  sqlite3_bind_int64(st, 1, op_code(p));
  bind_opt_int(st, 2, p->state >= ST_STARTED && p->t_start, p->t_start - p->t_enq);
  bind_opt_int(st, 3, p->state == ST_ENDED, p->t_end - p->t_enq);
  sqlite3_bind_int(st, 4, p->status);
  p->msg ? sqlite3_bind_text(st, 5, p->msg, -1, SQLITE_STATIC) : sqlite3_bind_null(st, 5);
  sqlite3_bind_int64(st, 6, p->rowid);
  p->dirty = false;
  return step(s, st);
}

static int64_t callsite_id(tr_sink *s, uint64_t addr) {
  for (size_t i = 0; i < s->cs_n; i++) /* few distinct call sites per program */
    if (s->cs_addr[i] == addr)
      return (int64_t)i;
  if (s->cs_n == s->cs_cap) {
    size_t n = s->cs_cap ? s->cs_cap * 2 : 16;
    uint64_t *a = realloc(s->cs_addr, n * sizeof *a);
    if (!a || n > 4096)
      return -1;
    s->cs_addr = a;
    s->cs_cap = n;
  }
  int64_t id = (int64_t)s->cs_n;
  s->cs_addr[s->cs_n++] = addr;
  sqlite3_stmt *st = s->ins_cs;
  sqlite3_bind_int(st, 1, s->o.rank);
  sqlite3_bind_int64(st, 2, id);
  sqlite3_bind_int64(st, 3, (int64_t)addr);
  Dl_info di;
  /* addr is a return address: look up the byte before it (the call). */
  if (s->o.symbolise && dladdr((void *)(uintptr_t)(addr - 1), &di)) {
    /* the main program comes back as argv[0]; name its file instead */
    char exe[1024];
    ssize_t n = strchr(di.dli_fname, '/') ? -1 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0)
      exe[n] = '\0';
    sqlite3_bind_text(st, 4, n > 0 ? exe : di.dli_fname, -1, SQLITE_TRANSIENT);
    char bid[128];
    if (tr_build_id((uintptr_t)(addr - 1), bid, sizeof bid))
      sqlite3_bind_text(st, 5, bid, -1, SQLITE_TRANSIENT);
    else
      sqlite3_bind_null(st, 5);
    sqlite3_bind_int64(st, 6, (int64_t)(addr - (uintptr_t)di.dli_fbase));
    di.dli_sname ? sqlite3_bind_text(st, 7, di.dli_sname, -1, SQLITE_TRANSIENT)
                 : sqlite3_bind_null(st, 7);
  } else {
    for (int i = 4; i <= 7; i++)
      sqlite3_bind_null(st, i);
  }
  step(s, st);
  return id;
}

/* --- records ----------------------------------------------------------------- */

static void close_gap(tr_sink *s, const tr_head *h) {
  int g = h->group_id, k = op_is_p2p(h->op);
  if (g < 0 || g >= MAX_GROUPS_TRACKED || !s->gap_open[k][g])
    return;
  s->gap_open[k][g] = 0;
  sqlite3_stmt *st = s->ins_drop;
  sqlite3_bind_int(st, 1, s->o.rank);
  sqlite3_bind_int(st, 2, g);
  uint64_t first = s->last_seq[k][g] + 1 <= h->seq ? s->last_seq[k][g] + 1 : h->seq;
  sqlite3_bind_int64(st, 3, (int64_t)first);
  sqlite3_bind_int64(st, 4, (int64_t)h->seq);
  sqlite3_bind_int64(st, 5, (int64_t)s->gap_records);
  sqlite3_bind_int64(st, 6, s->gap_t);
  sqlite3_bind_int(st, 7, k);
  step(s, st);
}

void tr_sink_gap(tr_sink *s, uint64_t records, int64_t t_ns) {
  if (!records)
    return;
  s->dropped += records;
  s->gap_records = records;
  s->gap_t = t_ns;
  memset(s->gap_open, 1, sizeof s->gap_open);
  char msg[96];
  snprintf(msg, sizeof msg, "the writer fell behind: %llu ring records lost (see drops)",
           (unsigned long long)records);
  sqlite3_stmt *st = s->ins_ev;
  sqlite3_bind_int(st, 1, s->o.rank);
  sqlite3_bind_null(st, 2);
  sqlite3_bind_null(st, 3);
  sqlite3_bind_text(st, 4, "ring_overflow", -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, t_ns);
  sqlite3_bind_int64(st, 6, (int64_t)records);
  sqlite3_bind_null(st, 7);
  sqlite3_bind_text(st, 8, msg, -1, SQLITE_TRANSIENT);
  step(s, st);
  sqlite3_bind_int(s->upd_drops, 1, s->o.rank);
  sqlite3_bind_int64(s->upd_drops, 2, (int64_t)s->dropped);
  step(s, s->upd_drops);
}

int tr_sink_lost(tr_sink *s, uint64_t records, bool note, int64_t t_ns, const char *why) {
  s->dropped += records;
  if (!note)
    return 0; /* counted; the file hears of it with the note */
  sqlite3_stmt *st = s->ins_ev;
  sqlite3_bind_int(st, 1, s->o.rank);
  sqlite3_bind_null(st, 2);
  sqlite3_bind_null(st, 3);
  sqlite3_bind_text(st, 4, "trace_write_failed", -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, t_ns);
  sqlite3_bind_int64(st, 6, (int64_t)s->dropped);
  sqlite3_bind_null(st, 7);
  sqlite3_bind_text(st, 8, why, -1, SQLITE_TRANSIENT);
  if (step(s, st) != 0)
    return -1;
  sqlite3_bind_int(s->upd_drops, 1, s->o.rank);
  sqlite3_bind_int64(s->upd_drops, 2, (int64_t)s->dropped);
  return step(s, s->upd_drops);
}

static int op_record(tr_sink *s, const tr_head *h, const tr_shape *sh, const char *text) {
  close_gap(s, h);
  int k = op_is_p2p(h->op);
  if (h->group_id >= 0 && h->group_id < MAX_GROUPS_TRACKED && h->seq > s->last_seq[k][h->group_id])
    s->last_seq[k][h->group_id] = h->seq;
  uint64_t key = key_of(h);
  pend *p = find(s, h->group_id, key);
  bool first = !p;
  if (!p && !(p = insert(s, h->group_id, key)))
    return -1;
  if (first) {
    p->h = *h;
    p->key = key;
    p->t_enq = h->t_ns; /* a lost first record: the earliest state seen */
  }
  if (sh && !p->has_shape) {
    p->sh = *sh;
    p->has_shape = true;
    p->h.ndim = h->ndim;
    p->h.dtype = h->dtype;
  }
  switch (h->kind) {
  case DIST_EV_OP_ENQUEUED:
    p->t_enq = h->t_ns;
    break;
  case DIST_EV_OP_ISSUED:
    p->t_enq = p->t_start = h->t_ns;
    if (p->state < ST_STARTED)
      p->state = ST_STARTED;
    break;
  case DIST_EV_OP_STARTED:
    p->t_start = h->t_ns;
    if (p->state < ST_STARTED)
      p->state = ST_STARTED;
    break;
  default: /* completed, failed, timed out */
    p->t_end = h->t_ns;
    p->state = ST_ENDED;
    p->end_kind = h->kind;
    p->status = h->status;
    if (text && !p->msg)
      p->msg = strdup(text);
    break;
  }
  p->dirty = true;
  if (p->state != ST_ENDED)
    return 0;
  int rc = p->written ? write_update(s, p) : write_new(s, p);
  erase(s, p);
  return rc;
}

/* Group text: name, desc, backend, members, timeout separated by \x1f. */
static int group_record(tr_sink *s, const tr_head *h, const char *text) {
  if (h->kind == DIST_EV_GROUP_DESTROYED) {
    sqlite3_bind_int(s->upd_group, 1, h->group_id);
    sqlite3_bind_int64(s->upd_group, 2, h->t_ns);
    return step(s, s->upd_group);
  }
  char buf[TR_MAX_SLOTS * TR_TEXT_PER_SLOT + 1];
  snprintf(buf, sizeof buf, "%s", text ? text : "");
  char *f[5] = {buf, "", "", "[]", "-1"};
  char *c = buf;
  for (int i = 1; i < 5 && (c = strchr(c, '\x1f')); i++) {
    *c++ = '\0';
    f[i] = c;
  }
  int64_t timeout = strtoll(f[4], NULL, 10); /* operations.timeout_ms reads it (view) */
  int size = 0;
  for (const char *m = f[3]; *m; m++)
    size += *m == ',';
  size += strcmp(f[3], "[]") != 0;
  sqlite3_stmt *st = s->ins_group;
  sqlite3_bind_int(st, 1, h->group_id);
  sqlite3_bind_text(st, 2, f[0], -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 3, f[1], -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 4, f[2], -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 5, size);
  sqlite3_bind_text(st, 6, f[3], -1, SQLITE_TRANSIENT);
  bind_opt_int(st, 7, timeout >= 0, timeout);
  sqlite3_bind_int64(st, 8, h->t_ns);
  return step(s, st);
}

static int event_record(tr_sink *s, const tr_head *h, const char *text) {
  char kbuf[32];
  sqlite3_stmt *st = s->ins_ev;
  sqlite3_bind_int(st, 1, s->o.rank);
  bind_opt_int(st, 2, h->group_id >= 0, h->group_id);
  bind_opt_int(st, 3, h->group_id >= 0, (int64_t)h->seq);
  sqlite3_bind_text(st, 4, tr_event_name(h->kind, kbuf, sizeof kbuf), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 5, h->t_ns);
  sqlite3_bind_int(st, 6, h->status);
  bind_opt_int(st, 7, (h->kind == DIST_EV_PEER_LOST || h->kind == DIST_EV_STRAGGLER) &&
                         h->root >= 0, h->root);
  text ? sqlite3_bind_text(st, 8, text, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 8);
  return step(s, st);
}

static int clock_record(tr_sink *s, const tr_head *h) {
  int64_t offset = h->aux, rtt = (int64_t)h->seq;
  char msg[96];
  snprintf(msg, sizeof msg, "offset %lld ns, round trip %lld ns", (long long)offset,
           (long long)rtt);
  tr_head e = *h;
  e.group_id = -1;
  if (event_record(s, &e, msg) != 0)
    return -1;
  sqlite3_bind_int(s->ins_clock, 1, s->o.rank);
  sqlite3_bind_int64(s->ins_clock, 2, h->t_ns);
  sqlite3_bind_int64(s->ins_clock, 3, offset);
  sqlite3_bind_int64(s->ins_clock, 4, rtt);
  if (step(s, s->ins_clock) != 0)
    return -1;
  sqlite3_bind_int(s->upd_clock, 1, s->o.rank);
  sqlite3_bind_int64(s->upd_clock, 2, offset);
  sqlite3_bind_int64(s->upd_clock, 3, rtt);
  return step(s, s->upd_clock);
}

/* One row of a statistics block (TR_KIND_STATS, its tr_stats slot is
 * passed as the shape slot by the decoder). */
static int stats_record(tr_sink *s, const tr_head *h, const tr_shape *slot) {
  const tr_stats *x = (const tr_stats *)(const void *)slot;
  sqlite3_stmt *st = s->ins_stats;
  sqlite3_bind_int(st, 1, s->o.rank);
  sqlite3_bind_int(st, 2, h->group_id);
  sqlite3_bind_int64(st, 3, h->t_ns);
  sqlite3_bind_text(st, 4, tr_op_name(h->op), -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, (int64_t)h->seq);
  sqlite3_bind_int64(st, 6, (int64_t)h->caller);
  sqlite3_bind_int64(st, 7, h->aux);
  bind_opt_int(st, 8, x != NULL, x ? x->p99_ns : 0);
  bind_opt_int(st, 9, h->root >= 0, h->root);
  bind_opt_int(st, 10, x && h->root >= 0, x ? x->lateness_ns : 0);
  return step(s, st);
}

int tr_sink_record(tr_sink *s, const tr_head *h, const tr_shape *sh, const char *text) {
  switch (h->kind) {
  case DIST_EV_OP_ENQUEUED:
  case DIST_EV_OP_STARTED:
  case DIST_EV_OP_ISSUED:
  case DIST_EV_OP_COMPLETED:
  case DIST_EV_OP_FAILED:
  case DIST_EV_OP_TIMED_OUT:
    return op_record(s, h, sh, text);
  case DIST_EV_GROUP_CREATED:
  case DIST_EV_GROUP_DESTROYED:
    if (group_record(s, h, text) != 0)
      return -1;
    return event_record(s, h, NULL);
  case TR_KIND_CLOCK:
    return clock_record(s, h);
  case TR_KIND_STATS:
    return stats_record(s, h, sh);
  default:
    return event_record(s, h, text);
  }
}

int tr_sink_flush(tr_sink *s) {
  for (size_t i = 0; i < s->cap; i++) {
    pend *p = &s->tab[i];
    if (!p->used || !p->dirty)
      continue;
    if ((p->written ? write_update(s, p) : write_new(s, p)) != 0)
      return -1;
  }
  return 0;
}

void tr_sink_close(tr_sink *s) {
  if (!s)
    return;
  sqlite3_stmt *sts[] = {s->ins_op,  s->ins_op_full, s->ins_shape, s->upd_op,
                         s->ins_ev,  s->ins_group,   s->upd_group, s->ins_cs,
                         s->ins_drop, s->upd_clock,  s->ins_clock, s->upd_drops,
                         s->ins_stats};
  for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++)
    sqlite3_finalize(sts[i]);
  for (size_t i = 0; s->tab && i < s->cap; i++)
    if (s->tab[i].used)
      free(s->tab[i].msg);
  free(s->tab);
  free(s->cs_addr);
  free(s);
}

/* --- decoding slots into records --------------------------------------------- */

uint64_t tr_decode_range(tr_sink *s, tr_slot_get_fn get, void *arg, uint64_t from,
                         uint64_t to, uint64_t *lost) {
  uint64_t fed = 0, idx = from;
  union {
    tr_head h;
    tr_shape sh;
    tr_text t;
    uint64_t w[TR_WORDS];
  } slot;
  char text[TR_MAX_SLOTS * TR_TEXT_PER_SLOT + 1];
  while (idx < to) {
    if (get(arg, idx, &slot) != 1 || slot.h.nslots == 0 || slot.h.nslots > TR_MAX_SLOTS ||
        idx + slot.h.nslots > to) {
      idx++;
      (*lost)++;
      continue;
    }
    tr_head h = slot.h;
    tr_shape sh;
    bool has_shape = false, ok = true;
    size_t tl = 0;
    for (unsigned k = 1; k < h.nslots && ok; k++) {
      ok = get(arg, idx + k, &slot) == 1;
      if (!ok)
        break;
      if (k == 1 && (h.flags & TR_F_SHAPE)) {
        sh = slot.sh;
        has_shape = true;
      } else {
        memcpy(text + tl, slot.t.text, TR_TEXT_PER_SLOT);
        tl += TR_TEXT_PER_SLOT;
      }
    }
    text[tl] = '\0';
    if (!ok) {
      (*lost) += h.nslots;
      idx += h.nslots;
      continue;
    }
    tr_sink_record(s, &h, has_shape ? &sh : NULL, tl ? text : NULL);
    fed++;
    idx += h.nslots;
  }
  return fed;
}
