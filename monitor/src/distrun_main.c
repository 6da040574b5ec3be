/* distrun_main.c - distrun: launch the ranks of a job on this node and
 * supervise them until they have all ended.
 *
 * DESIGN. One thread runs one poll() loop with no deadline of its own:
 * a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP), every rank's stdout and
 * stderr pipe, and, with several nodes, the watcher's pipe (events from
 * the other nodes, distrun_store.c). The only timeouts are the ones a state
 * asks for: SIGKILL after the grace period, the last output after every
 * rank has exited, node 0 waiting for the other nodes after a failure.
 *
 * The first failure decides the exit status and is the one reported:
 * a rank that exits non-zero or dies of a signal distrun did not send
 * (12), a rank that cannot start (13), an event from another node, or a
 * signal to distrun itself (forwarded to the ranks; 1). The failure is
 * posted in the store ("rank R died: cause", dist/internal/launch.h) before the other
 * ranks get SIGTERM, and SIGKILL a grace period later. A failing rank's
 * exit is classified only after a bounded wait for the cause a rank may
 * have posted (distrun_cause.c): a desync makes it 10, a hang or timeout
 * 11, and that report is the last thing distrun prints. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distrun.h"

#define DRAIN_MS 2000        /* output still arriving after the last exit */
#define NODES_WAIT_MS 10000  /* node 0, after a failure, beyond the grace */
#define CAUSE_WINDOW_MS 100  /* a rank killed by a signal may exit after those it took down */
#define POSTED_WAIT_MS 1000  /* a failing rank's posted cause (distrun_cause.c) */
#define LEFT_FAIL_WAIT_MS 1000 /* ranks a report says exited, to be seen ending */
#define LEAVER_WAIT_MS 5000  /* a rank that called exit() first, to finish exiting */
/* The others of a rank that called on alone, to finish exiting: rank 0
 * waits up to 3 s at the end for the straggler statistics of the one
 * that calls on (monitor/src/mon_stats.c, END_WAIT_MS). */
#define ODD_WAIT_MS 6000

typedef struct sup {
  const drun_cfg *c;
  drun_job *job;
  drun_rank *ranks;
  int n, running, open_streams;
  int64_t kill_at, drain_until, nodes_until; /* -1: no such deadline */
  int64_t term_at;  /* SIGTERM after the survivors' report window; -1 */
  int interrupts;
  int status;     /* -1 until the first failure */
  char cause[768];
  bool ending;
  int nodes_done;
  int sigfd;
  struct pollfd *pfd;
  char events[4096];  /* watcher events read so far: an unfinished line */
  size_t events_len;
  drun_first first;   /* the rank whose failure decided the status */
  int early_rank;     /* the first rank that exited 0 while others ran, -1 */
  pid_t early_pid;
  char early_how[128]; /* "with exit code 0" */
  bool early_pending; /* it left an async operation pending that a failing
                         rank was at (prefer_pending_leaver) */
  int clean_exits;    /* ranks that exited 0 */
  bool failing;       /* a failing rank's exit is being handled */
  drun_posted *posted; /* the cause a rank posted, once read (main's) */
  drun_alive alive;   /* the nodes' keep-alive (distrun_alive.c) */
  drun_outsiders outside; /* a hang's culprits in their own code, captured
                             before the ranks are ended (distrun_outside.c) */
} sup;

static const char *status_words(int st) {
  switch (st) {
  case DRUN_EXIT_RANK_DIED: return "a rank died";
  case DRUN_EXIT_LAUNCH: return "launch failure";
  case DRUN_EXIT_DESYNC: return "desync";
  case DRUN_EXIT_HANG: return "hang";
  default: return "other failure";
  }
}

/* Records the first failure; later ones only get a line of their own. */
static bool set_cause(sup *sp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool set_cause(sup *sp, int status, const char *fmt, ...) {
  if (sp->status >= 0)
    return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sp->cause, sizeof sp->cause, fmt, ap);
  va_end(ap);
  sp->status = status;
  return true;
}

static int live_ranks(const sup *sp) {
  int k = 0;
  for (int i = 0; i < sp->n; i++)
    k += sp->ranks[i].running;
  return k;
}

/* Sends sig to every running rank and arms the SIGKILL deadline. */
static void end_ranks(sup *sp, int sig) {
  if (sp->ending)
    return;
  sp->ending = true;
  if (sp->status == DRUN_EXIT_HANG) /* before the signals: they are still there */
    dist__run_outside_capture(sp->c, sp->job, sp->ranks, sp->n, sp->posted, &sp->outside);
  if (sp->status > 0)
    dist__run_dump_stacks(sp->ranks, sp->n);
  int k = live_ranks(sp);
  if (k)
    dist__run_say("ending %d running rank%s on this node (SIG%s, SIGKILL after %.1f s)",
                  k, k == 1 ? "" : "s", sigabbrev_np(sig), (double)sp->c->grace_ms / 1000);
  for (int i = 0; i < sp->n; i++)
    dist__run_signal(&sp->ranks[i], sig);
  sp->kill_at = dist__now_ms() + sp->c->grace_ms;
}

static void kill_all(sup *sp) {
  for (int i = 0; i < sp->n; i++)
    dist__run_signal(&sp->ranks[i], SIGKILL);
  sp->kill_at = -1;
}

static void on_rank_exit(sup *sp, drun_rank *r, int wstatus);

/* A rank that exits with an error may be reacting to a peer killed a
 * moment earlier (a lost-peer status): the killed process closes its
 * sockets before its exit is reported, and tearing down a large address
 * space can take longer than the survivor's whole exit. So before such an
 * exit becomes the first failure, give a rank that dies of a signal
 * CAUSE_WINDOW_MS to show up, and report it first. */
