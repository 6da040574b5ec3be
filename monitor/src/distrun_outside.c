/* distrun_outside.c - a hang whose culprit is outside the library: where
 * it is, not only where its peers wait for it.
 *
 * The monitor's diagnosis names the rank where the waits end and the
 * collective its peers wait for it in; of a rank that runs its own code
 * (an endless loop, a read() on a pipe nobody writes) it can only say
 * "busy outside the library", since the rank never called what it waits
 * for. distrun, the ranks' parent, can look: before it ends a hung job's
 * ranks, it captures the stacks of the culprits whose last records show
 * them outside the library (a few at most, through ptrace, as
 * DIST_SHOW_STACKTRACES does for every rank: distrun_stacks.c), and keeps
 * the innermost frame in the program of each. The verdict then names that
 * line as the culprit's site, with the field "own code", and keeps the
 * operation its peers wait in. A culprit blocked in a store call of the
 * program's is named by its monitor already (the field "store wait", the
 * store call's line as the site, mon_diag.c); the summary line says that
 * too. Where the waits end at both kinds, the rank in its own code leads
 * and the store's waiter leaves the culprits: it waits (for a key, quite
 * likely the one the other never set), the other waits for nothing. Of a
 * rank whose main thread sleeps (a pthread_join) while a thread of the
 * program's runs, the running thread's frame is named. distview shows what
 * the verdict row holds (viewer/src/diag_verdict.c). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "distrun.h"

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether process pid is stopped (SIGSTOP, a debugger): not in its own
 * code, and its peers' report says so already. */
static bool stopped(pid_t pid) {
  char st = dist__run_thread_state(pid, (int)pid);
  return st == 'T' || st == 't';
}

void dist__run_outside_capture(const drun_cfg *c, drun_job *job, const drun_rank *ranks,
                               int n, const drun_posted *posted, drun_outsiders *out) {
  if (out->done || !posted->have)
    return;
  out->done = true;
  for (int i = 0; i < posted->f.n_culprits && out->n < DRUN_OUTSIDE_MAX; i++) {
    int rank = posted->f.culprits[i];
    int local = rank - c->node_rank * c->nproc;
    int64_t since = 0;
    if (local < 0 || local >= n || !ranks[local].running || stopped(ranks[local].pid) ||
        !dist__run_rank_outside(c, job, rank, &since))
      continue;
    drun_outside *o = &out->o[out->n];
    char why[256];
    if (!dist__run_program_frame(ranks[local].pid, o->at, sizeof o->at, why, sizeof why)) {
      dist__run_say("rank %d is outside the library; where could not be told: %s", rank, why);
      continue;
    }
    o->rank = rank;
    o->for_ms = wall_ms() - since;
    out->n++;
  }
}

static const drun_outside *captured(const drun_outsiders *o, int rank) {
  for (int i = 0; i < o->n; i++)
    if (o->o[i].rank == rank)
      return &o->o[i];
  return NULL;
}

/* "blocked in the store's get of key 'k' ... called from SITE", as the
 * report's line for rank says it (mon_diag_ends.c), into out. */
static bool store_words(const drun_verdict *v, int rank, char *out, size_t len) {
  char who[96];
  snprintf(who, sizeof who, "the waits end at rank %d, which is in no operation: it is ", rank);
  const char *l = v->report ? strstr(v->report, who) : NULL;
  const char *end = l ? strchr(l, '\n') : NULL;
  const char *site = l ? strstr(l, v->f.site) : NULL;
  if (!site || (end && site > end))
    return false;
  l += strlen(who);
  snprintf(out, len, "%.*s", (int)(site + strlen(v->f.site) - l), l);
  return true;
}

/* Drops rank from a list of n culprits; the new count. */
static int drop_rank(int *list, int n, int rank) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (list[i] != rank)
      list[k++] = list[i];
  return k;
}

/* The list of n culprits without gone, rank first; the new count. */
static int lead_with(int *list, int n, int gone, int rank) {
  n = drop_rank(list, drop_rank(list, n, gone), rank);
  memmove(list + 1, list, sizeof *list * (size_t)n);
  list[0] = rank;
  return n + 1;
}

/* A culprit blocked in a store call waits for a key some rank sets; one
 * in its own code waits for nothing. When both are named, the one in its
 * own code is the cause (it may well be the rank that never set the
 * key), and the store's waiter leaves the culprits for a clause of its
 * own (into waiter) that says where it waits. */
static const drun_outside *own_code_first(const drun_outsiders *o, drun_verdict *v,
                                          char *waiter, size_t len) {
  int w = v->culprits[0];
  const drun_outside *x = NULL;
  for (int i = 1; i < v->n_culprits && !x; i++)
    x = captured(o, v->culprits[i]);
  char words[400];
  if (!x || !store_words(v, w, words, sizeof words))
    return NULL;
  snprintf(waiter, len, "; rank %d, which its peers wait for too, is %s: a wait, where rank %d "
           "waits for nothing", w, words, x->rank);
  v->n_culprits = lead_with(v->culprits, v->n_culprits, w, x->rank);
  v->f.n_culprits = lead_with(v->f.culprits, v->f.n_culprits, w, x->rank);
  return x;
}

void dist__run_verdict_outside(const drun_outsiders *o, drun_verdict *v) {
  if (strcmp(v->kind, "hang") != 0 || v->n_culprits < 1)
    return;
  const drun_outside *me = captured(o, v->culprits[0]);
  bool store = !strcmp(v->f.field, "store wait");
  if (!me && !store)
    return;
  char waiter[600] = "";
  if (!me && (me = own_code_first(o, v, waiter, sizeof waiter)))
    store = false;
  char awaited[400] = "", words[400];
  if (v->f.group_id >= 0 && v->f.op[0])
    snprintf(awaited, sizeof awaited, "; its peers wait for it in group %d (%s) %s #%llu%s%s",
             v->f.group_id, v->f.group_name, v->f.op, (unsigned long long)v->f.seq,
             me && !waiter[0] && v->f.site[0] ? ", called from " : "",
             me && !waiter[0] ? v->f.site : ""); /* a store waiter's site is its store call */
  if (me) {
    snprintf(words, sizeof words, "outside the library (in its own code) for %.1f s, at %s",
             (double)me->for_ms / 1000, me->at);
    snprintf(v->f.site, sizeof v->f.site, "%s", me->at);
    snprintf(v->f.field, sizeof v->f.field, "own code");
  } else if (!store_words(v, v->culprits[0], words, sizeof words)) {
    snprintf(words, sizeof words, "blocked in a store call, called from %s", v->f.site);
  }
  size_t off = strlen(v->line);
  dist__appendf(v->line, sizeof v->line, &off, "; the culprit: rank %d is %s%s", v->culprits[0],
                words, awaited);
  for (int i = 1; i < v->n_culprits; i++) {
    const drun_outside *x = captured(o, v->culprits[i]);
    if (x)
      dist__appendf(v->line, sizeof v->line, &off, "; rank %d is outside the library (in its "
                    "own code) for %.1f s, at %s", x->rank, (double)x->for_ms / 1000, x->at);
  }
  dist__appendf(v->line, sizeof v->line, &off, "%s", waiter);
  v->placed_outside = true;
}
