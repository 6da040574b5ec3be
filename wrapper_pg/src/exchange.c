/* exchange.c - the fingerprint exchange before each collective.
 *
 * DESIGN. One all_reduce of a fixed-size digest of the record (wpg_fp;
 * digest.c) over the group's helper: an internal CPU group over the same
 * members, so the check works whatever the inner backend is and costs one
 * small collective on shared memory (one round trip over TCP), the same
 * bytes whatever the group's size. Every rank then holds the same
 * reduction and reaches the same verdict; on a disagreement the members'
 * whole records meet in the job's store. When they agree the operation
 * runs on the inner group. When they do not, a second all_gather carries each rank's own
 * description of its call (its call site resolved in its own process,
 * optionally its stack), every rank writes the same report and fails with
 * DIST_E_DESYNC; the inner group is never called, so no buffer is touched.
 * A failed exchange (a member that never arrives, a lost peer) goes to
 * absent.c, which names who is missing. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wpg_int.h"

#define SPLIT_MAX 32 /* ranks whose split sizes a report shows */

typedef struct wpg_detail {
  char text[320];
  char site[192];
  int64_t send[SPLIT_MAX]; /* all_to_all: what this rank sends to each (and a
                              reduce_scatter's input list, entry by entry) */
  int64_t recv[SPLIT_MAX]; /* and expects from each (an all_gather's output
                              list) */
  int32_t tail;            /* where text's " (N bytes)" begins, or its end */
  int32_t dtype;           /* the call's first tensor's, or -1 */
  char extra[WPG_DETAIL_LEN - 512 - 2 * 8 * SPLIT_MAX - 8];
} detail;

_Static_assert(sizeof(detail) == WPG_DETAIL_LEN, "detail record size");

static int gather(wpg *w, const void *in, void *out, size_t bytes) {
  dist_tensor ti = dist_tensor_1d((void *)in, DIST_UINT8, (int64_t)bytes);
  dist_tensor to = dist_tensor_1d(out, DIST_UINT8, (int64_t)bytes * w->size);
  dist_coll c = {
      .kind = DIST_OP_ALL_GATHER_INTO_TENSOR, .inputs = &ti, .n_inputs = 1,
      .outputs = &to, .n_outputs = 1, .root = -1,
      .timeout_ms = w->info->timeout_ms - wpg_grace_ms(w->info->timeout_ms),
  };
  return dist_pg_forward(w->helper, &c, NULL);
}

/* The digest's all_reduce (MIN) on the helper, in place. */
static int reduce_digest(wpg *w, int64_t *d) {
  dist_tensor t = dist_tensor_1d(d, DIST_INT64, WPG_DIGEST_N);
  dist_coll c = {
      .kind = DIST_OP_ALL_REDUCE, .inputs = &t, .n_inputs = 1, .outputs = &t, .n_outputs = 1,
      .root = -1, .redop = {.kind = DIST_REDOP_MIN},
      .timeout_ms = w->info->timeout_ms - wpg_grace_ms(w->info->timeout_ms),
  };
  int rc = dist_pg_forward(w->helper, &c, NULL);
  if (rc == DIST_OK)
    wpg_rx_add(sizeof(int64_t) * WPG_DIGEST_N);
  return rc;
}

int wpg_helper_ensure(wpg *w, char *why, size_t len) {
  if (w->helper)
    return DIST_OK;
  int64_t t = w->info->timeout_ms - wpg_grace_ms(w->info->timeout_ms);
  dist_group_opts o = {.timeout_ms = t, .backend = "cpu",
                       .desc = "checking layer",
                       .flags = DIST_GROUP_INTERNAL | DIST_GROUP_COLLECTIVES_ONLY};
  dist_pg *h = NULL;
  int rc = dist_new_group(w->info->global_ranks, (size_t)w->size, &o, &h);
  __atomic_store_n(&w->helper, rc == DIST_OK ? h : NULL, __ATOMIC_RELEASE); /* abort reads it */
  if (rc != DIST_OK) {
    snprintf(why, len, "making the checking layer's helper group of group %d: %s",
             w->info->group_id, dist_last_errmsg());
    return rc;
  }
  wpg_ident me = {.pid = (int32_t)getpid(), .global = w->info->global_rank};
  gethostname(me.host, sizeof me.host - 1);
  rc = gather(w, &me, w->ident, sizeof me);
  if (rc != DIST_OK)
    snprintf(why, len, "checking layer: group %d: exchanging identities failed: %s",
             w->info->group_id, dist_pg_errmsg(w->helper));
  return rc;
}

