/* distrun_trace.c - at the end of the job, however it ended, the ranks'
 * trace files ($DIST_TRACE/<job id>/rank-R.db, and the ring dumps of ranks
 * that died of a signal) are merged into one indexed trace.db (or
 * --trace-out FILE), through the tracer's reader library. A bad rank file
 * is named and skipped; the merge never changes the job's exit status, and
 * says what it did at INFO only, so the job's report stays the last thing
 * distrun prints.
 *
 * Retention: after a successful merge the trace directory keeps the
 * newest DIST_TRACE_KEEP job directories (10; 0 keeps all), the current
 * job's among them; older ones go, oldest first by the directory's mtime.
 * Only directories distrun recognises as job directories are touched:
 * a real directory (not a link) holding nothing but rank files
 * (rank-<R>.db with its -wal/-shm/-journal, .ring, .maps, .reserve), at least one
 * rank-<R>.db or .ring, none of them written in the last minute (a job
 * that may still run). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dist/trace_reader.h>

#include "distrun.h"

/* The verdict's row in the merged trace.db, so distview says what distrun
 * said (tracer/SCHEMA.md, verdict). */
static void store_verdict(const char *out, const drun_verdict *v) {
  char op[32] = "";
  if (v->f.op[0])
    snprintf(op, sizeof op, "%s", v->f.op);
  char *text = NULL;
  size_t n = strlen(v->line) + strlen(v->tail) + (v->report ? strlen(v->report) : 0) + 2;
  text = dist__malloc(n);
  if (!text)
    return;
  snprintf(text, n, "%s%s%s%s", v->line, v->tail, v->report ? "\n" : "",
           v->report ? v->report : "");
  dist_trace_verdict tv = {
      .kind = v->kind, .exit_status = v->status, .culprits = v->culprits,
      .n_culprits = (size_t)v->n_culprits, .group_id = v->f.group_id,
      .group_name = v->f.group_name[0] ? v->f.group_name : NULL, .op = op[0] ? op : NULL,
      .seq = (int64_t)v->f.seq, .field = v->f.field[0] ? v->f.field : NULL,
      .site = v->f.site[0] ? v->f.site : NULL, .reported_by = v->reported_by,
      .text = v->status == DRUN_EXIT_OK ? "success" : text,
  };
  char err[512];
  if (dist_trace_set_verdict(out, &tv, err, sizeof err) != DIST_OK)
    dist__run_say("could not store the verdict in %s: %s", out, err);
  dist__free(text);
}

#define PRUNE_MAX 4096 /* job directories looked at */
#define QUIET_S 60     /* a rank file written this recently: the job may run */

/* Whether name is a rank file: rank-<R>.<ext>; *main: a .db or .ring. */
static bool rank_file(const char *name, bool *main) {
  int r, n = 0;
  char ext[16] = "";
  if (sscanf(name, "rank-%d.%15s%n", &r, ext, &n) != 2 || r < 0 || name[n])
    return false;
  static const char *const mains[] = {"db", "ring"};
  static const char *const sides[] = {"db-wal", "db-shm", "db-journal", "reserve", "maps"};
  for (size_t i = 0; i < 2; i++)
    if (!strcmp(ext, mains[i]))
      return *main = true;
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++)
    if (!strcmp(ext, sides[i]))
      return true;
  return false;
}

/* Whether path is a job directory that may go (see the top of the file). */
static bool job_dir(const char *path, time_t now) {
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return false;
  DIR *d = opendir(path);
  if (!d)
    return false;
  bool ok = true, any = false;
  struct dirent *e;
  while (ok && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char f[4700];
    snprintf(f, sizeof f, "%s/%s", path, e->d_name);
    ok = rank_file(e->d_name, &any) && lstat(f, &st) == 0 && S_ISREG(st.st_mode) &&
         now - st.st_mtime >= QUIET_S;
  }
  closedir(d);
  return ok && any;
}

