/* mon_record.c - the one parser of progress records (format in
 * mon_record.h); linked into the monitor and into distrun. */
#include "mon_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dist/internal/base.h>

/* Splits line at tabs into at most n fields; returns how many. */
static int fields(char *line, char **f, int n) {
  int k = 0;
  for (char *p = line; k < n;) {
    f[k++] = p;
    char *t = strchr(p, '\t');
    if (!t)
      break;
    *t = '\0';
    p = t + 1;
  }
  return k;
}

static void parse_group(mon_rec_group *g, char **f) {
  g->gid = atoi(f[1]);
  g->size = atoi(f[2]);
  g->enq = strtoull(f[3], NULL, 10);
  g->started = strtoull(f[4], NULL, 10);
  g->done = strtoull(f[5], NULL, 10);
  g->kind = atoi(f[6]);
  g->since_ms = strtoll(f[7], NULL, 10);
  g->last_kind = atoi(f[8]);
  g->last_ms = strtoll(f[9], NULL, 10);
  snprintf(g->site, sizeof g->site, "%s", f[10]);
  snprintf(g->last_site, sizeof g->last_site, "%s", f[11]);
  snprintf(g->desc, sizeof g->desc, "%s", f[12]);
}

/* The optional fields after the description. */
static void parse_group_tail(mon_rec_group *g, char **f, int k) {
  g->peer = k > 13 ? atoi(f[13]) : MON_PEER_NONE;
  g->has_colls = k > 16;
  g->colls_enq = g->has_colls ? strtoull(f[14], NULL, 10) : 0;
  g->colls_done = g->has_colls ? strtoull(f[15], NULL, 10) : 0;
  g->coll = g->has_colls ? strtoull(f[16], NULL, 10) : 0;
  g->last_seq = k > 18 ? strtoull(f[17], NULL, 10) : g->done;
  g->tag = k > 18 ? atoi(f[18]) : 0;
  g->has_num = k > 20;
  g->num = g->has_num ? strtoull(f[19], NULL, 10) : 0;
  g->last_num = g->has_num ? strtoull(f[20], NULL, 10) : 0;
  g->sync = k > 21 && atoi(f[21]) == 1;
  g->peer2 = k > 22 ? atoi(f[22]) : MON_PEER_NONE;
  g->pair = k > 23 ? strtoull(f[23], NULL, 10) : 0;
  g->last_ns = k > 24 ? strtoll(f[24], NULL, 10) : 0;
  g->creations = k > 25 ? strtoll(f[25], NULL, 10) : -1;
  g->peer_before = k > 26 ? atoi(f[26]) : -1;
}

/* "s3:2t0,r4:2t5+" into p's parts (the tag optional), "o3" into its root;
 * false when malformed. */
static bool parse_parts(const char *s, mon_rec_p2p *p) {
  p->root = -1;
  if (strcmp(s, "-") == 0)
    return true;
  if (*s == 'o') { /* a collective's root */
    char *end;
    long root = strtol(s + 1, &end, 10);
    p->root = end != s + 1 && !*end && root >= 0 ? (int)root : -1;
    return p->root >= 0;
  }
  while (*s && *s != '+') {
    char dir = *s++;
    char *end;
    long peer = strtol(s, &end, 10);
    if ((dir != 's' && dir != 'r') || end == s || *end != ':' || peer < 0)
      return false;
    unsigned long n = strtoul(end + 1, &end, 10);
    mon_rec_part part = {(int)peer, dir == 's', (uint32_t)n, false, 0};
    if (*end == 't') {
      const char *t = end + 1;
      long tag = strtol(t, &end, 10);
      if (end == t)
        return false;
      part.tagged = true;
      part.tag = (int)tag;
    }
    if (p->n_parts < MON_PARTS_MAX)
      p->parts[p->n_parts++] = part;
    else
      p->parts_cut = true;
    s = *end == ',' ? end + 1 : end;
  }
  p->parts_cut |= *s == '+';
  return true;
}

/* "3:2:1,4:2:2+" into p's counts ("?" unknown, "-" none). */
static bool parse_counts(const char *s, mon_rec_p2p *p) {
  p->counts_known = strcmp(s, "?") != 0;
  if (!p->counts_known || strcmp(s, "-") == 0)
    return true;
  while (*s && *s != '+') {
    char *end;
    long peer = strtol(s, &end, 10);
    if (end == s || *end != ':' || peer < 0)
      return false;
    unsigned long sent = strtoul(end + 1, &end, 10);
    if (*end != ':')
      return false;
    unsigned long received = strtoul(end + 1, &end, 10);
    if (p->n_counts < MON_COUNTS_MAX)
      p->counts[p->n_counts++] = (mon_rec_count){(int)peer, (uint32_t)sent, (uint32_t)received};
    else
      p->counts_cut = true;
    s = *end == ',' ? end + 1 : end;
  }
  p->counts_cut |= *s == '+';
  return true;
}

/* The parts and counts fields, when the line has them and either says
 * something (NULL otherwise; and when malformed or out of memory, which
 * the caller's p2p_known then turns into unknown). */
static mon_rec_p2p *parse_p2p(char **f, int k) {
  if (k <= 28 || (strcmp(f[27], "-") == 0 && strcmp(f[28], "-") == 0))
    return NULL;
  mon_rec_p2p *p = dist__calloc(1, sizeof *p);
  if (p && (!parse_parts(f[27], p) || !parse_counts(f[28], p))) {
    dist__free(p);
    p = NULL;
  }
  return p;
}