/* --- the report of a disagreement ---------------------------------------- */

static int64_t rows_at(const int64_t *splits, const dist_tensor *t, int j, int n) {
  return splits ? splits[j] : t->ndim ? t->shape[0] / n : 1;
}

/* This rank's call in the vocabulary of status.h: dist_coll_describe's
 * words, roots as global ranks ("root 1"), the bytes in parentheses
 * (starting at *tail). */
static void value(const wpg *w, const dist_coll *c, bool seqs, bool async, char *out,
                  size_t len, int32_t *tail) {
  dist_coll g = *c;
  if (g.root >= 0 && g.root < w->size)
    g.root = w->info->global_ranks[g.root];
  char raw[224];
  dist_coll_describe(&g, raw, sizeof raw);
  char *eq = strstr(raw, " root=");
  if (eq)
    eq[5] = ' ';
  const char *sp = strchr(raw, ' ');
  int head = sp ? (int)(sp - raw) : (int)strlen(raw);
  size_t off = 0;
  if (wpg_kind(c) != c->kind) { /* a piece: "BROADCAST_BYTES (run as BROADCAST int64[1] root 1)" */
    wpg_appendf(out, len, &off, "%s", dist_op_name(wpg_kind(c)));
    if (seqs)
      wpg_appendf(out, len, &off, " #%llu", (unsigned long long)c->seq);
    wpg_appendf(out, len, &off, " (run as %s)", raw);
  } else if (seqs) { /* "ALL_REDUCE #42 float32[4]": only when the numbers part */
    wpg_appendf(out, len, &off, "%.*s #%llu%s", head, raw, (unsigned long long)c->seq,
                sp ? sp : "");
  } else {
    wpg_appendf(out, len, &off, "%s", raw);
  }
  int n = w->size < SPLIT_MAX ? w->size : SPLIT_MAX;
  if (c->kind == DIST_OP_ALL_TO_ALL_SINGLE && c->n_splits) {
    for (int s = 0; s < 2; s++) {
      const int64_t *sp2 = s ? c->out_splits : c->in_splits;
      wpg_appendf(out, len, &off, " %s=[", s ? "out" : "in");
      for (int j = 0; j < n; j++)
        wpg_appendf(out, len, &off, "%s%lld", j ? "," : "",
                    (long long)rows_at(sp2, s ? &c->outputs[0] : &c->inputs[0], j, w->size));
      wpg_appendf(out, len, &off, "]");
    }
  }
  if (async) /* a sync call against an async one: the user sees which is which */
    wpg_appendf(out, len, &off, " (async)");
  *tail = (int32_t)off;
  const dist_tensor *t = c->n_inputs ? &c->inputs[0] : c->n_outputs ? &c->outputs[0] : NULL;
  if (t)
    wpg_appendf(out, len, &off, " (%zu bytes)", dist_tensor_nbytes(t));
}

/* The list whose entries must agree rank by rank, entry by entry (an
 * all_gather's outputs, a reduce_scatter's inputs: their sizes may differ
 * from entry to entry, api/uneven.c), and its name; NULL for other kinds. */
static const dist_tensor *entries(const dist_coll *c, size_t *n, const char **name) {
  *n = 0;
  if (c->kind == DIST_OP_ALL_GATHER && c->n_inputs == 1) {
    *n = c->n_outputs;
    *name = "output tensors";
    return c->outputs;
  }
  if (c->kind == DIST_OP_REDUCE_SCATTER && c->n_outputs == 1) {
    *n = c->n_inputs;
    *name = "input tensors";
    return c->inputs;
  }
  return NULL;
}

/* Entry j of a member's list (its detail d), as describe() kept it. */
static int64_t entry_of(const detail *d, int kind, int j) {
  return kind == DIST_OP_ALL_GATHER ? d->recv[j] : d->send[j];
}

/* This rank's detail of c: its call described and its call site resolved
 * here; the stack too when on the thread that made the call (a sync call;
 * an async one is checked on the group's checking thread). */