static void remove_job_dir(const char *path) {
  DIR *d = opendir(path);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    bool main;
    if (!rank_file(e->d_name, &main))
      continue;
    char f[4700];
    snprintf(f, sizeof f, "%s/%s", path, e->d_name);
    unlink(f);
  }
  if (d)
    closedir(d);
  rmdir(path);
}

typedef struct old_job {
  char name[256];
  struct timespec mtime;
} old_job;

static int by_mtime(const void *a, const void *b) {
  const struct timespec *x = &((const old_job *)a)->mtime, *y = &((const old_job *)b)->mtime;
  return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1)
                                : (x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec);
}

/* Keeps the newest DIST_TRACE_KEEP job directories of base (the current
 * one, job_id, counted and never removed); says at INFO what went. */
static void prune(const char *base, const char *job_id) {
  int64_t keep = 10;
  if (dist__env_int("DIST_TRACE_KEEP", 0, 1 << 20, 10, &keep) != DIST_OK)
    DIST_LOG(WARNING, RUN, "%s; using 10", dist_last_errmsg());
  if (keep == 0)
    return;
  DIR *d = opendir(base);
  old_job *jobs = d ? dist__calloc(PRUNE_MAX, sizeof *jobs) : NULL;
  int n = 0;
  time_t now = time(NULL);
  struct dirent *e;
  while (jobs && n < PRUNE_MAX && (e = readdir(d))) {
    if (e->d_name[0] == '.' || !strcmp(e->d_name, job_id) || strlen(e->d_name) >= 256)
      continue;
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", base, e->d_name);
    if (!job_dir(path, now) || lstat(path, &st) != 0)
      continue;
    snprintf(jobs[n].name, sizeof jobs[n].name, "%s", e->d_name);
    jobs[n++].mtime = st.st_mtim;
  }
  if (d)
    closedir(d);
  int excess = n + 1 - (int)keep; /* + 1: the current job */
  if (excess > 0) {
    qsort(jobs, (size_t)n, sizeof *jobs, by_mtime);
    char said[2048] = "";
    size_t off = 0;
    for (int i = 0; i < excess; i++) {
      char path[4400];
      snprintf(path, sizeof path, "%s/%s", base, jobs[i].name);
      remove_job_dir(path);
      dist__appendf(said, sizeof said, &off, "%s%s", i ? ", " : "", jobs[i].name);
    }
    DIST_LOG(INFO, RUN, "trace: removed %d old job director%s from %s (DIST_TRACE_KEEP=%lld): %s",
             excess, excess == 1 ? "y" : "ies", base, (long long)keep, said);
  }
  dist__free(jobs);
}

/* Whether any rank completed collective seq + 1 of group. */
static bool completed_after(dist_trace *t, int group, int64_t seq) {
  static dist_trace_op ops[256];
  size_t n = 0;
  if (dist_trace_collective(t, group, seq + 1, ops, 256, &n) != DIST_OK)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(ops[i].state, "completed"))
      return true;
  return false;
}

/* A rank that exited early: where its peers wait for it, the first such
 * collective in its program's order (the survivors' reports name the one
 * each noticed it in, which varies run by run). */
static void say_awaited(dist_trace *t, drun_verdict *v) {
  dist_trace_seen w;
  if (dist_trace_awaited(t, v->culprits[0], &w) != DIST_OK || !w.ahead)
    return;
  size_t len = strlen(v->line);
  snprintf(v->line + len, sizeof v->line - len, "; its peers wait for it in group %d (%s) %s "
           "#%lld%s%s", w.op.group_id, w.group_name, w.op.op, (long long)w.op.seq,
           w.site[0] ? ", called from " : "", w.site);
}

/* A rank that crashed between its operations (its last one completed):
 * the verdict names no operation, and its line is the faulting frame's,
 * the first of the backtrace its handler wrote ("  #0 step (train.c:54)"),
 * not the line of the operation it had finished. */
