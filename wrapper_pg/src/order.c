/* order.c - groups created in a different order, or with different
 * members, on different ranks are caught at the creation.
 *
 * Core offers each new user group to this hook before its members connect
 * (backend.h, ABI 2). At DETAIL every member appends its view of the group
 * (its rank, the members, the description, its call site) to one key of
 * the job's store named after the group, then reads the key until every
 * member of its own view has written, or until an entry describes another
 * group: then every rank that sees the conflict fails with a report naming
 * the ranks, both groups and where each rank called from, instead of
 * waiting out the timeout in a connect whose members never come. A rank
 * whose list for a group every rank creates leaves it out posts its view
 * too (core's dist__group_outside_fn), without waiting: it made that
 * creation all the same, and a list that leaves out a rank the members'
 * lists hold (an off-by-one that dropped the rank itself) is the desync,
 * which the members waiting for that rank then name at once. Which
 * entries conflict: for a group every rank
 * creates in the same order (named "g<id>", groups.c), any other member
 * list under its id, even from ranks outside it (a rank that created
 * {2,3} where the others created {0,1}: their ids crossed); for a group
 * only its members create (use_local_synchronization), entries of ranks
 * in its view or that name this rank. Members also compare the group's
 * timeout: one that set it shorter than its peers times out alone in
 * their first slow step, and the hang report then names the peer it was
 * waiting for. The creation costs a few store round trips; operations
 * nothing. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dist/internal/base.h>

#include "wpg_int.h"

#define MAX_VIEWS 64

typedef struct view {
  int rank;
  char members[512]; /* "0,1,3" */
  long long timeout_ms;
  char desc[128];
  char site[40];     /* "<module>:<offset>" in hex (callsite.c), "" unknown */
  int suspect; /* its group was posted under another id too (misnumbered); its
                  timeout is not the job's default */
} view;

static void members_of(const dist_pg_info *p, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < p->size; i++)
    wpg_appendf(buf, len, &off, "%s%d", i ? "," : "", p->global_ranks[i]);
}

/* Entries are "rank|members|timeout|desc|site\n"; '|' and newlines never
 * occur in the other fields and are replaced in the description. */
static int parse(const char *v, view *out, int max) {
  int n = 0;
  for (const char *p = v; p && *p && n < max;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    char line[800];
    snprintf(line, sizeof line, "%.*s", (int)len, p);
    char *a = strchr(line, '|'), *b = a ? strchr(a + 1, '|') : NULL;
    char *c = b ? strchr(b + 1, '|') : NULL, *d = c ? strchr(c + 1, '|') : NULL;
    if (a && b && c) {
      *a = *b = *c = '\0';
      if (d)
        *d = '\0';
      out[n] = (view){.rank = atoi(line), .timeout_ms = atoll(b + 1)};
      snprintf(out[n].members, sizeof out[n].members, "%s", a + 1);
      snprintf(out[n].desc, sizeof out[n].desc, "%s", c + 1);
      snprintf(out[n].site, sizeof out[n].site, "%s", d ? d + 1 : "");
      n++;
    }
    p = nl ? nl + 1 : NULL;
  }
  return n;
}

static bool in_list(const char *members, int r) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", members);
  for (char *s = NULL, *t = strtok_r(buf, ",", &s); t; t = strtok_r(NULL, ",", &s))
    if (atoi(t) == r)
      return true;
  return false;
}

/* What differs between two views; the timeout and the description only
 * between members (a rank outside the group has no say in them). */
static const char *diff(const view *a, const view *b) {
  if (strcmp(a->members, b->members))
    return "member list";
  if (!in_list(a->members, a->rank) || !in_list(b->members, b->rank))
    return NULL;
  if (a->timeout_ms != b->timeout_ms)
    return "timeout";
  return strcmp(a->desc, b->desc) ? "description" : NULL;
}