static void describe(const wpg *w, const dist_coll *c, bool seqs, bool stack, detail *d) {
  value(w, c, seqs, !stack, d->text, sizeof d->text, &d->tail);
  wpg_site_resolve(c->caller, d->site, sizeof d->site);
  const dist_tensor *t = c->n_inputs ? &c->inputs[0] : c->n_outputs ? &c->outputs[0] : NULL;
  d->dtype = t ? (int32_t)t->dtype : -1;
  int n = w->size < SPLIT_MAX ? w->size : SPLIT_MAX;
  size_t n_list;
  const char *name;
  const dist_tensor *list = entries(c, &n_list, &name);
  for (int j = 0; list && j < n && (size_t)j < n_list; j++)
    *(c->kind == DIST_OP_ALL_GATHER ? &d->recv[j] : &d->send[j]) = dist_tensor_numel(&list[j]);
  for (int j = 0; j < n; j++) {
    if (c->kind == DIST_OP_ALL_TO_ALL_SINGLE) {
      d->send[j] = rows_at(c->in_splits, &c->inputs[0], j, w->size);
      d->recv[j] = rows_at(c->out_splits, &c->outputs[0], j, w->size);
    } else if (c->kind == DIST_OP_ALL_TO_ALL && (size_t)j < c->n_inputs) {
      d->send[j] = dist_tensor_numel(&c->inputs[j]);
      d->recv[j] = dist_tensor_numel(&c->outputs[j]);
    }
  }
  if (stack && wpg_show_stacks())
    wpg_site_stack(c->caller, d->extra, sizeof d->extra);
}

/* What field_of reads: the records, and for a list collective (entries)
 * the members' details, which hold their lists entry by entry. */
typedef struct field_arg {
  const wpg_fp *all;
  const detail *d;   /* NULL: not a list collective */
  int kind, n;
  const char *list;  /* "output tensors" */
  int entry;         /* the entry the last list field named, or -1 */
  char buf[64];
} field_arg;

/* The first entry in which the lists of group ranks a and b differ in
 * size, or -1 (none among the first SPLIT_MAX). */
static int entry_differs(const field_arg *fa, int a, int b) {
  if (fa->d[a].tail < 0 || fa->d[b].tail < 0)
    return -1; /* a detail that never came */
  for (int j = 0; j < fa->n && j < SPLIT_MAX; j++)
    if (entry_of(&fa->d[a], fa->kind, j) != entry_of(&fa->d[b], fa->kind, j))
      return j;
  return -1;
}

/* The field that rows cls and major (group ranks: a class is named by its
 * first row) differ in; a list collective's element counts that differ
 * are the size of the list's first entry that does ("size of output
 * tensors[1]"). Valid until the next call. */
static const char *field_of(void *arg, int cls, int major) {
  field_arg *fa = arg;
  wpg_field f = wpg_fp_diff(&fa->all[cls], &fa->all[major]);
  int j = f == WPG_F_COUNT && fa->d ? entry_differs(fa, cls, major) : -1;
  fa->entry = j;
  if (j >= 0) {
    snprintf(fa->buf, sizeof fa->buf, "size of %s[%d]", fa->list, j);
    return fa->buf;
  }
  return f == WPG_F_NONE ? NULL : wpg_field_name(f);
}

typedef char text_buf[sizeof(((detail *)0)->text)];

/* Every row's text with list entry j spliced in before its bytes
 * ("ALL_GATHER float32[64] x4, output tensors[1] float32[32] (256 bytes)"),
 * so the lines show the sizes the field names; texts (n rows of
 * sizeof d->text) holds them. */
static void show_entry(const field_arg *fa, int j, wpg_row *rows, text_buf *texts) {
  for (int i = 0; i < fa->n; i++) {
    const detail *d = &fa->d[i];
    int tail = d->tail >= 0 && d->tail <= (int)strlen(d->text) ? d->tail : (int)strlen(d->text);
    snprintf(texts[i], sizeof texts[i], "%.*s, %s[%d] %s[%lld]%s", tail, d->text, fa->list, j,
             d->dtype >= 0 ? dist_dtype_name((dist_dtype)d->dtype) : "?",
             (long long)entry_of(d, fa->kind, j), d->text + tail);
    rows[i].text = texts[i];
  }
}