static void crashed_outside(drun_verdict *v) {
  const char *f = v->report ? strstr(v->report, "backtrace:\n  #0 ") : NULL;
  if (!f)
    return;
  f += strlen("backtrace:\n  #0 ");
  size_t n = strcspn(f, "\n");
  if (!n || f[n - 1] != ')')
    return; /* an address, not a symbolised line */
  snprintf(v->f.site, sizeof v->f.site, "%.*s", (int)n, f);
  v->f.group_id = -1;
  v->f.group_name[0] = '\0';
  v->f.op[0] = '\0';
  v->f.seq = 0;
}

/* A rank that died or ended early before its monitor published what it
 * was doing (records go out once a second): its last operation in the
 * merged trace (flushed every few milliseconds, or dumped by its signal
 * handler) names where it was, in the verdict's fields and line. A rank
 * killed by a signal it cannot catch (SIGKILL) dumps nothing: its own
 * trace ends at its writer's last commit, a step or more behind when the
 * writer lagged. Its peers' traces then say where it got to (the
 * collectives that completed with it, the one they wait for it in:
 * dist_trace_peers_view), and that is what is named. */
/* The verdict's operation, line and group: where the peers saw it. */
static void name_seen(drun_verdict *v, const dist_trace_seen *seen) {
  v->f.group_id = seen->op.group_id;
  v->f.seq = (uint64_t)seen->op.seq;
  snprintf(v->f.op, sizeof v->f.op, "%s", seen->op.op);
  snprintf(v->f.site, sizeof v->f.site, "%s", seen->site);
  snprintf(v->f.group_name, sizeof v->f.group_name, "%s", seen->group_name);
}