bool dist__mon_rec_parse(char *text, mon_rec *r) {
  int lines = 0;
  for (char *p = text; *p; p++)
    lines += *p == '\n';
  r->g = dist__calloc((size_t)lines + 1, sizeof *r->g);
  if (!r->g)
    return false;
  char *save = NULL, *f[31];
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    int k = fields(line, f, 31);
    if (k == 7 && strcmp(f[0], "v1") == 0) {
      r->rank = atoi(f[1]);
      r->pid = (pid_t)atoi(f[2]);
      snprintf(r->host, sizeof r->host, "%s", f[3]);
      r->hb_ms = strtoll(f[4], NULL, 10);
      snprintf(r->state, sizeof r->state, "%s", f[5]);
      snprintf(r->note, sizeof r->note, "%s", strcmp(f[6], "-") ? f[6] : "");
      r->present = true;
    } else if (k >= 5 && strcmp(f[0], "c") == 0) {
      mon_rec_create *c = &r->creating;
      c->on = true;
      c->gid = atoi(f[1]);
      c->size = atoi(f[2]);
      c->since_ms = strtoll(f[3], NULL, 10);
      snprintf(c->site, sizeof c->site, "%s", f[4]);
      c->scope = k >= 9 ? atoi(f[6]) : -1;
      c->k = k >= 9 ? strtoull(f[7], NULL, 10) : 0;
      snprintf(c->call, sizeof c->call, "%s", k >= 9 && strcmp(f[5], "-") ? f[5] : "");
      snprintf(c->members, sizeof c->members, "%s", k >= 9 && strcmp(f[8], "-") ? f[8] : "");
      c->hash = k >= 10 ? (uint32_t)strtoul(f[9], NULL, 16) : 0;
    } else if (k >= 7 && strcmp(f[0], "x") == 0 && r->n_made < MON_MADE_MAX) {
      mon_rec_made *x = &r->made[r->n_made++];
      x->scope = atoi(f[1]);
      x->k = strtoull(f[2], NULL, 10);
      x->member = atoi(f[3]) == 1;
      x->hash = (uint32_t)strtoul(f[4], NULL, 16);
      snprintf(x->site, sizeof x->site, "%s", f[5]);
      snprintf(x->members, sizeof x->members, "%s", f[6]);
    } else if (k == 7 && strcmp(f[0], "r") == 0) {
      r->refused.on = true;
      r->refused.gid = atoi(f[1]);
      r->refused.kind = atoi(f[2]);
      r->refused.num = strtoull(f[3], NULL, 10);
      r->refused.latest = atoi(f[4]) == 1;
      snprintf(r->refused.site, sizeof r->refused.site, "%s", f[5]);
      snprintf(r->refused.msg, sizeof r->refused.msg, "%s", strcmp(f[6], "-") ? f[6] : "");
    } else if (k >= 5 && strcmp(f[0], "m") == 0 && r->n_nm < MON_NM_MAX) {
      mon_rec_nonmember *m = &r->nm[r->n_nm++];
      m->gid = atoi(f[1]);
      m->num = strtoull(f[2], NULL, 10);
      m->kind = atoi(f[3]);
      snprintf(m->site, sizeof m->site, "%s", strcmp(f[4], "-") ? f[4] : "");
    } else if (k >= 4 && strcmp(f[0], "d") == 0 && r->n_destroyed < MON_DESTROYED_MAX) {
      mon_rec_destroyed *d = &r->destroyed[r->n_destroyed++];
      d->gid = atoi(f[1]);
      d->ms = strtoll(f[2], NULL, 10);
      snprintf(d->desc, sizeof d->desc, "%s", f[3]);
      d->has_counts = k >= 9;
      d->colls = k >= 9 ? strtoull(f[4], NULL, 10) : 0;
      d->last_kind = k >= 9 ? atoi(f[5]) : -1;
      d->last_num = k >= 9 ? strtoull(f[6], NULL, 10) : 0;
      snprintf(d->last_site, sizeof d->last_site, "%s", k >= 9 && strcmp(f[7], "-") ? f[7] : "");
      snprintf(d->site, sizeof d->site, "%s", k >= 9 && strcmp(f[8], "-") ? f[8] : "");
    } else if (k >= 2 && strcmp(f[0], "l") == 0) {
      r->lib_ms = strtoll(f[1], NULL, 10);
    } else if (k >= 8 && strcmp(f[0], "w") == 0) {
      mon_rec_store *w = &r->store;
      w->on = true;
      w->tid = atoi(f[1]);
      w->since_ms = strtoll(f[2], NULL, 10);
      snprintf(w->call, sizeof w->call, "%s", f[3]);
      w->n_keys = atoi(f[4]);
      w->timeout_ms = strtoll(f[5], NULL, 10);
      snprintf(w->site, sizeof w->site, "%s", f[6]);
      snprintf(w->key, sizeof w->key, "%s", f[7]);
    } else if (k >= 13 && strcmp(f[0], "g") == 0 && r->n < lines) {
      parse_group(&r->g[r->n], f);
      parse_group_tail(&r->g[r->n], f, k);
      mon_rec_group *g = &r->g[r->n++];
      g->p2p = parse_p2p(f, k);
      g->p2p_known = k > 28 && (g->p2p || (strcmp(f[27], "-") == 0 && strcmp(f[28], "-") == 0));
      g->fresh = k > 29 ? atoi(f[29]) : -1;
      g->novel = k > 30 ? atoi(f[30]) : -1;
    }
  }
  return r->present;
}

void dist__mon_rec_free(mon_rec *r) {
  for (int i = 0; r->g && i < r->n; i++)
    dist__free(r->g[i].p2p);
  dist__free(r->g);
  r->g = NULL;
  r->n = 0;
}