/* The field the header names (in buf, 64 bytes), NULL when the records
 * agree; when it is a list's entry, every row shows that entry (*texts,
 * which the caller frees). */
static const char *header_field(field_arg *fa, wpg_row *rows, char *buf, text_buf **texts) {
  const char *field = wpg_report_field(rows, fa->n, field_of, fa);
  if (!field)
    return NULL;
  snprintf(buf, 64, "%s", field); // fa->buf is the next field_of's
  *texts = fa->entry >= 0 ? calloc((size_t)fa->n, sizeof **texts) : NULL;
  if (*texts)
    show_entry(fa, fa->entry, rows, *texts);
  return buf;
}

/* How far i's size to j stands out: among the sizes i sends to the
 * others and the others send to j (send), or j expects from the others
 * and the others expect from i (!send), those unlike it. */
static int odd_size(const detail *d, int n, int i, int j, bool send) {
  int64_t v = send ? d[i].send[j] : d[j].recv[i];
  int unlike = 0;
  for (int k = 0; k < n; k++) {
    if (k != j)
      unlike += (send ? d[i].send[k] : d[j].recv[k]) != v;
    if (k != i)
      unlike += (send ? d[k].send[j] : d[k].recv[i]) != v;
  }
  return unlike;
}

/* How far rank i's total (send: of what it sends; else of what it
 * expects) stands out among the other ranks' totals of the same side:
 * how many differ from it. One wrong split usually changes its rank's
 * total too (an extra row), while the peer's stays as everybody's. */
static int odd_total(const detail *d, int n, int i, bool send) {
  int64_t mine = 0, t;
  for (int k = 0; k < n; k++)
    mine += send ? d[i].send[k] : d[i].recv[k];
  int unlike = 0;
  for (int r = 0; r < n; r++) {
    t = 0;
    for (int k = 0; k < n; k++)
      t += send ? d[r].send[k] : d[r].recv[k];
    unlike += r != i && t != mine;
  }
  return unlike;
}

/* The ranks every pair whose all_to_all sizes disagree involves, into
 * out; how many. Of a pair, the side whose size stands out among the
 * sizes around it (odd_size: rank 3 sends 16 to rank 1 where every other
 * size is 8) is the one; when neither stands out more, both are. A rank
 * whose send to itself differs from what it expects from itself is the
 * one of that pair whatever the sizes around. When the sizes around do
 * not tell, the side whose total stands out does (odd_total). Uneven
 * splits (rank g sends
 * g + j + 1 rows to j, legal) make every size stand out, so when no rank
 * stands out in every pair, the rank that is in every pair is named: one
 * wrong split vector disagrees with several peers, each of them with it
 * alone. */
static int split_culprits(const wpg *w, const detail *d, int *out) {
  int n = w->size < SPLIT_MAX ? w->size : SPLIT_MAX, k = 0, pairs = 0;
  int hits[SPLIT_MAX] = {0}, in_pair[SPLIT_MAX] = {0};
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (d[i].send[j] != d[j].recv[i]) {
        int si = odd_size(d, n, i, j, true), rj = odd_size(d, n, i, j, false);
        if (si == rj) { /* the sizes around do not tell: the two totals may */
          si = odd_total(d, n, i, true);
          rj = odd_total(d, n, j, false);
        }
        pairs++;
        hits[i] += si >= rj || j == i;
        hits[j] += j != i && rj >= si;
        in_pair[i]++;
        in_pair[j] += j != i;
      }
  for (int r = 0; pairs && r < n; r++)
    if (hits[r] == pairs)
      out[k++] = w->info->global_ranks[r];
  bool none = k == 0;
  for (int r = 0; none && pairs > 1 && r < n; r++)
    if (in_pair[r] == pairs)
      out[k++] = w->info->global_ranks[r];
  return k;
}

/* Pairs whose all_to_all sizes disagree, one line each. */
static void split_lines(const wpg *w, const wpg_fp *all, const detail *d, char *buf, size_t len,
                        size_t *off) {
  const int *g = w->info->global_ranks;
  bool rows = all[0].kind == DIST_OP_ALL_TO_ALL_SINGLE;
  int n = w->size < SPLIT_MAX ? w->size : SPLIT_MAX;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (d[i].send[j] != d[j].recv[i])
        wpg_appendf(buf, len, off, "  rank %d sends %lld %s to rank %d, which expects %lld"
                    "  <- split size differs\n", g[i], (long long)d[i].send[j],
                    rows ? "rows" : "elements", g[j], (long long)d[j].recv[i]);
}