static void place_from_trace(const char *out, drun_verdict *v) {
  if (!dist__run_verdict_one_death(v) || (v->f.group_id >= 0 && !v->by_record) || v->refused)
    return; /* a refused call (on a group it destroyed, say) is in no operation */
  dist_trace *t = NULL;
  dist_trace_op op;
  dist_trace_seen seen;
  size_t n = 0;
  if (dist_trace_open(out, &t, NULL, 0) != DIST_OK)
    return;
  bool own = dist_trace_last_ops(t, v->culprits[0], &op, 1, &n) == DIST_OK && n == 1;
  bool ahead = dist_trace_peers_view(t, v->culprits[0], &seen) == DIST_OK && seen.ahead;
  /* Its monitor's record (up to a second old) stands unless the trace
   * shows it went past it: its peers saw it at a later collective of the
   * record's group, or the next one of that group completed (collectives:
   * sends and receives are numbered apart). */
  static const char *const p2p[] = {"SEND", "RECV", "SEND_BYTES", "RECV_BYTES", "BATCH_P2P"};
  bool rec_p2p = false;
  for (size_t i = 0; i < sizeof p2p / sizeof p2p[0]; i++)
    rec_p2p = rec_p2p || !strcmp(v->f.op, p2p[i]);
  /* A rank that exited (a status, not a signal) flushed its trace: its
   * last call there, in issue order, is the one to name, where its record
   * (by completion time) named either of an async call and a later one,
   * as they happened to end. */
  bool exited = own && !ahead && !strcmp(v->kind, "early_exit");
  if (exited && strstr(v->line, "; as of its last record"))
    *strstr(v->line, "; as of its last record") = '\0';
  if (v->by_record && !exited &&
      (!ahead || rec_p2p ||
       !((seen.op.group_id == v->f.group_id && (uint64_t)seen.op.seq > v->f.seq) ||
         completed_after(t, v->f.group_id, (int64_t)v->f.seq)))) {
    dist_trace_close(t);
    return;
  }
  if (ahead) {
    name_seen(v, &seen);
    size_t len = strlen(v->line);
    char mine[160] = "its own trace holds no operation";
    if (own)
      snprintf(mine, sizeof mine, "its own trace ends at group %d %s #%lld (%s)", op.group_id,
               op.op, (long long)op.seq, op.state);
    /* An async call issued past the one its peers wait in (its trace
     * lists the later ones as enqueued) is not behind them: it had issued
     * that call and not run it when it ended. */
    bool issued = own && op.group_id == seen.op.group_id && op.seq >= seen.op.seq &&
                  !strcmp(seen.op.state, "waited");
    snprintf(v->line + len, sizeof v->line - len, "; %s%s%s group %d (%s) %s #%lld%s%s%s",
             mine, issued ? "" : ", behind its peers'",
             strcmp(seen.op.state, "waited") ? ": it took part in"
             : issued ? "; they wait for it in" : ": they wait for it in",
             seen.op.group_id, seen.group_name, seen.op.op, (long long)seen.op.seq,
             issued ? ", which it had issued and not run" : "",
             seen.site[0] ? ", called from " : "", seen.site);
  } else if (!own && dist_trace_awaited(t, v->culprits[0], &seen) == DIST_OK && seen.ahead) {
    /* Its trace holds nothing and its peers' show nothing it completed
     * past that (all written before their writers' next commit), but they
     * wait for it: the first collective they wait in is where it got to. */
    name_seen(v, &seen);
    size_t len = strlen(v->line);
    snprintf(v->line + len, sizeof v->line - len, "; its own trace holds no operation; its "
             "peers wait for it in group %d (%s) %s #%lld%s%s", seen.op.group_id,
             seen.group_name, seen.op.op, (long long)seen.op.seq,
             seen.site[0] ? ", called from " : "", seen.site);
  } else if (own) {
    v->f.group_id = op.group_id;
    v->f.seq = (uint64_t)op.seq;
    snprintf(v->f.op, sizeof v->f.op, "%s", op.op);
    /* Its call site and group from the trace (the line follows other
     * ranks' clauses: it names whose operation it is). */
    dist_trace_pattern p;
    bool same = dist_trace_rank_pattern(t, v->culprits[0], &p) == DIST_OK &&
                p.cur.group_id == op.group_id && p.cur.seq == op.seq;
    snprintf(v->f.site, sizeof v->f.site, "%s", same ? p.site : "");
    if (same && p.group_name[0])
      snprintf(v->f.group_name, sizeof v->f.group_name, "%s", p.group_name);
    size_t len = strlen(v->line);
    snprintf(v->line + len, sizeof v->line - len, "; rank %d's last operation in the trace: "
             "group %d%s%s%s %s #%lld (%s)%s%s", v->culprits[0], op.group_id,
             v->f.group_name[0] ? " (" : "", v->f.group_name, v->f.group_name[0] ? ")" : "",
             op.op, (long long)op.seq, op.state, v->f.site[0] ? ", called from " : "", v->f.site);
    if (!strcmp(v->kind, "crash") && !strcmp(op.state, "completed"))
      crashed_outside(v); /* between its operations: the fault's own line */
    if (exited)
      say_awaited(t, v);
  }
  dist_trace_close(t);
}

/* A verdict that names one rank's operation without its line (a desync
 * the transport found at OFF, in a collective the rank issued async while
 * its monitor's record was elsewhere: dist__run_verdict_site found no
 * match): the line from the merged trace, of the operation that rank is
 * in (its oldest that did not complete) when it is that very one, else of
 * that operation wherever it is in the rank's trace, else of the
 * collective the rank made at that number, which the verdict then names
 * (the report named a piece of it). */