static void prefer_signal_death(sup *sp, const drun_rank *self) {
  int64_t until = dist__now_ms() + CAUSE_WINDOW_MS;
  do {
    for (int i = 0; i < sp->n; i++) {
      drun_rank *o = &sp->ranks[i];
      siginfo_t si = {0};
      if (o == self || !o->running || o->signalled_by_us ||
          waitid(P_PID, (id_t)o->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          si.si_pid != o->pid)
        continue;
      bool left = si.si_code == CLD_EXITED && si.si_status == 0 && sp->early_rank < 0;
      if (si.si_code != CLD_KILLED && si.si_code != CLD_DUMPED && !left)
        continue; /* an exit code: reported in turn by reap() */
      if (!left && dist__run_rank_exiting(sp->c, sp->job, o->global))
        continue; /* a signal inside exit(): it was leaving, not a cause */
      int st;
      if (waitpid(o->pid, &st, 0) == o->pid)
        on_rank_exit(sp, o, st);
      return;
    }
    dist__sleep_ms(2);
  } while (dist__now_ms() < until);
}

/* The rank the job's first-exit key names (dist/internal/launch.h), or -1. */
static int first_exit_rank(sup *sp) {
  const char *key = DIST_KEY_FIRST_EXIT;
  bool there = false;
  void *v = NULL;
  size_t n = 0;
  if (!sp->job->store || dist_store_check(sp->job->store, &key, 1, &there) != DIST_OK ||
      !there || dist_store_get(sp->job->store, key, &v, &n) != DIST_OK)
    return -1;
  char buf[16] = {0};
  memcpy(buf, v, n < sizeof buf - 1 ? n : sizeof buf - 1);
  dist_free(v);
  return atoi(buf);
}

/* The local rank the first-exit key names, if it is another rank still
 * running here; NULL otherwise. */
static drun_rank *first_leaver(sup *sp, const drun_rank *self, int leaver) {
  int local = leaver - sp->c->node_rank * sp->c->nproc;
  if (leaver < 0 || local < 0 || local >= sp->n)
    return NULL;
  drun_rank *o = &sp->ranks[local];
  return o != self && o->running && !o->signalled_by_us ? o : NULL;
}

static void remote_first(sup *sp, const char *msg);

/* The rank that left first is another node's: that node posts its end
 * (distrun/died) once it has reaped it, usually after this node's rank
 * has already reacted. Wait for it (bounded), so that end is the first
 * failure here too, as on one node. */
static void prefer_remote_leaver(sup *sp, int leaver) {
  int local = leaver - sp->c->node_rank * sp->c->nproc;
  if (leaver < 0 || (local >= 0 && local < sp->n))
    return;
  const char *key = DIST_KEY_RANK_DIED;
  void *v = NULL;
  size_t n = 0;
  if (dist_store_wait(sp->job->store, &key, 1, LEAVER_WAIT_MS) != DIST_OK ||
      dist_store_get(sp->job->store, key, &v, &n) != DIST_OK)
    return;
  char msg[600];
  snprintf(msg, sizeof msg, "%.*s", (int)(n < sizeof msg - 1 ? n : sizeof msg - 1),
           (const char *)v);
  dist_free(v);
  int rank;
  if (sscanf(msg, "rank %d died", &rank) == 1 && rank == leaver &&
      set_cause(sp, DRUN_EXIT_RANK_DIED, "%s (on another node)", msg)) {
    remote_first(sp, msg);
    dist__run_say("%s", sp->cause);
  }
}

/* A rank that fails may be reacting to one that left (called exit() with
 * its group live) a moment before: the leaver posted that before its
 * sockets closed, but its exit (atexit handlers, the trace's last flush, a
 * large address space to tear down) can be reported long after the
 * survivor's. So the leaver's exit is waited for (bounded) and reported
 * first, whatever order the kernel reports them in. */
static void prefer_first_leaver(sup *sp, const drun_rank *self) {
  int leaver = first_exit_rank(sp);
  drun_rank *o = first_leaver(sp, self, leaver);
  if (!o) {
    prefer_remote_leaver(sp, leaver);
    return;
  }
  int64_t until = dist__now_ms() + LEAVER_WAIT_MS;
  do {
    int st;
    pid_t got = waitpid(o->pid, &st, WNOHANG);
    if (got == o->pid) {
      on_rank_exit(sp, o, st);
      return;
    }
    if (got < 0)
      return;
    dist__sleep_ms(2);
  } while (dist__now_ms() < until);
  /* Still exiting: it left first all the same. */
  if (sp->early_rank < 0) {
    sp->early_rank = o->global;
    sp->early_pid = o->pid;
    snprintf(sp->early_how, sizeof sp->early_how, "leaving the job (it destroyed its groups or "
             "called exit(), and is still exiting)");
  }
}

/* Whether failing rank `self` is the odd one out: it called on (one more
 * collective, a receive nobody sends) after every other rank of the job
 * finished with exit code 0. Then the ranks that ended are not early,
 * self is late: with 8 ranks, 7 that ran the same program to its end
 * outvote the one that did not. The others may still be exiting when
 * self's failure is reaped, so they are waited for (bounded); any other
 * failure among them ends the wait with no. One node only (the others'
 * exits are not seen here), and three ranks at least (of two, neither
 * outvotes the other: the one that ended is named). */
static bool called_on_alone(sup *sp, const drun_rank *self) {
  if (sp->c->nnodes != 1 || sp->n < 3 || sp->early_rank < 0)
    return false;
  int64_t until = dist__now_ms() + ODD_WAIT_MS;
  for (;;) {
    bool waiting = false;
    for (int i = 0; i < sp->n; i++) {
      drun_rank *o = &sp->ranks[i];
      siginfo_t si = {0};
      if (o == self || !o->running)
        continue;
      if (o->signalled_by_us)
        return false;
      if (waitid(P_PID, (id_t)o->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          si.si_pid != o->pid) {
        waiting = true; /* still running */
        continue;
      }
      if (si.si_code != CLD_EXITED || si.si_status != 0)
        return false; /* another failure: reported in turn by reap() */
      int st;
      if (waitpid(o->pid, &st, 0) == o->pid)
        on_rank_exit(sp, o, st);
    }
    if (!waiting)
      return sp->clean_exits == sp->n - 1;
    if (dist__now_ms() >= until)
      return false;
    dist__sleep_ms(2);
  }
}

/* A rank that exited 0 with an async operation still pending (issued,
 * never waited) that failing rank `self` was at too: self's failure there
 * follows from that rank's leaving, which is the one that ended first,
 * not a rank that exited 0 before it having finished its part (another
 * group's member). Only this node's ranks' exits are known. */
static bool prefer_pending_leaver(sup *sp, const drun_rank *self) {
  for (int i = 0; i < sp->n; i++) {
    const drun_rank *o = &sp->ranks[i];
    drun_position p;
    if (o == self || o->running || o->signalled_by_us || !WIFEXITED(o->wstatus) ||
        WEXITSTATUS(o->wstatus) != 0 ||
        !dist__run_rank_left_pending(sp->c, sp->job, o->global, self->global, &p))
      continue;
    sp->early_rank = o->global;
    sp->early_pid = o->pid;
    sp->early_pending = true;
    snprintf(sp->early_how, sizeof sp->early_how, "with exit code 0, leaving group %d (%.40s) "
             "%s #%llu pending (never waited)", p.gid, p.desc,
             p.kind >= 0 && p.kind < DIST_OP_COUNT_ ? dist_op_name((dist_op_kind)p.kind) : "?",
             p.seq);
    return true;
  }
  return false;
}

/* Whether rank r's line in a "left the group" report says its process
 * exited with the group live (the checking layer's exit handler wrote its
 * record), not that it destroyed the group. */
static bool left_by_exit(const char *report, int r) {
  char who[32];
  snprintf(who, sizeof who, "\n  rank %d (", r);
  const char *l = report ? strstr(report, who) : NULL;
  const char *end = l ? strchr(l + 1, '\n') : NULL;
  const char *said = l ? strstr(l, "; its process exited with the group live") : NULL;
  return said && (!end || said < end);
}

/* Whether every rank a posted "left the group" report names left it as its
 * process exited, and ended (now, or within LEFT_FAIL_WAIT_MS: it is
 * exiting) with a failure of its own: an exit code other than 0, or a
 * signal distrun did not send. Their leaving follows from their failures
 * (a program's own checks failing on several ranks at once): no desync.
 * Only ranks of this node can be told. */
static bool left_by_failing(const sup *sp) {
  const dist__cause_fields *f = &sp->posted->f;
  int64_t until = dist__now_ms() + LEFT_FAIL_WAIT_MS;
  for (int i = 0; i < f->n_culprits; i++) {
    int local = f->culprits[i] - sp->c->node_rank * sp->c->nproc;
    if (local < 0 || local >= sp->n || sp->ranks[local].signalled_by_us ||
        !left_by_exit(sp->posted->text, f->culprits[i]))
      return false;
    const drun_rank *o = &sp->ranks[local];
    int failed = -1; /* 0: a clean exit, 1: a failure, -1: not ended yet */
    while (failed < 0) {
      siginfo_t si = {0};
      if (!o->running)
        failed = !(WIFEXITED(o->wstatus) && WEXITSTATUS(o->wstatus) == 0);
      else if (waitid(P_PID, (id_t)o->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
               si.si_pid == o->pid) /* ended, not reaped: looked at, left for reap() */
        failed = !(si.si_code == CLD_EXITED && si.si_status == 0);
      else if (dist__now_ms() >= until)
        return false;
      else
        dist__sleep_ms(2);
    }
    if (!failed)
      return false;
  }
  return f->n_culprits > 0;
}

/* The words of a "left the group" report (the checking layer's and the
 * TCP engine's): the members named ended their part before the call. */
#define LEFT_THE_GROUP " left the group (destroyed it or exited) before this collective"

/* The status a posted cause gives, unless it is only the consequence of a
 * rank that ended first: the checking layer's "rank R left the group"
 * (the collective counts parted because R exited), or a hang whose waits
 * end at R, names the same rank the supervisor saw leave, which outranks
 * it (ARCHITECTURE.md, One verdict), whichever of the two was heard first. */
static int posted_exit(const sup *sp, int rank, int wstatus, bool in_exit, int fallback) {
  const dist__cause_fields *f = &sp->posted->f;
  /* The rank that ended first: one that left with status 0 while others
   * ran, else the failing rank itself when it exited non-zero (or died of
   * a signal inside exit()). */
  bool early = sp->early_rank >= 0;
  int leaver = early ? sp->early_rank
               : rank >= 0 && ((WIFEXITED(wstatus) && WEXITSTATUS(wstatus)) || in_exit) ? rank
                                                                                      : -1;
  /* A hang whose waits end at a rank that left with status 0 follows from
   * its leaving; a rank that exited non-zero may have given up in the hang
   * (its own timeout), so only the desync its leaving caused yields. */
  bool left = sp->posted->have && sp->posted->status == DIST_E_DESYNC &&
              !strcmp(f->field, "collective count");
  bool consequence = left || (sp->posted->have && early && sp->posted->status == DIST_E_TIMEOUT);
  /* A rank dead of a signal distrun did not send ended on its own: its
   * sockets closed while its handlers ran (the ring's dump, its call
   * sites), so a partner failed and left, and the "left the group" report
   * about that partner can come before its death is reaped. */
  if (rank >= 0 && WIFSIGNALED(wstatus) && !in_exit && left && sp->early_rank < 0)
    return fallback;
  /* The early rank left an async operation pending that the failing rank
   * was at: what a peer reports of that operation (a lost peer, a hang,
   * the checking layer's or the engine's "left the group") follows from
   * it; a desync of the calls' fingerprints does not. */
  if (sp->early_pending && (sp->posted->status != DIST_E_DESYNC || left ||
                            (sp->posted->text && strstr(sp->posted->text, LEFT_THE_GROUP))))
    return fallback;
  if (leaver >= 0 && left && !early && left_by_failing(sp))
    return fallback;
  if (leaver >= 0 && consequence)
    for (int i = 0; i < f->n_culprits; i++)
      if (f->culprits[i] == leaver)
        return fallback;
  return dist__run_cause_exit(sp->posted, fallback);
}

/* The rank that aborted a group with dist_abort_group, when that is the
 * posted cause (pg_cause.c), else -1: the ranks that fail next (their
 * operations aborted, or their partners gone) fail because of it. */
static int aborter(const sup *sp) {
  const drun_posted *p = sp->posted;
  return p->have && p->status == DIST_E_ABORTED && p->f.n_culprits == 1 ? p->f.culprits[0] : -1;
}

/* Whether the aborter's cause is a group it destroyed with operations
 * pending (pg_cause.c), not a dist_abort_group. */
static bool destroyed(const sup *sp) {
  return !strcmp(sp->posted->f.field, "destroyed");
}

/* Whether failing rank `self`, the odd one out by the exits, did not call
 * on alone: another member took part in the operation it failed in and
 * left it pending, aborting the group (dist_abort_group) or destroying it
 * with the operation never waited (the posted cause names that rank).
 * Its failure follows from that rank's, which is the cause. */
static bool left_it_pending(const sup *sp, int self) {
  int ab = aborter(sp);
  return ab >= 0 && ab != self;
}

static void on_rank_exit(sup *sp, drun_rank *r, int wstatus) {
  char how[160];
  r->running = false;
  r->wstatus = wstatus;
  sp->running--;
  dist__run_describe_status(wstatus, how, sizeof how);
  dist__run_crash_collect(sp->job, r, wstatus);
  dist__run_store_post_exit(sp->job, r->global, how);
  bool ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
  sp->clean_exits += ok;
  /* Reaped while a failing rank's exit is handled (prefer_*), that rank
   * still ran when this one left, although its exit was reported first. */
  bool others_ran = sp->running > 0 || sp->failing;
  if (ok && others_ran && sp->status < 0 && sp->early_rank < 0) {
    sp->early_rank = r->global; /* named if the others then fail */
    sp->early_pid = r->pid;
    snprintf(sp->early_how, sizeof sp->early_how, "with exit code 0");
  }
  if (ok || r->failed_to_start || r->signalled_by_us)
    return; /* a launch failure was reported when it happened */
  bool was_failing = sp->failing, odd = false;
  sp->failing = true;
  /* A signal inside exit() (a library thread meeting what an atexit
   * handler tore down) ends a rank that was already leaving, most likely
   * because another rank failed first: ordered as an exit, not a crash. */
  bool in_exit = sp->status < 0 && WIFSIGNALED(wstatus) &&
                 dist__run_rank_exiting(sp->c, sp->job, r->global);
  if (sp->status < 0 && (!WIFSIGNALED(wstatus) || in_exit)) {
    prefer_first_leaver(sp, r);
    if (sp->status < 0) /* the leaver may have been the first failure */
      prefer_signal_death(sp, r);
    odd = sp->status < 0 && called_on_alone(sp, r);
    if (sp->status < 0 && prefer_pending_leaver(sp, r))
      odd = false; /* the leaver was in its operation: it did not call on alone */
  }
  sp->failing = was_failing;
  int post_rc = dist__run_store_post_death(sp->c, sp->job, r->global, how);
  /* A node cut off from node 0's store (node 0 dead, or a partition): its
   * ranks' failures are consequences; the lost store is the cause. */
  if (post_rc != DIST_OK && sp->c->node_rank != 0 &&
      set_cause(sp, DRUN_EXIT_OTHER, "lost node 0's store (%s:%u): %s; rank %d (pid %d, node %d) "
                "then %s", sp->job->store_addr, (unsigned)sp->job->store_port,
                dist_store_errmsg(sp->job->store), r->global, (int)r->pid, sp->c->node_rank, how)) {
    sp->first = (drun_first){.rank = -1, .lost_store = true};
    dist__run_say("%s", sp->cause);
  }
  int st = DRUN_EXIT_RANK_DIED;
  if (sp->status < 0 && dist__run_cause_fetch(sp->job, POSTED_WAIT_MS, sp->posted))
    st = posted_exit(sp, r->global, wstatus, in_exit, st);
  if (odd && left_it_pending(sp, r->global))
    odd = false;
  /* A report posted now (every other rank ended cleanly) is its own of the
   * others' absence (a desync, a hang, a lost peer: the checking layer may
   * post it in the name of the group's lowest rank): the ranks' calls
   * differ in number. Without one it failed on its own. */
  if (odd)
    st = sp->posted->have ? DRUN_EXIT_DESYNC : DRUN_EXIT_RANK_DIED;
  bool first;
  int ab = !odd && st == DRUN_EXIT_RANK_DIED ? aborter(sp) : -1;
  if (ab >= 0)
    first = set_cause(sp, st, "rank %d %s group %d (%s) %s; rank %d (pid %d, node %d) then %s",
                      ab, destroyed(sp) ? "destroyed" : "aborted", sp->posted->f.group_id,
                      sp->posted->f.group_name,
                      destroyed(sp) ? "with operations pending" : "with dist_abort_group",
                      r->global, (int)r->pid, sp->c->node_rank, how);
  else if (odd && st == DRUN_EXIT_DESYNC)
    first = set_cause(sp, st, "rank %d (pid %d, node %d) called on alone: every other rank had "
                      "ended with exit code 0, so the ranks' calls differ in number; then it %s",
                      r->global, (int)r->pid, sp->c->node_rank, how);
  else if (odd)
    first = set_cause(sp, st, "rank %d (pid %d, node %d) failed first: %s (after every other "
                      "rank had ended with exit code 0)", r->global, (int)r->pid,
                      sp->c->node_rank, how);
  else if (st != DRUN_EXIT_RANK_DIED)
    first = set_cause(sp, st, "%s reported by rank %d; rank %d (pid %d, node %d) then %s",
                      status_words(st), sp->posted->rank, r->global, (int)r->pid,
                      sp->c->node_rank, how);
  else if (sp->early_rank >= 0) /* it left while others needed it: it went first */
    first = set_cause(sp, DRUN_EXIT_RANK_DIED, "rank %d (pid %d, node %d) ended first, %s, "
                      "while other ranks still needed it; then rank %d (pid %d) failed: %s",
                      sp->early_rank, (int)sp->early_pid, sp->c->node_rank, sp->early_how,
                      r->global, (int)r->pid, how);
  else
    first = set_cause(sp, DRUN_EXIT_RANK_DIED, "rank %d (pid %d, node %d) failed first: %s",
                      r->global, (int)r->pid, sp->c->node_rank, how);
  if (first) {
    bool early = ab < 0 && !odd && st == DRUN_EXIT_RANK_DIED && sp->early_rank >= 0;
    sp->first = (drun_first){.rank = ab >= 0 ? ab : early ? sp->early_rank : r->global,
                             .wstatus = early || ab >= 0 ? 0 : wstatus, .early = early,
                             .odd = odd};
    dist__run_say("%s", sp->cause);
  } else {
    dist__run_say("rank %d (pid %d) also failed: %s", r->global, (int)r->pid, how);
  }
  if (sp->term_at < 0 && !sp->ending)
    sp->term_at = dist__run_report_deadline(sp->job, sp->running, dist__now_ms());
}

static void reap(sup *sp) {
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0)
      return;
    for (int i = 0; i < sp->n; i++)
      if (sp->ranks[i].pid == pid && sp->ranks[i].running)
        on_rank_exit(sp, &sp->ranks[i], st);
  }
}

static void on_interrupt(sup *sp, int sig) {
  if (++sp->interrupts > 1) {
    dist__run_say("got SIG%s again: killing the ranks", sigabbrev_np(sig));
    kill_all(sp);
    return;
  }
  char reason[64];
  snprintf(reason, sizeof reason, "interrupted by SIG%s", sigabbrev_np(sig));
  set_cause(sp, DRUN_EXIT_OTHER, "%s", reason);
  dist__run_say("got SIG%s: forwarding it to the ranks", sigabbrev_np(sig));
  dist__run_store_post_stop(sp->c, sp->job, reason);
  end_ranks(sp, sig);
}

static void read_signals(sup *sp) {
  struct signalfd_siginfo si;
  while (read(sp->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
    if (si.ssi_signo == SIGCHLD)
      reap(sp);
    else if (si.ssi_signo == SIGUSR1)
      dist__run_status_table(sp->c, sp->job, sp->ranks);
    else
      on_interrupt(sp, (int)si.ssi_signo);
  }
  reap(sp); /* SIGCHLDs coalesce; reaping again costs one syscall */
}

/* A rank of another node died first ("rank R died: killed by signal S" or
 * "... exited with code C", from dist__run_store_post_death): it is the
 * verdict's culprit here too, of the kind its node gives it (crash for a
 * fatal signal, else died), as on one node. */
static void remote_first(sup *sp, const char *msg) {
  int rank, code;
  if (sscanf(msg, "rank %d died: killed by signal %d", &rank, &code) == 2)
    sp->first = (drun_first){.rank = rank, .wstatus = code & 0x7f};
  else if (sscanf(msg, "rank %d died: exited with code %d", &rank, &code) == 2)
    sp->first = (drun_first){.rank = rank, .wstatus = (code & 0xff) << 8};
}

/* A node left (node 0 declared it gone, or heard so from node 0): its
 * ranks are the culprits, as ranks that died, since they are gone without
 * a word; the first of them stands for the node. */
static void node_lost(sup *sp, int node, const char *why) {
  if (set_cause(sp, DRUN_EXIT_RANK_DIED, "%s", why)) {
    sp->first = (drun_first){.rank = node * sp->c->nproc, .wstatus = SIGKILL};
    dist__run_say("%s", sp->cause);
  }
  end_ranks(sp, SIGTERM);
}

/* Node 0: node has been silent past the keep-alive's limit. */
static void node_silent(sup *sp, int node) {
  const drun_cfg *c = sp->c;
  char why[512];
  snprintf(why, sizeof why, "node %d left the job: nothing heard from its distrun for %.1f s "
           "(--rdzv-conf keep_alive_interval=%g,keep_alive_max_attempt=%d); its ranks %d-%d "
           "are gone", node, (double)sp->alive.limit_ms / 1000,
           (double)c->keep_alive_ms / 1000, c->keep_alive_max, node * c->nproc,
           (node + 1) * c->nproc - 1);
  sp->nodes_done++; /* not waited for any more */
  dist__run_store_post_left(c, sp->job, node, why);
  node_lost(sp, node, why);
}

/* One event from another node (distrun_store.c, DESIGN). */
static void on_event(sup *sp, const char *ev) {
  int node, st, off = 0;
  if (strncmp(ev, "died ", 5) == 0) {
    if (set_cause(sp, DRUN_EXIT_RANK_DIED, "%s (on another node)", ev + 5)) {
      remote_first(sp, ev + 5);
      dist__run_say("%s", sp->cause);
    }
    end_ranks(sp, SIGTERM);
  } else if (strncmp(ev, "stop ", 5) == 0) {
    if (set_cause(sp, DRUN_EXIT_OTHER, "%s", ev + 5))
      dist__run_say("%s", sp->cause);
    end_ranks(sp, SIGTERM);
  } else if (sscanf(ev, "beat %d", &node) == 1) {
    dist__run_alive_heard(&sp->alive, node, false);
  } else if (sscanf(ev, "left %d %n", &node, &off) == 1 && off > 0) {
    node_lost(sp, node, ev + off);
  } else if (sscanf(ev, "done %d %d", &node, &st) == 2) {
    if (!dist__run_alive_heard(&sp->alive, node, true))
      return; /* declared gone already, and counted then */
    sp->nodes_done++;
    if (st != 0 && set_cause(sp, st, "node %d ended with status %d", node, st))
      end_ranks(sp, SIGTERM);
  } else if (strncmp(ev, "lost ", 5) == 0) {
    if (sp->c->node_rank != 0 &&
        set_cause(sp, DRUN_EXIT_OTHER, "lost node 0's store: %s", ev + 5)) {
      sp->first = (drun_first){.rank = -1, .lost_store = true};
      dist__run_say("%s", sp->cause);
    }
    if (sp->c->node_rank != 0)
      end_ranks(sp, SIGTERM);
  }
}

static void event_line(void *arg, char *line) { on_event(arg, line); }

/* A read may end inside an event's line (several events queued up): the
 * tail waits in sp->events for the rest. */
static void read_events(sup *sp) {
  size_t room = sizeof sp->events - 1 - sp->events_len;
  ssize_t n = read(sp->job->notify_rd, sp->events + sp->events_len, room);
  if (n <= 0)
    return;
  sp->events_len += (size_t)n;
  dist__run_take_lines(sp->events, &sp->events_len, sizeof sp->events, event_line, sp);
}

/* --- the loop ------------------------------------------------------------ */

static bool waiting_for_nodes(const sup *sp) {
  return sp->c->node_rank == 0 && sp->c->nnodes > 1 &&
         sp->nodes_done < sp->c->nnodes - 1 && sp->job->watching;
}

static bool finished(const sup *sp) {
  return sp->running == 0 && sp->open_streams == 0 && !waiting_for_nodes(sp);
}

static void close_streams(sup *sp) {
  for (int i = 0; i < sp->n; i++) {
    drun_rank *r = &sp->ranks[i];
    if (r->out.fd >= 0 || r->err.fd >= 0)
      sp->open_streams -= (r->out.fd >= 0) + (r->err.fd >= 0);
    dist__run_output_close(sp->c, r->global, &r->out);
    dist__run_output_close(sp->c, r->global, &r->err);
  }
}

/* Deadlines that states ask for; returns the poll timeout. */
static int timers(sup *sp) {
  /* Events first: after a long blocking moment (a leaver's bounded wait)
   * the beats that came meanwhile are in the pipe, not yet heard. */
  if (sp->job->notify_rd >= 0)
    read_events(sp);
  int64_t now = dist__now_ms(), next = -1;
  if (sp->term_at >= 0 && now >= sp->term_at) {
    sp->term_at = -1;
    end_ranks(sp, SIGTERM);
  }
  if (sp->kill_at >= 0 && now >= sp->kill_at) {
    int k = live_ranks(sp);
    if (k)
      dist__run_say("%d rank%s still running after the grace period: SIGKILL", k,
                    k == 1 ? "" : "s");
    kill_all(sp);
  }
  if (sp->running == 0 && sp->open_streams > 0 && sp->drain_until < 0)
    sp->drain_until = now + DRAIN_MS;
  if (sp->drain_until >= 0 && now >= sp->drain_until && sp->open_streams > 0)
    close_streams(sp); /* a grandchild holds a pipe open: stop reading it */
  if (sp->running == 0 && sp->status > 0 && waiting_for_nodes(sp) && sp->nodes_until < 0)
    sp->nodes_until = now + sp->c->grace_ms + NODES_WAIT_MS;
  if (sp->nodes_until >= 0 && now >= sp->nodes_until && waiting_for_nodes(sp)) {
    dist__run_say("%d node(s) did not report their end; stopping the store",
                  sp->c->nnodes - 1 - sp->nodes_done);
    sp->nodes_done = sp->c->nnodes - 1;
  }
  int gone;
  int64_t beat = dist__run_alive_tick(&sp->alive, sp->c, sp->job, now, &gone);
  if (gone > 0)
    node_silent(sp, gone);
  const int64_t ds[] = {sp->kill_at, sp->drain_until, sp->nodes_until, sp->term_at, beat};
  for (size_t i = 0; i < 5; i++)
    if (ds[i] >= 0 && (next < 0 || ds[i] < next))
      next = ds[i];
  return next < 0 ? -1 : (int)(next > now ? next - now : 0);
}

static void poll_once(sup *sp) {
  int timeout = timers(sp);
  if (finished(sp))
    return;
  nfds_t k = 0;
  sp->pfd[k++] = (struct pollfd){sp->sigfd, POLLIN, 0};
  sp->pfd[k++] = (struct pollfd){sp->job->notify_rd, POLLIN, 0}; /* -1: skipped */
  for (int i = 0; i < sp->n; i++) {
    sp->pfd[k++] = (struct pollfd){sp->ranks[i].out.fd, POLLIN, 0};
    sp->pfd[k++] = (struct pollfd){sp->ranks[i].err.fd, POLLIN, 0};
  }
  if (poll(sp->pfd, k, timeout) < 0)
    return; /* EINTR: the signals we care about come through the signalfd */
  if (sp->pfd[0].revents)
    read_signals(sp);
  if (sp->pfd[1].revents)
    read_events(sp);
  for (int i = 0; i < sp->n; i++) {
    drun_rank *r = &sp->ranks[i];
    drun_stream *ss[2] = {&r->out, &r->err};
    for (int j = 0; j < 2; j++)
      if (sp->pfd[2 + 2 * i + j].revents && ss[j]->fd >= 0 &&
          !dist__run_output_pump(sp->c, r->global, ss[j])) {
        close(ss[j]->fd);
        ss[j]->fd = -1;
        sp->open_streams--;
      }
  }
}

/* --- starting ------------------------------------------------------------ */

static int prepare_log_dir(const drun_cfg *c) {
  if (!c->log_dir || mkdir(c->log_dir, 0755) == 0 || errno == EEXIST)
    return 0;
  dist__run_say("cannot create the log directory %s: %s", c->log_dir, strerror(errno));
  return DRUN_EXIT_LAUNCH;
}

static void launch_failed(sup *sp, int rank, const char *why) {
  char cause[600];
  snprintf(cause, sizeof cause, "could not start: %s", why);
  dist__run_store_post_death(sp->c, sp->job, rank, cause);
  if (set_cause(sp, DRUN_EXIT_LAUNCH, "%s", why))
    dist__run_say("%s", why);
  end_ranks(sp, SIGTERM);
}

static void start_ranks(sup *sp, const char *path) {
  for (int i = 0; i < sp->n; i++) {
    drun_rank *r = &sp->ranks[i];
    char why[600];
    int e = dist__run_output_open(sp->c, r->global, &r->out, &r->err);
    if (e) {
      snprintf(why, sizeof why, "cannot write the output of rank %d to %s: %s", r->global,
               sp->c->log_dir ? sp->c->log_dir : "the terminal", strerror(e));
      launch_failed(sp, r->global, why);
      return;
    }
    int rc = dist__run_spawn(sp->c, sp->job, path, r, why, sizeof why);
    sp->running += r->running;
    sp->open_streams += (r->out.fd >= 0) + (r->err.fd >= 0);
    if (rc) {
      launch_failed(sp, r->global, why);
      return;
    }
  }
}

/* The exit status and the verdict (printed by main once the trace holds
 * it: the last thing distrun writes; the report on node 0 only, so a job
 * prints it once). A failure first seen elsewhere (a rank on another node,
 * a node's end) may still have a cause posted. */
static int finish_status(sup *sp, drun_verdict *v) {
  int status = sp->status < 0 ? DRUN_EXIT_OK : sp->status;
  if (status == DRUN_EXIT_OK || status == DRUN_EXIT_OTHER || status == DRUN_EXIT_LAUNCH)
    goto say; /* success, an interrupt, a launch failure: no rank's cause */
  if (dist__run_cause_fetch(sp->job, 1, sp->posted) && status == DRUN_EXIT_RANK_DIED) {
    bool in_exit = sp->first.rank >= 0 && WIFSIGNALED(sp->first.wstatus) &&
                   dist__run_rank_exiting(sp->c, sp->job, sp->first.rank);
    status = posted_exit(sp, sp->first.rank, sp->first.wstatus, in_exit, status);
  }
say:
  if (status != DRUN_EXIT_OK)
    dist__run_cause_refresh(sp->job, sp->posted);
  dist__run_verdict_make(status, &sp->first, sp->posted, v);
  if (status == DRUN_EXIT_OK)
    return status;
  dist__run_verdict_refused(sp->c, sp->job, v);
  dist__run_verdict_non_member(sp->c, sp->job, v);
  bool has_report = v->report != NULL, print = has_report && sp->c->node_rank == 0;
  if (!print)
    v->report = NULL;
  const char *dir = sp->c->log_dir;
  char where[640]; // a clause of verdict_place or verdict_left (two call sites)
  dist__run_verdict_place(sp->c, sp->job, v, where, sizeof where);
  if (!where[0])
    dist__run_verdict_left(sp->c, sp->job, v, where, sizeof where);
  dist__run_verdict_site(sp->c, sp->job, v);
  snprintf(v->line, sizeof v->line, "exit status %d (%s): %s%s%s%s%s", status,
           status_words(status), sp->cause, where, dir ? " (each rank's output: " : "",
           dir ? dir : "", dir ? "/rank-<R>.out and .err)" : "");
  dist__run_verdict_outside(&sp->outside, v);
  char pairs[160] = "";
  if (v->report && sp->posted->pairs > 0 && v->report == sp->posted->text)
    snprintf(pairs, sizeof pairs, "; each of the %d rank pairs that reported it includes rank "
             "%d, so rank %d's report", sp->posted->pairs, sp->posted->f.culprits[0],
             sp->posted->rank);
  snprintf(v->tail, sizeof v->tail, "%s%s", pairs,
           print        ? "; the report follows"
           : has_report ? "; node 0 prints the report"
                        : "");
  return status;
}

static int supervise(const drun_cfg *c, drun_job *job, const char *path, int sigfd,
                     drun_posted *posted, drun_verdict *v) {
  sup sp = {.c = c, .job = job, .n = c->nproc, .kill_at = -1, .drain_until = -1,
            .nodes_until = -1, .term_at = -1, .status = -1, .sigfd = sigfd, .early_rank = -1,
            .first = {.rank = -1}, .posted = posted};
  sp.ranks = dist__calloc((size_t)c->nproc, sizeof *sp.ranks);
  sp.pfd = dist__calloc((size_t)c->nproc * 2 + 2, sizeof *sp.pfd);
  if (!sp.ranks || !sp.pfd || dist__run_alive_init(&sp.alive, c) != 0) {
    dist__run_say("out of memory for %d ranks", c->nproc);
    dist__free(sp.ranks);
    dist__free(sp.pfd);
    return DRUN_EXIT_LAUNCH;
  }
  for (int i = 0; i < c->nproc; i++) {
    sp.ranks[i] = (drun_rank){.local = i, .global = c->node_rank * c->nproc + i};
    sp.ranks[i].out.fd = sp.ranks[i].err.fd = -1;
    sp.ranks[i].out.log_fd = sp.ranks[i].err.log_fd = -1;
  }
  start_ranks(&sp, path);
  while (!finished(&sp))
    poll_once(&sp);
  close_streams(&sp);
  int status = finish_status(&sp, v);
  dist__run_alive_free(&sp.alive);
  dist__free(sp.pfd);
  dist__free(sp.ranks);
  return status;
}

/* The program's path, or a launch failure the other nodes hear about. */
static int find_program(const drun_cfg *c, drun_job *job, char *path, size_t len) {
  int e = dist__run_resolve(c->prog_argv[0], path, len);
  if (!e)
    return 0;
  char why[4200];
  snprintf(why, sizeof why, "cannot run '%s': %s%s", c->prog_argv[0], strerror(e),
           strchr(c->prog_argv[0], '/') ? "" : " (searched PATH)");
  dist__run_say("%s", why);
  dist__run_store_post_death(c, job, c->node_rank * c->nproc, why);
  return DRUN_EXIT_LAUNCH;
}

/* Refuses more ranks than this node can hold, before any is started
 * (the other nodes hear about it as about a program that cannot run). */
static int check_capacity(const drun_cfg *c, drun_job *job) {
  char why[700], msg[800];
  if (dist__run_check_capacity(c, why, sizeof why) == 0)
    return 0;
  snprintf(msg, sizeof msg, "cannot start %d ranks: %s", c->nproc, why);
  dist__run_say("%s", msg);
  dist__run_store_post_death(c, job, c->node_rank * c->nproc, msg);
  return DRUN_EXIT_LAUNCH;
}

/* One attempt: the job's store, the ranks, their end, the trace merged
 * with the verdict in it. Returns the attempt's exit status; v holds its
 * verdict (printed by the caller, last). */
/* Whether a failed attempt is followed by another: a rank's failure (a
 * death, a desync, a hang) is, as torchrun restarts on any worker failure;
 * an interrupt of distrun, a usage error or a program that cannot start
 * are not (a new attempt would end the same way). */
static bool restartable(int rc) {
  return rc == DRUN_EXIT_RANK_DIED || rc == DRUN_EXIT_DESYNC || rc == DRUN_EXIT_HANG;
}

/* With --max-restarts: "attempt K: exit status ..." in the line printed and
 * stored, and the attempt's own trace file beside the trace output. */
static void name_attempt(drun_cfg *c, const drun_job *job, drun_verdict *v, int rc,
                         char *trace, size_t len) {
  if (c->max_restarts == 0)
    return;
  dist__run_trace_attempt_path(c, job->attempt, trace, len);
  c->trace_out = trace;
  if (rc == DRUN_EXIT_OK)
    return;
  char head[32];
  int n = snprintf(head, sizeof head, "attempt %d: ", job->attempt);
  size_t l = strlen(v->line);
  if (l + (size_t)n < sizeof v->line) {
    memmove(v->line + n, v->line, l + 1);
    memcpy(v->line, head, (size_t)n);
  }
}

/* One attempt: the job's store (a round of node 0's, with several nodes),
 * the ranks, their end, whether the job restarts (*restart; node 0 decides
 * for every node), the trace merged with the verdict in it. Returns the
 * attempt's exit status, or DRUN_WAIT_ROUND when this node was not
 * admitted to the round; v holds its verdict (printed by the caller). */
static int run_attempt(drun_cfg *c, drun_job *job, int sigfd, drun_posted *posted,
                       drun_verdict *v, bool *restart) {
  int rc;
  *restart = false;
  dist__run_verdict_make(DRUN_EXIT_LAUNCH, &(drun_first){.rank = -1}, posted, v);
  if ((rc = dist__run_store_setup(c, job)) != 0 || (rc = dist__run_watch_start(c, job))) {
    dist__run_store_close(c, job);
    return rc;
  }
  DIST_LOG(INFO, RUN, "job %s: ranks %d-%d of %d (node %d of %d%s%s), store %s:%u",
           job->job_id, c->node_rank * c->nproc, c->node_rank * c->nproc + c->nproc - 1,
           c->nproc * c->nnodes, c->node_rank, c->nnodes, c->slurm_note ? ", from " : "",
           c->slurm_note ? c->slurm_note : "", job->store_addr, (unsigned)job->store_port);
  char path[4096];
  rc = find_program(c, job, path, sizeof path);
  if (rc == 0)
    rc = check_capacity(c, job);
  if (rc == 0)
    rc = supervise(c, job, path, sigfd, posted, v);
  dist__run_store_post_done(c, job, rc);
  *restart = dist__run_round_decide(c, job, rc,
                                    restartable(rc) && job->attempt < c->max_restarts);
  dist__run_store_close(c, job);
  char trace[4200];
  name_attempt(c, job, v, rc, trace, sizeof trace);
  dist__run_trace_merge(c, job->job_id, v);
  if (c->max_restarts > 0)
    dist__run_trace_mark_attempt(c, job);
  return rc;
}

/* What each attempt ended with, for the summary (--max-restarts). */
typedef struct attempt_end {
  int attempt;
  int status;
  char kind[16];
  char culprits[64];
} attempt_end;

static void remember(attempt_end *e, const drun_verdict *v, int status, int attempt) {
  e->attempt = attempt;
  e->status = status;
  snprintf(e->kind, sizeof e->kind, "%s", status == DRUN_EXIT_OK ? "success" : v->kind);
  size_t off = 0;
  e->culprits[0] = '\0';
  for (int i = 0; i < v->n_culprits && i < 8; i++)
    dist__appendf(e->culprits, sizeof e->culprits, &off, "%s%d", i ? "," : "", v->culprits[i]);
}

/* The last lines of a job with restarts: every attempt's verdict and trace
 * file, and whose status the job's is. */
static void print_attempts(const drun_cfg *c, const attempt_end *e, int n) {
  char text[8192];
  size_t off = 0;
  dist__appendf(text, sizeof text, &off, "distrun: %d attempt%s (--max-restarts %d); the job's "
                "exit status is the last attempt's, %d:\n", n, n == 1 ? "" : "s",
                c->max_restarts, e[n - 1].status);
  for (int k = 0; k < n; k++) {
    char trace[4200];
    dist__run_trace_attempt_path(c, e[k].attempt, trace, sizeof trace);
    dist__appendf(text, sizeof text, &off, "  attempt %d: exit status %d (%s%s%s%s), trace %s\n",
                  e[k].attempt, e[k].status, e[k].kind, e[k].culprits[0] ? ", rank" : "",
                  strchr(e[k].culprits, ',') ? "s " : e[k].culprits[0] ? " " : "",
                  e[k].culprits, trace);
  }
  ssize_t w = write(STDERR_FILENO, text, off);
  (void)w;
}


/* The job's id for every attempt (the ranks get "<id>.attempt-<K>"). */
static int run_id(const drun_cfg *c, char *out, size_t len) {
  if (c->job_id[0]) {
    snprintf(out, len, "%s", c->job_id);
    return 0;
  }
  if (dist__rendezvous_make_job_id(out, len) == DIST_OK)
    return 0;
  dist__run_say("cannot make a job id: %s", dist_last_errmsg());
  return DRUN_EXIT_LAUNCH;
}

int main(int argc, char **argv) {
  drun_cfg c;
  int rc = dist__run_parse_args(argc, argv, &c);
  if (rc >= 0)
    return rc;
  dist_set_debug_level_from_env();
  if ((rc = prepare_log_dir(&c)) != 0)
    return rc;
  /* Before the store's threads exist, so they inherit the blocked mask. */
  if (dist__run_signals_block() != 0)
    return DRUN_EXIT_OTHER;
  int sigfd = dist__run_signalfd();
  if (sigfd < 0) {
    dist__run_say("cannot make a signalfd: %s", strerror(errno));
    return DRUN_EXIT_OTHER;
  }
  char run[DIST_JOB_ID_MAX + 1] = "";
  if ((c.max_restarts > 0 || dist__run_rounds(&c)) && (rc = run_id(&c, run, sizeof run)) != 0)
    return rc;
  attempt_end *ends = dist__calloc((size_t)c.max_restarts + 1, sizeof *ends);
  if (!ends)
    return DRUN_EXIT_LAUNCH;
  int n_ends = 0, attempt = 0, waits = 0;
  for (;;) {
    drun_cfg ca = c;
    drun_job job = {.attempt = attempt};
    drun_posted posted = {0};
    drun_verdict v;
    bool restart;
    if (c.max_restarts > 0) { /* node 0's names; the other nodes take node 0's */
      snprintf(ca.job_id, sizeof ca.job_id, "%s.attempt-%d", run, attempt);
      snprintf(job.run_id, sizeof job.run_id, "%s", run);
    }
    rc = run_attempt(&ca, &job, sigfd, &posted, &v, &restart);
    if (c.node_rank_auto && job.hosted) { /* the host of the first round hosts them all */
      c.node_rank_auto = false;
      c.node_rank = 0;
    } else if (c.node_rank_auto) {
      c.never_host = true;
    }
    if (rc == DRUN_WAIT_ROUND) { /* no room in that round: the next one */
      dist__run_cause_free(&posted);
      attempt = job.attempt + 1;
      if (++waits <= c.max_restarts + 1)
        continue;
      rc = DRUN_EXIT_LAUNCH;
      break;
    }
    if (rc != DRUN_EXIT_OK && v.line[0])
      dist__run_verdict_print(&v); /* last, after anything the merge says */
    else if (c.max_restarts > 0)
      dist__run_say("attempt %d: every rank succeeded", job.attempt);
    remember(&ends[n_ends++], &v, rc, job.attempt);
    dist__run_cause_free(&posted); /* after the print: v's report borrows it */
    dist__run_crash_free();
    if (!restart || n_ends == c.max_restarts + 1)
      break;
    dist__run_say("attempt %d failed (exit status %d): restarting every rank, attempt %d "
                  "(restart %d of at most %d)", job.attempt, rc, job.attempt + 1,
                  job.attempt + 1, c.max_restarts);
    attempt = job.attempt + 1;
  }
  if (c.max_restarts > 0 && n_ends > 0) {
    dist__run_trace_link_last(&c, ends[n_ends - 1].attempt);
    print_attempts(&c, ends, n_ends);
  }
  dist__free(ends);
  dist__free(c.prog_own);
  close(sigfd);
  return rc;
}