/* The key of member grank's detail for the exchange whose records are all:
 * every member computes the same one from the same records (counts may
 * differ between members, so no member's own count names it). */
static void detail_key(const wpg *w, const wpg_fp *all, int grank, char *buf, size_t len) {
  uint64_t h = 0;
  for (int i = 0; i < w->size; i++)
    h = wpg_roll(h, wpg_fp_hash(&all[i]));
  snprintf(buf, len, "wpg/%s/detail/%d/%016llx/%d", w->info->name, wpg_generation(),
           (unsigned long long)h, grank);
}

/* Every member's detail of a disagreement, through the job's store: every
 * member holds the same records and so reaches this point, publishes its
 * own detail and reads the others' (waiting at most the grace the exchange
 * left over). Not over the helper: an asynchronous check runs on the
 * group's checking thread while the issuing side may already have posted
 * later records there, and a synchronous rank must pair with it. A member
 * whose detail does not come is shown from its record alone. */
static int exchange_details(wpg *w, const wpg_fp *all, const detail *mine, detail *d) {
  int n = w->size;
  dist_store *st = NULL;
  char (*keys)[160] = calloc((size_t)n, sizeof *keys);
  const char **kp = calloc((size_t)n, sizeof *kp);
  int rc = keys && kp ? DIST_OK : DIST_E_NOMEM;
  if (rc == DIST_OK && (!dist_get_default_store() ||
                        dist_store_clone(dist_get_default_store(), &st) != DIST_OK))
    rc = DIST_E_STORE;
  for (int r = 0; rc == DIST_OK && r < n; r++) {
    detail_key(w, all, r, keys[r], sizeof keys[r]);
    kp[r] = keys[r];
  }
  if (rc == DIST_OK)
    rc = dist_store_set(st, kp[w->rank], mine, sizeof *mine);
  if (rc == DIST_OK) /* a timeout here is an answer: who did not come */
    dist_store_wait(st, kp, (size_t)n, wpg_grace_ms(w->info->timeout_ms));
  for (int r = 0; rc == DIST_OK && r < n; r++) {
    bool there = false;
    void *v = NULL;
    size_t len = 0;
    if (r == w->rank)
      d[r] = *mine;
    else if (dist_store_check(st, &kp[r], 1, &there) == DIST_OK && there &&
             dist_store_get(st, kp[r], &v, &len) == DIST_OK && len == sizeof *d)
      memcpy(&d[r], v, sizeof *d);
    else {
      snprintf(d[r].text, sizeof d[r].text, "%s", dist_op_name((dist_op_kind)all[r].kind));
      d[r].tail = -1; /* its detail never came: no list known */
    }
    dist_free(v);
  }
  dist_store_destroy(st);
  free(keys), free(kp);
  return rc;
}

static uint64_t site_key(const wpg_fp *fp) {
  return (uint64_t)fp->module << 48 ^ fp->caller_off;
}

static bool site_seen(const wpg *w, const wpg_fp *fp) {
  for (int i = 0; i < w->n_seen_all; i++) /* every member's, while reporting */
    if (w->seen_all[i] == site_key(fp))
      return true;
  for (int i = 0; i < w->n_sites_seen; i++)
    if (w->sites_seen[i] == site_key(fp))
      return true;
  return false;
}

/* How much member i's call looks like the side that strayed, to break a
 * tie (a pair that disagrees): 2 when its call site never agreed in this
 * group before (the branch a planted bug took) or its call differs from
 * its own last call from the same site (an argument a planted bug
 * changed); 1 when it is the site of the last agreed collective again (it
 * skipped the call that comes between, in a loop whose calls alternate:
 * weaker, as a loop of one call per step repeats its site too, and there
 * the other side's new branch is the bug); else 0. */
static int suspect(const wpg *w, const wpg_fp *all, int i) {
  if (!site_seen(w, &all[i]) || all[i].site_was == WPG_SITE_CHANGED)
    return 2;
  return w->have_prev && site_key(&all[i]) == site_key(&w->prev[i]) &&
         site_key(&all[i]) != site_key(&all[i == 0 ? 1 : 0]);
}