static void site_from_trace(const char *out, drun_verdict *v) {
  if (v->f.site[0] || v->n_culprits != 1 || v->f.group_id < 0 || !v->f.seq || !v->f.op[0])
    return;
  dist_trace *t = NULL;
  if (dist_trace_open(out, &t, NULL, 0) != DIST_OK)
    return;
  dist_trace_pattern p;
  if (dist_trace_rank_pattern(t, v->culprits[0], &p) == DIST_OK &&
      p.cur.group_id == v->f.group_id && p.cur.seq == (int64_t)v->f.seq &&
      !strcmp(p.cur.op, v->f.op))
    snprintf(v->f.site, sizeof v->f.site, "%s", p.site);
  else /* an earlier call it returned from (a small broadcast's deferred check) */
    dist_trace_op_site(t, v->culprits[0], v->f.group_id, (int64_t)v->f.seq, v->f.op, v->f.site,
                       sizeof v->f.site);
  char op[32], site[192];
  if (!v->f.site[0] && dist_trace_collective_of(t, v->culprits[0], v->f.group_id,
                                                (int64_t)v->f.seq, op, sizeof op, site,
                                                sizeof site) == DIST_OK &&
      op[0] && strcmp(op, v->f.op) && site[0]) {
    /* The report's line names a piece of the program's call (an uneven
     * all_gather runs as broadcasts, a blob's as a size and a payload):
     * the verdict names the call, at its line. */
    snprintf(v->f.op, sizeof v->f.op, "%s", op);
    snprintf(v->f.site, sizeof v->f.site, "%s", site);
  }
  dist_trace_close(t);
}

/* The one culprit of several whose calls this step differ from its own
 * step before, while every other one repeats its own (a send skipped, a
 * receive or a send-first added): -1 when not exactly one. */
static int the_one_that_changed(dist_trace *t, const drun_verdict *v, dist_trace_pattern *one) {
  int found = -1;
  for (int i = 0; i < v->n_culprits; i++) {
    dist_trace_pattern p;
    if (dist_trace_rank_pattern(t, v->culprits[i], &p) != DIST_OK || p.differs < 0)
      return -1;
    if (p.differs == 1) {
      if (found >= 0)
        return -1;
      found = v->culprits[i];
      *one = p;
    }
  }
  return found;
}

/* The one culprit of several whose calls departed from those of the ranks
 * that made the same calls before it, while every other one's are a start
 * of its peers' (reader_depart.c): -1 when not exactly one. */
static int the_one_that_departed(dist_trace *t, const drun_verdict *v, dist_trace_depart *one) {
  dist_trace_depart d[DIST_CAUSE_CULPRITS_MAX];
  if (dist_trace_ranks_depart(t, v->culprits, (size_t)v->n_culprits, d) != DIST_OK)
    return -1;
  int found = -1;
  for (int i = 0; i < v->n_culprits; i++) {
    if (d[i].departs < 0 || (d[i].departs == 1 && found >= 0))
      return -1;
    if (d[i].departs == 1) {
      found = v->culprits[i];
      *one = d[i];
    }
  }
  return found;
}

/* A hang whose waits only go round names every rank of the cycle: their
 * states cannot tell the rank that went wrong from the ones it stranded.
 * The trace can (reader_pattern.c): when exactly one of them called
 * otherwise than in its step before, it is the culprit, named at its own
 * latest call, and the report says why. When the steps cannot tell (a
 * loop whose steps vary: a barrier every third step), the ranks that made
 * the same calls can (reader_depart.c): the one that went another way
 * than all of them, where the others' calls are what their peers made. */