/* Whether the member lists a and b share a rank. */
static bool overlap(const char *a, const char *b) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", a);
  for (char *s = NULL, *t = strtok_r(buf, ",", &s); t; t = strtok_r(NULL, ",", &s))
    if (in_list(b, atoi(t)))
      return true;
  return false;
}

/* How many views hold the member list m. */
static int holders(const view *all, int k, const char *m) {
  int n = 0;
  for (int i = 0; i < k; i++)
    n += !strcmp(all[i].members, m);
  return n;
}

static int list_len(const char *m) {
  int n = 1;
  for (; *m; m++)
    n += *m == ',';
  return n;
}

/* The mistake torch's documentation warns of: each rank created only the
 * group it is in (new_group called by the members alone), so one id names
 * different groups on different ranks. True when the views hold two or
 * more member lists, each written by all its members and by nobody else,
 * and no two lists share a rank. A rank that skipped one group (its ids
 * shifted) also writes a list it is in, but its partners write theirs
 * under another id: that list lacks them, and only that rank is named.
 * Then no rank is more wrong than another: every one is named. */
static bool own_groups_only(const view *all, int k) {
  bool several = false;
  for (int i = 0; i < k; i++) {
    if (!in_list(all[i].members, all[i].rank) ||
        holders(all, k, all[i].members) != list_len(all[i].members))
      return false;
    for (int j = 0; j < i; j++) {
      if (!strcmp(all[i].members, all[j].members))
        continue;
      several = true;
      if (overlap(all[i].members, all[j].members))
        return false;
    }
  }
  return several;
}

typedef struct ctx {
  const view *v;
} ctx;

/* Where the view's rank called from ("x.c:20 in main()"; "?" unknown). */
static void site_of(const view *v, char *buf, size_t len) {
  unsigned module = 0;
  unsigned long long off = 0;
  if (sscanf(v->site, "%x:%llx", &module, &off) == 2)
    wpg_site_resolve_off((uint32_t)module, (uint64_t)off, buf, len);
  else
    snprintf(buf, len, "?");
}

static bool numbered_by_all(const dist_pg_info *p);

/* The id (other than p's) under which another rank posted c's member list,
 * among ids 1 to p's + 16 that exist now; 0 none. */
static int posted_elsewhere(dist_store *st, const dist_pg_info *p, const view *c) {
  view *w = calloc(MAX_VIEWS, sizeof *w);
  int found = 0;
  for (int id = 1; w && !found && id <= p->group_id + 16; id++) {
    char key[192];
    snprintf(key, sizeof key, "wpg/grp/%d/g%d", wpg_generation(), id);
    const char *keys[] = {key};
    bool present = false;
    void *val = NULL;
    size_t len = 0;
    if (id == p->group_id || dist_store_check(st, keys, 1, &present) != DIST_OK || !present ||
        dist_store_get(st, key, &val, &len) != DIST_OK)
      continue;
    int k = parse(val, w, MAX_VIEWS);
    dist_free(val);
    for (int j = 0; j < k && !found; j++)
      found = w[j].rank != c->rank && !strcmp(w[j].members, c->members) ? id : 0;
  }
  free(w);
  return found;
}

/* A culprit whose list leaves itself out where other ranks' lists hold it
 * made the call as no member (DIST_GROUP_NON_MEMBER) and went on, while
 * those ranks wait for it: the line says so (the view is one of all[k]),
 * or, when the others give that list another id, that it made its
 * creations in another order. */