void wpg_sites_note(wpg *w, const wpg_fp *all) {
  for (int i = 0; i < w->size; i++) {
    int cap = (int)(sizeof w->sites_seen / sizeof w->sites_seen[0]);
    if (site_seen(w, &all[i]) || !all[i].caller_off)
      continue;
    w->sites_seen[w->n_sites_seen % cap] = site_key(&all[i]); /* the oldest gives way */
    w->n_sites_seen += w->n_sites_seen < cap;
  }
}

/* Fails every entering rank with the report, and posts the ranks it marks
 * (with the operation, group and the first culprit's call site) as what
 * the job's cause names. */
/* When culprit row ci's call is not the others' (row j's) but it called
 * the others' operation on a group it is not a member of since its last
 * call here (which did nothing, as in torch), that call is the bug: most
 * likely the wrong group passed. Says so in msg, and names that call (its
 * kind and line) in *in. */
static void wrong_group_call(const wpg_fp *all, int ci, int global, int j, char *msg,
                             dist_cause_info *in, char *site, size_t site_len) {
  const wpg_fp *f = &all[ci];
  if (!f->nm_kind || f->nm_kind - 1 != all[j].kind || f->kind == all[j].kind)
    return;
  wpg_site_resolve_off(f->nm_module, f->nm_off, site, site_len);
  size_t off = strlen(msg);
  wpg_appendf(msg, WPG_MSG_LEN, &off, "\n  rank %d called %s on a group it is not a member of "
              "just before (it did nothing, as in torch), called from %s: the wrong group "
              "passed?", global, dist_op_name((dist_op_kind)(f->nm_kind - 1)),
              site[0] ? site : "an unknown site");
  in->op = (int)(f->nm_kind - 1);
  if (site[0])
    in->site = site;
}

static int fail_with_culprits(wpg *w, char *msg, const wpg_row *rows, const wpg_fp *all,
                              const char *field, const detail *d) {
  int *culprits = calloc((size_t)w->size, sizeof *culprits);
  int k = culprits ? wpg_report_culprits(rows, w->size, culprits) : 0;
  if (culprits && !k && d) /* every record agrees but the all_to_all sizes */
    k = split_culprits(w, d, culprits);
  dist_cause_info in = dist_cause_info_none();
  in.culprits = culprits;
  in.n_culprits = (size_t)k;
  in.group_id = w->info->group_id;
  in.group_name = wpg_group_label(w->info);
  in.op = all[0].kind;
  in.seq = all[0].seq;
  in.field = field ? field : "split size";
  /* The first culprit's own call: its operation, number and line together
   * (a rank that called all_reduce where the others all_gather is named at
   * its all_reduce, not at theirs). */
  int ci = -1, other = -1;
  for (int i = 0; k && i < w->size; i++)
    if (rows[i].global == culprits[0]) {
      in.site = rows[i].site;
      in.op = all[rows[i].grank].kind;
      in.seq = all[rows[i].grank].seq;
      ci = rows[i].grank;
    }
  for (int i = 0; ci >= 0 && i < w->size && other < 0; i++)
    if (rows[i].cls != rows[ci].cls)
      other = rows[i].grank;
  char nm_site[200] = "";
  if (ci >= 0 && other >= 0)
    wrong_group_call(all, ci, rows[ci].global, other, msg, &in, nm_site, sizeof nm_site);
  int rc = wpg_fail(w, DIST_E_DESYNC, msg, w->info->global_ranks[0], &in);
  free(culprits);
  return rc;
}