static void break_tie(const char *out, drun_verdict *v) {
  static char report[8192];
  if (strcmp(v->kind, "hang") || v->n_culprits < 2)
    return;
  dist_trace *t = NULL;
  if (dist_trace_open(out, &t, NULL, 0) != DIST_OK)
    return;
  dist_trace_pattern p;
  dist_trace_depart d = {0};
  int r = the_one_that_changed(t, v, &p);
  bool by_step = r >= 0;
  if (!by_step && (r = the_one_that_departed(t, v, &d)) >= 0 &&
      dist_trace_rank_pattern(t, r, &p) != DIST_OK)
    r = -1;
  dist_trace_close(t);
  if (r < 0)
    return;
  char others[128] = "", peers[32];
  snprintf(peers, sizeof peers, d.peers > 1 ? "%d ranks" : "%d other rank", d.peers);
  size_t off = 0;
  for (int i = 0; i < v->n_culprits; i++)
    if (v->culprits[i] != r)
      dist__appendf(others, sizeof others, &off, "%s%d", off ? "," : "", v->culprits[i]);
  const char *nl = v->report && v->report[0] && v->report[strlen(v->report) - 1] != '\n'
                       ? "\n" : "";
  if (by_step)
    snprintf(report, sizeof report,
             "%s%s  of ranks %s and %d, rank %d called otherwise this step than the step before "
             "(the calls before %s #%lld%s%s, are not the ones before it last time, or it never "
             "called from there), while the others repeat their own: rank %d is where it went "
             "wrong\n", v->report ? v->report : "", nl, others, r, r, p.cur.op,
             (long long)p.cur.seq, p.site[0] ? ", called from " : "", p.site, r);
  else
    snprintf(report, sizeof report,
             "%s%s  of ranks %s and %d, rank %d went another way after the %d calls it made as "
             "%s did, which %s (it is in %s #%lld%s%s), while rank%s %s made "
             "the calls the ranks like %s made: rank %d is where it went wrong\n",
             v->report ? v->report : "", nl, others, r, r, d.at, peers,
             d.peers > 1 ? "all went on alike" : "went on otherwise", p.cur.op,
             (long long)p.cur.seq, p.site[0] ? ", called from " : "", p.site,
             strchr(others, ',') ? "s" : "", others, strchr(others, ',') ? "them" : "it", r);
  v->report = report;
  v->culprits[0] = r;
  v->n_culprits = 1;
  v->f.n_culprits = 1;
  v->f.culprits[0] = r;
  v->f.group_id = p.cur.group_id;
  v->f.seq = (uint64_t)p.cur.seq;
  snprintf(v->f.op, sizeof v->f.op, "%s", p.cur.op);
  snprintf(v->f.site, sizeof v->f.site, "%s", p.site);
  snprintf(v->f.group_name, sizeof v->f.group_name, "%s", p.group_name);
}

/* A desync naming one rank whose group's members parted in count (one
 * left it, the named rank called on alone): when the groups of the same
 * description show that the named rank made the program's usual number
 * of that call and the one that left made fewer, the one that left
 * skipped a call and is the culprit (reader_counts.c). */
static void name_the_skipper(const char *out, drun_verdict *v) {
  static char report[8192];
  if (strcmp(v->kind, "desync") || v->n_culprits != 1 || v->f.group_id < 0 || !v->f.op[0] ||
      !v->report || (!strstr(v->report, " ran out of calls: left the group cleanly") &&
                     !strstr(v->report, " left the group (destroyed it or exited) before")))
    return; /* only a member that ended (the engine's words, or the checking layer's):
               the others' counts mid-job move on */
  dist_trace *t = NULL;
  if (dist_trace_open(out, &t, NULL, 0) != DIST_OK)
    return;
  dist_trace_short s;
  int rc = dist_trace_short_member(t, v->f.group_id, v->f.op, v->culprits[0], &s);
  dist_trace_close(t);
  char left[48], left_detail[48];
  snprintf(left, sizeof left, "rank %d ran out of calls", s.rank);
  snprintf(left_detail, sizeof left_detail, "rank %d left the group", s.rank);
  if (rc != DIST_OK || s.rank < 0 ||
      (!strstr(v->report, left) && !strstr(v->report, left_detail)))
    return;
  char kin[96];
  snprintf(report, sizeof report,
           "%s%s  rank %d made %lld %s calls on group %d (%s) and rank %d %lld, as %d ranks "
           "made on the groups %s: rank %d skipped one, and rank %d called on without it\n",
           v->report ? v->report : "",
           v->report && v->report[0] && v->report[strlen(v->report) - 1] != '\n' ? "\n" : "",
           s.rank, (long long)s.count, v->f.op, v->f.group_id, v->f.group_name, v->culprits[0],
           (long long)s.usual, s.ranks_at_usual,
           dist__run_kin_words(v->f.group_name, kin, sizeof kin), s.rank, v->culprits[0]);
  v->report = report;
  v->culprits[0] = s.rank;
  v->f.culprits[0] = s.rank;
  v->f.n_culprits = 1;
  v->f.site[0] = '\0'; /* the named rank's own line, not the partner's */
}