static void say_outside(dist_store *st, const dist_pg_info *p, char *msg, size_t len,
                        size_t *off, const view *all, int k, const view *c) {
  if (in_list(c->members, c->rank))
    return;
  int id = numbered_by_all(p) ? posted_elsewhere(st, p, c) : 0;
  if (id) {
    wpg_appendf(msg, len, off, "  rank %d passed ranks %s as group %d, a group the other ranks "
                "create as group %d: it made its creations in another order (every rank must "
                "create its groups in one order)\n", c->rank, c->members, p->group_id, id);
    return;
  }
  int *holders = calloc((size_t)k, sizeof *holders), n = 0;
  const view *their = NULL;
  for (int i = 0; holders && i < k; i++)
    if (all[i].rank != c->rank && in_list(all[i].members, c->rank) &&
        in_list(all[i].members, all[i].rank)) {
      holders[n++] = all[i].rank;
      their = their ? their : &all[i];
    }
  char who[256];
  if (n) {
    dist__format_ranks(holders, (size_t)n, who, sizeof who);
    wpg_appendf(msg, len, off, "  rank %d passed ranks %s, a list without itself, so it is no "
                "member of the group this call creates (DIST_GROUP_NON_MEMBER) and went on; "
                "rank%s %s passed ranks %s with it and wait%s for it\n", c->rank, c->members,
                n > 1 ? "s" : "", who, their->members, n > 1 ? "" : "s");
  }
  free(holders);
}

static const char *field_of(void *arg, int cls, int major) {
  const ctx *c = arg;
  return diff(&c->v[cls], &c->v[major]);
}