int wpg_report_desync(wpg *w, const dist_coll *c, const wpg_fp *all, bool caller_thread) {
  int n = w->size;
  bool seqs = false;
  for (int i = 1; i < n; i++)
    seqs |= all[i].seq != all[0].seq;
  detail *mine = calloc(1, sizeof *mine), *d = calloc((size_t)n, sizeof *d);
  wpg_row *rows = calloc((size_t)n, sizeof *rows);
  char *msg = malloc(WPG_MSG_LEN);
  if (!mine || !d || !rows || !msg) {
    free(mine), free(rows), free(msg), free(d);
    return wpg_set_error(w, DIST_E_DESYNC, "desync in group %d (out of "
                                  "memory writing the report)", w->info->group_id);
  }
  describe(w, c, seqs, caller_thread, mine);
  int rc = exchange_details(w, all, mine, d);
  if (rc != DIST_OK) /* no store to meet in: our own view */
    for (int i = 0; i < n; i++) {
      snprintf(d[i].text, sizeof d[i].text, "%s",
               i == w->rank ? mine->text : dist_op_name((dist_op_kind)all[i].kind));
      d[i].tail = i == w->rank ? mine->tail : -1;
    }
  for (int i = 0; i < n; i++)
    if (!d[i].site[0]) /* resolved here from the record's module and offset */
      wpg_site_resolve_off(all[i].module, all[i].caller_off, d[i].site, sizeof d[i].site);
  rc = DIST_OK;
  for (int i = 0; i < n; i++) {
    int cls = i;
    for (int k = 0; k < i && cls == i; k++)
      if (wpg_fp_diff(&all[i], &all[k]) == WPG_F_NONE)
        cls = k;
    rows[i] = (wpg_row){.global = w->info->global_ranks[i], .grank = i, .cls = cls,
                        .text = d[i].text, .site = d[i].site, .extra = d[i].extra,
                        .suspect = suspect(w, all, i)};
  }
  char gname[160];
  wpg_group_name(w->info, gname, sizeof gname);
  size_t n_list;
  field_arg fa = {.all = all, .kind = c->kind, .n = n, .entry = -1};
  fa.d = entries(c, &n_list, &fa.list) ? d : NULL;
  char field_buf[64];
  text_buf *texts = NULL; /* the header names the lowest rank's view of the call */
  const char *field = header_field(&fa, rows, field_buf, &texts);
  size_t off = 0;
  wpg_appendf(msg, WPG_MSG_LEN, &off, "desync in %s at %s #%llu: ranks disagree on the %s\n",
              gname, dist_op_name((dist_op_kind)all[0].kind),
              (unsigned long long)all[0].seq, field ? field : "split size");
  wpg_report_rows(msg, WPG_MSG_LEN, &off, rows, n, field_of, &fa);
  if (rc == DIST_OK && (c->kind == DIST_OP_ALL_TO_ALL || c->kind == DIST_OP_ALL_TO_ALL_SINGLE))
    split_lines(w, all, d, msg, WPG_MSG_LEN, &off);
  if (off && msg[off - 1] == '\n')
    msg[--off] = '\0';
  bool a2a = c->kind == DIST_OP_ALL_TO_ALL || c->kind == DIST_OP_ALL_TO_ALL_SINGLE;
  rc = fail_with_culprits(w, msg, rows, all, field, a2a ? d : NULL);
  free(mine), free(rows), free(msg), free(d), free(texts);
  return rc;
}

/* --- the check ----------------------------------------------------------- */

uint64_t wpg_roll(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xbf58476d1ce4e5b9ull;
}

/* (DETAIL's one trace line per operation is core's, at issue: pg_log.c.) */
int wpg_check_coll(wpg *w, const dist_coll *c) {
  if (w->size == 1)
    return DIST_OK; /* nobody to disagree with */
  char why[512];
  int rc = wpg_helper_ensure(w, why, sizeof why);
  if (__builtin_expect(rc != DIST_OK, 0)) /* a member never came to make it */
    return wpg_absent(w, c, w->coll_count + 1, rc, why);
  wpg_fp me;
  wpg_fp_make(w, c, &me);
  wpg_site_locate(&w->sites, c->caller, &me.caller_off, &me.module);
  wpg_fp_site_history(w, &me);
  wpg_fp_non_member(w, &me);
  int64_t d[WPG_DIGEST_N];
  wpg_digest_make(&me, d);
  rc = reduce_digest(w, d);
  if (__builtin_expect(rc != DIST_OK, 0))
    return wpg_absent(w, c, w->coll_count + 1, rc, dist_pg_errmsg(w->helper));
  rc = wpg_decide(w, c, &me, d, true);
  if (__builtin_expect(rc != DIST_OK, 0))
    return rc;
  w->coll_count++;
  w->hist = wpg_roll(w->hist, wpg_fp_hash(&me));
  return DIST_OK;
}