/* "prog.c:17" of a verdict's site ("main (prog.c:17)", or the checking
 * layer's "prog.c:17 in main()"); "" when it names no line. */
static void site_line(const char *site, char *out, size_t len) {
  const char *open = strrchr(site, '(');
  const char *at = open && site[strlen(site) - 1] == ')' ? open + 1 : site;
  size_t n = strcspn(at, " )");
  snprintf(out, len, "%.*s", (int)n, at);
  if (!strchr(out, ':'))
    out[0] = '\0';
}

/* Whether the report's first line heads with the verdict's operation
 * ("desync in group 2 (dp, 4 ranks) at ALL_REDUCE #14:"). */
static bool report_heads_with(const drun_verdict *v) {
  if (!v->report)
    return false;
  char head[96], at[96];
  snprintf(head, sizeof head, "%s in group %d (", v->kind, v->f.group_id);
  snprintf(at, sizeof at, " at %s #%llu:", v->f.op, (unsigned long long)v->f.seq);
  size_t first = strcspn(v->report, "\n");
  const char *a = strstr(v->report, at);
  return !strncmp(v->report, head, strlen(head)) && a && (size_t)(a - v->report) < first;
}

/* A hang's report is the view of the rank that timed out first: its own
 * operation heads it ("hang in group 1 (dp) at ALL_REDUCE #13") and the
 * culprit comes at the end of its waits, maybe in another group. A
 * desync's report may head with a later call that failed for an earlier
 * one (a small broadcast's deferred check: "at ALL_REDUCE #16: ...
 * BROADCAST_BYTES #15 (an earlier call)"), and below DETAIL it names no
 * line. When the verdict's operation is not the one the report heads
 * with, or its line is not in the report, the summary line names them,
 * as distview's headline does. */
static void name_the_culprit(drun_verdict *v) {
  bool hang = !strcmp(v->kind, "hang"), desync = !strcmp(v->kind, "desync");
  if ((!hang && !desync) || !v->n_culprits || v->f.group_id < 0 || !v->f.op[0] ||
      v->placed_outside) /* said already, with where the culprit is */
    return;
  char line[192];
  site_line(v->f.site, line, sizeof line);
  bool heads = hang ? false : report_heads_with(v);
  if (hang) {
    char head[256];
    snprintf(head, sizeof head, "hang in group %d (%s) at %s #%llu:", v->f.group_id,
             v->f.group_name, v->f.op, (unsigned long long)v->f.seq);
    heads = v->report && !strncmp(v->report, head, strlen(head));
  }
  if (heads && (hang || !line[0] || (v->report && strstr(v->report, line))))
    return;
  char ranks[128] = "";
  size_t off = 0;
  for (int i = 0; i < v->n_culprits && off + 8 < sizeof ranks; i++)
    dist__appendf(ranks, sizeof ranks, &off, "%s%d", i ? "," : "", v->culprits[i]);
  off = strlen(v->line);
  dist__appendf(v->line, sizeof v->line, &off, "; the culprit: rank%s %s in group %d (%s) at "
                "%s #%llu%s%s%s%s", v->n_culprits > 1 ? "s" : "", ranks, v->f.group_id,
                v->f.group_name, v->f.op, (unsigned long long)v->f.seq,
                desync && v->f.field[0] ? ": " : "", desync && v->f.field[0] ? v->f.field : "",
                desync && v->f.field[0] ? " differs" : "",
                v->f.site[0] ? ", called from " : "");
  if (v->f.site[0])
    dist__appendf(v->line, sizeof v->line, &off, "%s", v->f.site);
}

/* A group its culprit destroyed with an operation pending (pg_cause.c,
 * field "destroyed"): the summary line names that operation and the line
 * that issued it, which the program never waited for. */