static int conflict(dist_store *st, const dist_pg_info *p, const view *v, int n,
                    const view *mine) {
  wpg_row *rows = calloc((size_t)n, sizeof *rows);
  char (*text)[700] = calloc((size_t)n, sizeof *text);
  char (*where)[160] = calloc((size_t)n, sizeof *where);
  char *msg = malloc(WPG_MSG_LEN);
  if (!rows || !text || !where || !msg) {
    free(rows), free(text), free(where), free(msg);
    return dist_backend_set_error(NULL, DIST_E_DESYNC, "group %d: ranks disagree on its "
                                  "members or description", p->group_id);
  }
  /* Ascending rank, this rank's view included. */
  view *all = calloc((size_t)n, sizeof *all);
  int k = 0;
  for (int lo = -1; all && k < n;) {
    int best = -1;
    for (int i = 0; i < n; i++)
      if (v[i].rank > lo && (best < 0 || v[i].rank < v[best].rank))
        best = i;
    if (best < 0)
      break;
    all[k++] = v[best];
    lo = v[best].rank;
  }
  bool timeouts = false; /* the members' differ: each member's row says its own */
  for (int i = 0, m = -1; i < k; i++) {
    if (!in_list(all[i].members, all[i].rank))
      continue; /* outside the group: no say in its timeout */
    timeouts |= m >= 0 && all[i].timeout_ms != all[m].timeout_ms;
    m = m >= 0 ? m : i;
  }
  const dist_pg_info *def = dist_pg_get_info(NULL);
  for (int i = 0; i < k; i++) {
    int cls = i;
    for (int j = 0; j < i && cls == i; j++)
      if (!diff(&all[i], &all[j]))
        cls = j;
    size_t at = (size_t)snprintf(text[i], sizeof text[i], "group %d \"%s\" of ranks %s",
                                 p->group_id, all[i].desc, all[i].members);
    bool member = in_list(all[i].members, all[i].rank);
    if (timeouts && member && at < sizeof text[i])
      snprintf(text[i] + at, sizeof text[i] - at, ", timeout %lld ms", all[i].timeout_ms);
    /* of a pair, the side that set another timeout than the job's default */
    all[i].suspect += member && def && all[i].timeout_ms != (long long)def->timeout_ms;
    int same = 0; /* one resolution per call site (it reads the debug info) */
    while (same < i && strcmp(all[same].site, all[i].site))
      same++;
    if (same < i)
      snprintf(where[i], sizeof where[i], "%s", where[same]);
    else
      site_of(&all[i], where[i], sizeof where[i]);
    rows[i] = (wpg_row){.global = all[i].rank, .grank = all[i].rank, .cls = cls,
                        .text = text[i], .site = where[i], .suspect = all[i].suspect};
  }
  ctx c = {all};
  const char *field = wpg_report_field(rows, k, field_of, &c);
  size_t off = 0;
  wpg_appendf(msg, WPG_MSG_LEN, &off, "desync in group %d (%s, %d ranks) at creation: ranks "
              "disagree on the %s (%s)\n", p->group_id, mine->desc[0] ? mine->desc : p->name,
              p->size, field ? field : "member list",
              field && !strcmp(field, "timeout")
                  ? "each member must pass the same timeout, or none: one that waits less "
                    "times out alone at its peers' first slow step"
                  : "groups created in a different order, or with different members, on these "
                    "ranks");
  wpg_report_rows(msg, WPG_MSG_LEN, &off, rows, k, field_of, &c);
  int culprits[64];
  int n_culprits = wpg_report_culprits(rows, k < 64 ? k : 64, culprits);
  for (int i = 0; i < k; i++)
    for (int j = 0; j < n_culprits; j++)
      if (all[i].rank == culprits[j])
        say_outside(st, p, msg, WPG_MSG_LEN, &off, all, k, &all[i]);
  bool own = own_groups_only(all, k);
  if (own)
    wpg_appendf(msg, WPG_MSG_LEN, &off, "  each rank created only the group it is in: every "
                "rank must call dist_new_group for every group, members or not, in the same "
                "order (with use_local_synchronization the members alone create it)\n");
  if (off && msg[off - 1] == '\n')
    msg[--off] = '\0';
  dist_log(DIST_LOG_ERROR, DIST_SUBSYS_WPG, "%s", msg);
  dist_cause_info in = dist_cause_info_none();
  in.culprits = culprits;
  in.n_culprits = (size_t)n_culprits;
  for (int i = 0; own && i < k && i < 64; i++)
    culprits[i] = all[i].rank;
  if (own)
    in.n_culprits = (size_t)(k < 64 ? k : 64);
  for (int i = 0; i < k && in.n_culprits && !in.site; i++) /* the first culprit's call */
    if (all[i].rank == culprits[0] && strcmp(where[i], "?"))
      in.site = where[i];
  in.group_id = p->group_id;
  in.group_name = mine->desc[0] ? mine->desc : p->name;
  in.field = field ? field : "member list";
  dist_post_cause_info(DIST_E_DESYNC, &in, msg); /* the first rank that sees it wins */
  /* The group does not exist yet: the report goes to the trace on the
   * default group (its header names this one), where distview reads it. */
  dist_observer_emit_report(NULL, DIST_EV_DESYNC_REPORT, DIST_E_DESYNC, msg);
  int rc = dist_backend_set_error(NULL, DIST_E_DESYNC, "%s", msg);
  free(rows), free(text), free(where), free(msg), free(all);
  return rc;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The members of mine that never wrote their view, named. */
static int missing(const dist_pg_info *p, const view *v, int n, const view *mine) {
  char list[512];
  size_t off = 0;
  int k = 0;
  list[0] = '\0';
  for (int i = 0; i < p->size; i++) {
    bool seen = false;
    for (int j = 0; j < n && !seen; j++)
      seen = v[j].rank == p->global_ranks[i];
    if (!seen)
      wpg_appendf(list, sizeof list, &off, "%s%d", k++ ? "," : "", p->global_ranks[i]);
  }
  return dist_backend_set_error(NULL, DIST_E_TIMEOUT, "timeout in group %d (%s, %d ranks) at "
                                "creation: %s %s did not create it within %" PRId64 " ms",
                                p->group_id, mine->desc[0] ? mine->desc : p->name, p->size,
                                k > 1 ? "ranks" : "rank", list, p->timeout_ms);
}

/* Every rank numbers globally synchronised groups alike (groups.c names
 * them "g<id>"): one id, one group, whoever posted it. */
static bool numbered_by_all(const dist_pg_info *p) {
  return p->name && p->name[0] == 'g';
}

/* Every rank posts its view of a group every rank numbers alike: after a
 * conflict, wait a bounded moment for all of them, so the report (and its
 * culprit: the ranks outside the majority) rests on every rank's view, not
 * on the two that happened to arrive first. Returns how many v holds. */
static int all_views(dist_store *st, const char *key, view *v, int n, int64_t timeout_ms) {
  int world = dist_get_world_size(NULL);
  int64_t until = now_ms() + (timeout_ms / 4 < 2000 ? timeout_ms / 4 : 2000);
  int64_t nap_us = 200;
  while (n < world && n < MAX_VIEWS && now_ms() < until) {
    struct timespec ts = {0, (long)nap_us * 1000};
    nanosleep(&ts, NULL);
    nap_us = nap_us < 50000 ? nap_us * 2 : nap_us;
    void *val = NULL;
    size_t len = 0;
    if (dist_store_get(st, key, &val, &len) != DIST_OK)
      break;
    n = parse(val, v, MAX_VIEWS);
    dist_free(val);
  }
  return n;
}

/* Whether rank r wrote a view under this group's key as a member of it
 * (a rank outside every list posts one under each id it passes). */
static bool wrote(const view *v, int n, int r) {
  for (int i = 0; i < n; i++)
    if (v[i].rank == r && in_list(v[i].members, r))
      return true;
  return false;
}

/* A tie between two member lists under one id (the ranks that would have
 * made a majority are often blocked in an earlier creation the odd rank
 * never joins) is broken by the other ids' keys: when a member of a list
 * wrote nothing under this id but wrote the same group (members and
 * description) under another one, that group is the other id's, and the
 * views that give it this id come from a rank whose creations went in
 * another order: they are marked suspect, which majority() holds against
 * them. Looks at ids 1 to this one + 16 that exist now (a failure path:
 * a few store round trips). */
static void mark_misnumbered(dist_store *st, const dist_pg_info *p, view *v, int n) {
  view *w = calloc(MAX_VIEWS, sizeof *w);
  if (!w)
    return;
  for (int id = 1; id <= p->group_id + 16; id++) {
    char name[24], key[192];
    snprintf(name, sizeof name, "g%d", id);
    if (!strcmp(name, p->name))
      continue;
    snprintf(key, sizeof key, "wpg/grp/%d/%s", wpg_generation(), name);
    const char *keys[] = {key};
    bool present = false;
    void *val = NULL;
    size_t len = 0;
    if (dist_store_check(st, keys, 1, &present) != DIST_OK || !present ||
        dist_store_get(st, key, &val, &len) != DIST_OK)
      continue;
    int k = parse(val, w, MAX_VIEWS);
    dist_free(val);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < k && !v[i].suspect; j++)
        v[i].suspect = 2 * (!diff(&w[j], &v[i]) && in_list(v[i].members, w[j].rank) &&
                            !wrote(v, n, w[j].rank));
  }
  free(w);
}

