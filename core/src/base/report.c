/* report.c - the one format of failure reports (status.h, FAILURE REPORTS).
 *
 * Engines write the body of a report: a summary and, when ranks disagree,
 * one line per rank in the vocabulary of dist_coll_describe
 * (dist__report_value, dist__report_disagree). pg.c puts the header in front
 * ("desync in group 0 (default, 2 ranks) at ALL_REDUCE #3: ") and logs it
 * once (dist__report_head), so the shared-memory and TCP engines, and a
 * failure found before any engine ran, read alike. */
#include <inttypes.h>
#include <stdio.h>

#include "report.h"

const char *dist__report_what(int rc) {
  switch (rc) {
  case DIST_E_INVAL: return "invalid argument";
  case DIST_E_NOMEM: return "out of memory";
  case DIST_E_TIMEOUT: return "timeout";
  case DIST_E_DESYNC: return "desync";
  case DIST_E_PEER_LOST: return "peer lost";
  case DIST_E_CLOSED: return "closed";
  case DIST_E_ABORTED: return "aborted";
  case DIST_E_NOTSUP: return "not supported";
  case DIST_E_STORE: return "store error";
  case DIST_E_BACKEND: return "backend error";
  case DIST_E_SYS: return "system error";
  case DIST_E_INTERNAL: return "internal error";
  default: return "failure";
  }
}

bool dist__report_has_head(const char *msg) {
  /* "<what> in group " at the very start: written by a layer below or by
   * the rank the failure was relayed from. */
  static const int codes[] = {DIST_E_INVAL,   DIST_E_NOMEM,  DIST_E_TIMEOUT,  DIST_E_DESYNC,
                              DIST_E_PEER_LOST, DIST_E_CLOSED, DIST_E_ABORTED, DIST_E_NOTSUP,
                              DIST_E_STORE,   DIST_E_BACKEND, DIST_E_SYS,     DIST_E_INTERNAL};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    const char *w = dist__report_what(codes[i]);
    size_t n = strlen(w);
    if (strncmp(msg, w, n) == 0 && strncmp(msg + n, " in group ", 10) == 0)
      return true;
  }
  return false;
}

void dist__report_head(char *out, size_t len, int rc, const dist__report_group *g,
                       dist_op_kind kind, uint64_t seq, const char *body) {
  char at[64];
  if (seq)
    snprintf(at, sizeof at, "%s #%" PRIu64, dist_op_name(kind), seq);
  else
    snprintf(at, sizeof at, "%s (not started)", dist_op_name(kind));
  /* The engines' older prefix "ALL_REDUCE #3: " repeats the header. */
  size_t n = strlen(at);
  if (strncmp(body, at, n) == 0 && body[n] == ':' && body[n + 1] == ' ')
    body += n + 2;
  char tmp[DIST_ERRMSG_LEN];
  snprintf(tmp, sizeof tmp, "%s in group %d (%s, %d rank%s) at %s: %s", dist__report_what(rc),
           g->id, g->desc && g->desc[0] ? g->desc : g->name, g->size, g->size == 1 ? "" : "s",
           at, body);
  snprintf(out, len, "%s", tmp);
}

/* Which fields a kind's values show (as dist_coll_describe): engines may
 * carry a reduce op or root in every descriptor. */
static bool reduces(int k) {
  return k == DIST_OP_ALL_REDUCE || k == DIST_OP_REDUCE || k == DIST_OP_REDUCE_SCATTER ||
         k == DIST_OP_REDUCE_SCATTER_TENSOR;
}

static bool rooted(int k) {
  return k == DIST_OP_BROADCAST || k == DIST_OP_REDUCE || k == DIST_OP_GATHER ||
         k == DIST_OP_SCATTER || k == DIST_OP_BROADCAST_BYTES || k == DIST_OP_GATHER_BYTES ||
         k == DIST_OP_SCATTER_BYTES;
}

const char *dist__report_list_name(int kind) {
  return kind == DIST_OP_ALL_GATHER       ? "output tensors"
         : kind == DIST_OP_REDUCE_SCATTER ? "input tensors"
                                          : NULL;
}

const char *dist__report_list_field(int kind, int entry, char *buf, size_t len) {
  const char *l = dist__report_list_name(kind);
  if (entry >= 0)
    snprintf(buf, len, "size of %s[%d]", l ? l : "tensors", entry);
  else /* "output tensors" -> "size of an output tensor" */
    snprintf(buf, len, "size of an %.*s", l ? (int)strlen(l) - 1 : 6, l ? l : "tensor");
  return buf;
}

/* A list's line (dist__rval.list): the call, then the entry or the note
 * that the entries differ. */