static void name_the_destroyed(drun_verdict *v) {
  if (strcmp(v->f.field, "destroyed") || v->n_culprits != 1 || v->f.group_id < 0 || !v->f.op[0])
    return;
  size_t off = strlen(v->line);
  dist__appendf(v->line, sizeof v->line, &off, "; rank %d's %s #%llu in group %d (%s)%s%s was "
                "never waited for", v->culprits[0], v->f.op, (unsigned long long)v->f.seq,
                v->f.group_id, v->f.group_name, v->f.site[0] ? ", called from " : "", v->f.site);
}

static bool make_dir(const char *path) {
  return mkdir(path, 0700) == 0 || errno == EEXIST;
}

void dist__run_trace_merge(const drun_cfg *c, const char *job_id, drun_verdict *v) {
  const char *base = getenv("DIST_TRACE");
  if (base && !strcmp(base, "0"))
    return;
  char dir[4096];
  bool dflt = !base || !*base || !strcmp(base, "1"); /* as the tracer reads it (tracer.c) */
  snprintf(dir, sizeof dir, "%s/%s", dflt ? "dist-trace" : base, job_id);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    /* A failed job whose ranks recorded nothing (one died before init,
     * or the program records no trace) still leaves trace.db, holding the
     * verdict alone, so distview says what distrun said. */
    if (v->status == DRUN_EXIT_OK || !make_dir(dflt ? "dist-trace" : base) || !make_dir(dir)) {
      DIST_LOG(INFO, RUN, "no trace in %s (the program does not record one)", dir);
      return;
    }
  }
  const char *out = c->trace_out ? c->trace_out : "trace.db";
  dist_trace_merge_report rep;
  char err[512];
  if (dist_trace_merge(dir, out, &rep, err, sizeof err) != DIST_OK) {
    dist__run_say("trace merge failed: %s", err);
    return;
  }
  if (rep.files_skipped)
    DIST_LOG(WARNING, RUN, "trace: skipped %d file(s):\n%s", rep.files_skipped, rep.skipped);
  DIST_LOG(INFO, RUN, "trace: %d rank(s), %lld operations merged into %s", rep.ranks_merged,
           (long long)rep.operations, out);
  place_from_trace(out, v);
  site_from_trace(out, v);
  break_tie(out, v);
  name_the_skipper(out, v);
  dist__run_trace_odd_pair(out, v);
  name_the_culprit(v);
  name_the_destroyed(v);
  store_verdict(out, v);
  prune(dflt ? "dist-trace" : base, job_id);
}

/* --- attempts (--max-restarts) -------------------------------------------- */

void dist__run_trace_attempt_path(const drun_cfg *c, int k, char *out, size_t len) {
  const char *base = c->trace_base ? c->trace_base : "trace.db";
  const char *slash = strrchr(base, '/'), *dot = strrchr(base, '.');
  size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - base) : strlen(base);
  snprintf(out, len, "%.*s.attempt-%d%s", (int)stem, base, k, base + stem);
}

void dist__run_trace_mark_attempt(const drun_cfg *c, const drun_job *job) {
  struct stat st;
  char err[512];
  if (!c->trace_out || stat(c->trace_out, &st) != 0)
    return; /* no trace this attempt (DIST_TRACE=0, a program that records none) */
  if (dist_trace_set_attempt(c->trace_out, job->run_id, job->attempt, c->max_restarts, err,
                             sizeof err) != DIST_OK)
    dist__run_say("could not mark %s as attempt %d: %s", c->trace_out, job->attempt, err);
}

void dist__run_trace_link_last(const drun_cfg *c, int last) {
  char from[4200];
  const char *out = c->trace_base ? c->trace_base : "trace.db";
  struct stat st;
  dist__run_trace_attempt_path(c, last, from, sizeof from);
  if (stat(from, &st) != 0)
    return;
  if ((unlink(out) != 0 && errno != ENOENT) || link(from, out) != 0)
    dist__run_say("could not make %s the last attempt's trace (%s): %s", out, from,
                  strerror(errno));
}