/* Waits for the views; DIST_OK when every member of mine agrees. */
static int watch(dist_store *st, const char *key, const dist_pg_info *p, const view *mine) {
  view *v = calloc(MAX_VIEWS, sizeof *v);
  if (!v)
    return dist_backend_set_error(NULL, DIST_E_NOMEM, "out of memory");
  int64_t deadline = now_ms() + p->timeout_ms;
  int64_t nap_us = 200;
  for (;;) {
    void *val = NULL;
    size_t len = 0;
    int rc = dist_store_get(st, key, &val, &len);
    if (rc != DIST_OK) {
      free(v);
      return dist_backend_set_error(NULL, rc, "group %d: reading the members' views: %s",
                                    p->group_id, dist_store_errmsg(st));
    }
    int n = parse(val, v, MAX_VIEWS);
    dist_free(val);
    int agreeing = 0;
    for (int i = 0; i < n; i++) {
      bool related = numbered_by_all(p) || in_list(mine->members, v[i].rank) ||
                     in_list(v[i].members, mine->rank);
      if (related && diff(&v[i], mine)) {
        if (numbered_by_all(p)) {
          n = all_views(st, key, v, n, p->timeout_ms);
          mark_misnumbered(st, p, v, n);
        }
        rc = conflict(st, p, v, n, mine);
        free(v);
        return rc;
      }
      agreeing += in_list(mine->members, v[i].rank) && !diff(&v[i], mine);
    }
    if (agreeing >= p->size) {
      free(v);
      return DIST_OK;
    }
    if (now_ms() > deadline) {
      rc = missing(p, v, n, mine);
      free(v);
      return rc;
    }
    struct timespec ts = {0, (long)nap_us * 1000};
    nanosleep(&ts, NULL);
    nap_us = nap_us < 50000 ? nap_us * 2 : nap_us;
  }
}