static void list_value(const dist__rval *v, char *buf, size_t len, size_t *off) {
  const char *l = dist__report_list_name(v->kind);
  if (v->entry < 0 && v->dtype >= 0)
    dist__appendf(buf, len, off, " %s", dist_dtype_name((dist_dtype)v->dtype));
  if (reduces(v->kind) && v->redop == DIST_REDOP_PREMUL_SUM)
    dist__appendf(buf, len, off, " op=PREMUL_SUM(%g)", v->scalar);
  else if (reduces(v->kind) && v->redop >= 0)
    dist__appendf(buf, len, off, " op=%s", dist_redop_name((dist_redop_kind)v->redop));
  if (v->entry < 0) {
    dist__appendf(buf, len, off, ", %s of different sizes", l ? l : "tensors");
    return;
  }
  dist__appendf(buf, len, off, ", %s[%d]", l ? l : "tensors", v->entry);
  int64_t bytes;
  if (v->dtype >= 0 && v->count >= 0)
    dist__appendf(buf, len, off, " %s[%" PRId64 "]", dist_dtype_name((dist_dtype)v->dtype),
                  v->count);
  if (v->dtype >= 0 && v->count >= 0 &&
      !__builtin_mul_overflow(v->count, (int64_t)dist_dtype_size((dist_dtype)v->dtype), &bytes))
    dist__appendf(buf, len, off, " (%" PRId64 " bytes)", bytes);
}

char *dist__report_value(const dist__rval *v, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  if (v->part) { /* the user's call first: the piece is how it ran */
    dist__appendf(buf, len, &off, "%s", dist_op_name((dist_op_kind)(v->part - 1)));
    if (v->seq)
      dist__appendf(buf, len, &off, " #%" PRIu64, v->seq);
    dist__appendf(buf, len, &off, " (run as ");
  }
  dist__appendf(buf, len, &off, "%s", dist_op_name((dist_op_kind)v->kind));
  if (v->seq && !v->part)
    dist__appendf(buf, len, &off, " #%" PRIu64, v->seq);
  if (v->list) {
    list_value(v, buf, len, &off);
    return buf;
  }
  if (v->dtype >= 0 && v->count >= 0)
    dist__appendf(buf, len, &off, " %s[%" PRId64 "]", dist_dtype_name((dist_dtype)v->dtype),
                  v->count);
  else if (v->dtype >= 0)
    dist__appendf(buf, len, &off, " %s", dist_dtype_name((dist_dtype)v->dtype));
  if (reduces(v->kind) && v->redop == DIST_REDOP_PREMUL_SUM)
    dist__appendf(buf, len, &off, " op=PREMUL_SUM(%g)", v->scalar);
  else if (reduces(v->kind) && v->redop >= 0)
    dist__appendf(buf, len, &off, " op=%s", dist_redop_name((dist_redop_kind)v->redop));
  if (rooted(v->kind) && v->root >= 0)
    dist__appendf(buf, len, &off, " root %d", v->root);
  if (v->dir)
    dist__appendf(buf, len, &off, " %s rank %d", v->dir, v->peer);
  if (v->part)
    dist__appendf(buf, len, &off, ")");
  int64_t bytes; /* a peer's count may be anything: it comes off the wire */
  if (v->dtype >= 0 && v->count >= 0 &&
      !__builtin_mul_overflow(v->count, (int64_t)dist_dtype_size((dist_dtype)v->dtype), &bytes))
    dist__appendf(buf, len, &off, " (%" PRId64 " bytes)", bytes);
  else if (v->dtype >= 0 && v->count >= 0)
    dist__appendf(buf, len, &off, " (more bytes than 64 bits count)");
  return buf;
}

static void label(const dist__rside *s, char *buf, size_t len) {
  if (s->group_rank >= 0 && s->group_rank != s->global_rank)
    snprintf(buf, len, "rank %d (group rank %d):", s->global_rank, s->group_rank);
  else
    snprintf(buf, len, "rank %d:", s->global_rank);
}

/* The header and a and b's lines, ascending global rank (every rank, and
 * a rank relaying another's report, writes the same text); a marked line
 * ends "<- <field> differs". */
static void disagree_lines(char *buf, size_t len, size_t *off, const char *field,
                           const dist__rside *a, bool mark_a, const dist__rside *b,
                           bool mark_b) {
  bool a_lo = a->global_rank <= b->global_rank;
  const dist__rside *side[2] = {a_lo ? a : b, a_lo ? b : a};
  bool mark[2] = {a_lo ? mark_a : mark_b, a_lo ? mark_b : mark_a};
  char lab[2][96];
  label(side[0], lab[0], sizeof lab[0]);
  label(side[1], lab[1], sizeof lab[1]);
  int w = (int)(strlen(lab[0]) > strlen(lab[1]) ? strlen(lab[0]) : strlen(lab[1]));
  dist__appendf(buf, len, off, "ranks disagree on the %s", field);
  for (int i = 0; i < 2; i++)
    dist__appendf(buf, len, off, "\n  %-*s %s%s%s%s", w, lab[i], side[i]->value,
                  mark[i] ? "  <- " : "", mark[i] ? field : "", mark[i] ? " differs" : "");
}

void dist__report_disagree_odd(char *buf, size_t len, size_t *off, const char *field,
                               const dist__rside *usual, const dist__rside *odd) {
  disagree_lines(buf, len, off, field, usual, false, odd, true);
}

void dist__report_disagree_both(char *buf, size_t len, size_t *off, const char *field,
                                const dist__rside *a, const dist__rside *b) {
  disagree_lines(buf, len, off, field, a, true, b, true);
}

void dist__report_disagree(char *buf, size_t len, size_t *off, const char *field,
                           const dist__rside *a, const dist__rside *b) {
  /* Neither side is known to be the odd one: the marker on the later line. */
  const dist__rside *lo = a->global_rank <= b->global_rank ? a : b;
  dist__report_disagree_odd(buf, len, off, field, lo, lo == a ? b : a);
}