/* This rank's view of p (its rank p->global_rank, which p's list may
 * leave out), and its entry under the group's key. */
static int post_view(dist_store *st, const dist_pg_info *p, view *mine, char *key,
                     size_t key_len) {
  *mine = (view){.rank = p->global_rank, .timeout_ms = (long long)p->timeout_ms};
  members_of(p, mine->members, sizeof mine->members);
  snprintf(mine->desc, sizeof mine->desc, "%s", p->desc ? p->desc : "");
  for (char *c = mine->desc; *c; c++)
    if (*c == '|' || *c == '\n')
      *c = ' ';
  void *caller = dist__pg_create_caller();
  if (caller) { /* resolved only in a report, by whichever rank writes it */
    wpg_site_cache sc = {0};
    uint64_t off;
    uint32_t module;
    wpg_site_locate(&sc, caller, &off, &module);
    snprintf(mine->site, sizeof mine->site, "%x:%llx", (unsigned)module,
             (unsigned long long)off);
  }
  char entry[800];
  snprintf(key, key_len, "wpg/grp/%d/%s", wpg_generation(), p->name);
  int n = snprintf(entry, sizeof entry, "%d|%s|%lld|%s|%s\n", mine->rank, mine->members,
                   mine->timeout_ms, mine->desc, mine->site);
  if (dist_store_append(st, key, entry, (size_t)n) != DIST_OK)
    return dist_backend_set_error(NULL, DIST_E_STORE, "group %d: cannot post this rank's view: "
                                  "%s", p->group_id, dist_store_errmsg(st));
  return DIST_OK;
}

int wpg_order_check(void *arg, const dist_pg_info *p) {
  (void)arg;
  dist_store *st = dist_get_default_store();
  if (dist_get_debug_level() < DIST_DEBUG_DETAIL || p->group_id == 0 || p->size < 2 || !st)
    return DIST_OK;
  view mine;
  char key[192];
  int rc = post_view(st, p, &mine, key, sizeof key);
  return rc == DIST_OK ? watch(st, key, p, &mine) : rc;
}

/* A rank outside its own list waits for nobody: it posts its view and
 * compares it with those already there (a member that comes later finds
 * it, and names this rank if its list is the odd one). */
int wpg_order_outside(const dist_pg_info *p) {
  dist_store *st = dist_get_default_store();
  if (dist_get_debug_level() < DIST_DEBUG_DETAIL || !numbered_by_all(p) || !st)
    return DIST_OK;
  view mine;
  char key[192];
  int rc = post_view(st, p, &mine, key, sizeof key);
  if (rc != DIST_OK)
    return rc;
  view *v = calloc(MAX_VIEWS, sizeof *v);
  void *val = NULL;
  size_t len = 0;
  if (!v || dist_store_get(st, key, &val, &len) != DIST_OK) {
    free(v);
    return DIST_OK; /* best effort: the members compare it anyway */
  }
  int n = parse(val, v, MAX_VIEWS);
  dist_free(val);
  for (int i = 0; i < n && rc == DIST_OK; i++)
    if (diff(&v[i], &mine)) {
      n = all_views(st, key, v, n, p->timeout_ms);
      mark_misnumbered(st, p, v, n);
      rc = conflict(st, p, v, n, &mine);
    }
  free(v);
  return rc;
}
