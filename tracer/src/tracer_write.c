/* tracer_write.c - the writer thread: drains the ring into the rank file.
 *
 * DESIGN. One thread per process, `dist-trace-<rank>`. Every cycle
 * (DIST_TRACE_COMMIT_MS, 10 by default) it reads the ring from its tail
 * to the head inside one transaction, through the record sink (trace_sink.c: prepared statements, one row per operation),
 * and commits. So the file is a valid database holding everything
 * committed at every moment (WAL, synchronous=NORMAL: a killed process
 * loses nothing committed). It reads the ring without a lock: a record
 * still being written ends the cycle's reading; records overwritten before
 * they were read (the writer fell behind) are counted and recorded
 * (events kind ring_overflow, drops table). The rank file has no secondary
 * indexes; the merge builds them. */
#define _GNU_SOURCE
#include "tracer_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <dist/internal/base.h>

typedef union slot_buf {
  tr_head h;
  uint64_t w[TR_WORDS];
} slot_buf;

static int ring_get(void *arg, uint64_t idx, void *slot) {
  return tr_ring_get(arg, idx, slot) == 1 ? 1 : -1;
}

static void note_gap(tracer *t, uint64_t lost) {
  if (lost)
    tr_sink_gap(t->sink, lost, dist_clock_ns() + tr_skew(t));
}

/* Reads what the ring holds from the tail; returns records read. */
static uint64_t drain(tracer *t) {
  uint64_t head = atomic_load_explicit(&t->ring.head, memory_order_acquire);
  uint64_t size = t->ring.mask + 1, fed = 0, lost = 0;
  if (head - t->tail > size) {
    note_gap(t, head - size - t->tail);
    t->tail = head - size;
  }
  while (t->tail < head) {
    slot_buf s;
    int got = tr_ring_get(&t->ring, t->tail, &s);
    if (got == 0)
      break; /* still being written: next cycle */
    if (got < 0) {
      lost++;
      t->tail++;
      continue;
    }
    unsigned n = s.h.nslots ? s.h.nslots : 1;
    int ready = 1;
    for (unsigned k = 1; k < n && ready == 1; k++) {
      slot_buf c;
      ready = t->tail + k < head ? tr_ring_get(&t->ring, t->tail + k, &c) : 0;
    }
    if (ready == 0)
      break;
    fed += tr_decode_range(t->sink, ring_get, &t->ring, t->tail, t->tail + n, &lost);
    t->tail += n;
  }
  note_gap(t, lost);
  return fed;
}

#define RETRY_MS 2000

/* A cycle whose commit failed (typically a full disk): its records are
 * lost, counted, and said once per rank; the next cycles try again. */
static void commit_failed(tracer *t, uint64_t lost, const char *err) {
  t->write_lost += lost;
  t->lost_unnoted = true;
  if (!t->write_err[0]) {
    snprintf(t->write_err, sizeof t->write_err, "%s", err);
    DIST_LOG(WARNING, TRACER, "trace %s: cannot write: %s; the records that cannot be written "
             "are counted as dropped (ranks.dropped_records) and the job goes on", t->path, err);
  }
  t->write_failing = true;
}

/* One transaction: what the ring holds, and the end state when last.
 * Returns whether there was anything to write: an idle cycle opens no
 * transaction. */
static bool commit_cycle(tracer *t, bool last) {
  char err[256] = "";
  if (!last && !t->lost_unnoted &&
      atomic_load_explicit(&t->ring.head, memory_order_acquire) == t->tail)
    return false;
  tr_exec(t->db, "BEGIN", NULL, 0);
  uint64_t lost = t->write_lost;
  if (t->lost_unnoted) { /* the count first: it is what must reach the file */
    char why[400];
    snprintf(why, sizeof why, "the trace file could not be written (%s): %llu records lost",
             t->write_err, (unsigned long long)lost);
    tr_sink_lost(t->sink, 0, true, dist_clock_ns() + tr_skew(t), why);
  }
  uint64_t from = t->tail;
  drain(t);
  uint64_t upto = t->tail;
  tr_sink_flush(t->sink);
  if (last && t->end_state[0]) { /* in the same commit: a full disk cannot split them */
    char sql[160];
    snprintf(sql, sizeof sql, "UPDATE ranks SET end_state = '%s' WHERE rank = %d", t->end_state,
             t->rank);
    tr_exec(t->db, sql, NULL, 0);
  }
  /* While writes fail, a commit is tried every RETRY_MS only (and at the
   * end): the cycles between roll back, so a full disk is not written
   * (and its -wal grown by failed transactions) every cycle. */
  int64_t now = dist_clock_ns();
  if (t->write_failing && !last && now < t->retry_ns) {
    tr_exec(t->db, "ROLLBACK", NULL, 0);
    t->write_lost += upto - from;
    tr_sink_lost(t->sink, upto - from, false, 0, NULL);
  } else if (tr_exec(t->db, "COMMIT", err, sizeof err) != 0) {
    t->retry_ns = now + RETRY_MS * 1000000LL;
    tr_exec(t->db, "ROLLBACK", NULL, 0);
    commit_failed(t, upto - from, err);
    tr_sink_lost(t->sink, upto - from, false, 0, NULL); /* in memory; the file says it later */
  } else if (t->lost_unnoted) {
    t->lost_unnoted = false;
    if (t->write_failing)
      DIST_LOG(INFO, TRACER, "trace %s: writing again; %llu records were dropped", t->path,
               (unsigned long long)lost);
    t->write_failing = false;
  }
  /* Lost or written, these records are done with: a flush never waits for
   * rows a full disk cannot take. */
  atomic_store_explicit(&t->committed, upto, memory_order_release);
  return true;
}

/* Space kept aside at open (RESERVE_BYTES) so that a rank whose disk fills
 * can still record its end and what it dropped: over it (end_note.c). */
#define RESERVE_BYTES (64 * 1024)

static void reserve_space(tracer *t) {
  snprintf(t->reserve_path, sizeof t->reserve_path, "%s/rank-%d.reserve", t->dir, t->rank);
  int fd = open(t->reserve_path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    t->reserve_path[0] = '\0';
    return;
  }
  if (posix_fallocate(fd, 0, RESERVE_BYTES) != 0) {
    close(fd);
    unlink(t->reserve_path);
    t->reserve_path[0] = '\0';
    return;
  }
  close(fd);
}

static void release_space(tracer *t) {
  if (t->reserve_path[0])
    unlink(t->reserve_path);
  t->reserve_path[0] = '\0';
}

/* The end state and the count of dropped records, over the first bytes
 * of the kept space; false when there is none or it cannot be written. */
static bool note_end_aside(tracer *t) {
  if (!t->reserve_path[0])
    return false;
  tr_end_note n = {.dropped = tr_sink_dropped(t->sink), .t_ns = dist_clock_ns() + tr_skew(t)};
  snprintf(n.end_state, sizeof n.end_state, "%s", t->end_state);
  snprintf(n.why, sizeof n.why, "the trace file could not be written (%.180s): %llu records lost",
           t->write_err, (unsigned long long)n.dropped);
  return tr_end_note_write(t->reserve_path, &n) == 0;
}

#define IDLE_CYCLES 8
#define IDLE_FACTOR 8
/* Nor longer than this, unless the cycle itself is: the first burst after
 * an idle spell waits for the writer's next wake-up, and the default ring
 * (65,536 slots) holds 50 ms of operations at one every 0.8 us. */
#define IDLE_MAX_MS 50

static void *writer_main(void *arg) {
  tracer *t = arg;
  char name[16];
  snprintf(name, sizeof name, "dist-trace-%d", t->rank);
  pthread_setname_np(pthread_self(), name);
  /* Nice 10: on a machine with as many busy ranks as cores the writer takes
   * about a tenth of a core from them and falls behind instead (overflow,
   * counted) rather than slowing the job; on an idle core it runs flat out. */
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
  /* A rank that stopped issuing operations (it waits out a hang, or
   * computes) leaves the ring empty: after IDLE_CYCLES empty cycles the
   * writer wakes IDLE_FACTOR times less often (every 50 ms by default), so
   * 256 idle ranks' writers do not take the machine's two cores from their
   * own watchdogs; the first records found bring the cycle back (a flush
   * wakes it at once). */
  int64_t cycle_ms = t->commit_ms;
  int idle = 0;
  pthread_mutex_lock(&t->mu);
  while (!t->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)(cycle_ms * 1000000);
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    pthread_mutex_unlock(&t->mu);
    idle = commit_cycle(t, false) ? 0 : idle + 1;
    cycle_ms = t->commit_ms;
    if (idle >= IDLE_CYCLES && cycle_ms < IDLE_MAX_MS)
      cycle_ms = cycle_ms * IDLE_FACTOR < IDLE_MAX_MS ? cycle_ms * IDLE_FACTOR : IDLE_MAX_MS;
    if (t->clk_store && dist_clock_ns() >= t->next_clock_ns)
      tr_clock_remeasure(t);
    pthread_mutex_lock(&t->mu);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* --- the rank file ------------------------------------------------------- */

static int mkdirs(const char *path) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  return mkdir(buf, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

static void remove_old(const tracer *t) {
  char p[1100];
  unlink(t->path);
  snprintf(p, sizeof p, "%s-wal", t->path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", t->path);
  unlink(p);
  unlink(t->ring_path);
  unlink(t->maps_path);
}

static int64_t unix_minus_mono(void) {
  struct timespec r;
  clock_gettime(CLOCK_REALTIME, &r);
  int64_t mono = dist_clock_ns();
  return (int64_t)r.tv_sec * 1000000000 + r.tv_nsec - mono;
}

static int write_identity(tracer *t, const dist_pg_info *def) {
  char host[256] = "", exe[512] = "", num[32];
  gethostname(host, sizeof host - 1);
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  int64_t umm = unix_minus_mono(), now = dist_clock_ns() + tr_skew(t);
  const char *lr = getenv("LOCAL_RANK");
  tr_meta_set(t->db, "schema_version", TR_SCHEMA_VERSION_STR);
  tr_meta_set(t->db, "kind", "rank");
  tr_meta_set(t->db, "job_id", t->job_id);
  snprintf(num, sizeof num, "%d", t->rank);
  tr_meta_set(t->db, "rank", num);
  snprintf(num, sizeof num, "%lld", (long long)now);
  tr_meta_set(t->db, "created_ns", num);
  tr_meta_set(t->db, "writer", "libdist " DIST_VERSION_STRING);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(t->db, "INSERT INTO job VALUES (?, ?, ?, ?, NULL)", -1, &st, NULL))
    return -1;
  sqlite3_bind_text(st, 1, t->job_id, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, def->size);
  sqlite3_bind_int64(st, 3, umm - tr_skew(t));
  sqlite3_bind_int64(st, 4, now);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
  sqlite3_finalize(st);
  if (rc || sqlite3_prepare_v2(t->db, "INSERT INTO ranks VALUES (?,?,?,'cpu',?,0,-1,?,?,?,"
                                      "'running',0)", -1, &st, NULL))
    return -1;
  sqlite3_bind_int(st, 1, t->rank);
  sqlite3_bind_text(st, 2, host, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 3, (int)getpid());
  lr ? sqlite3_bind_int(st, 4, atoi(lr)) : sqlite3_bind_null(st, 4);
  sqlite3_bind_int64(st, 5, umm - tr_skew(t));
  sqlite3_bind_text(st, 6, exe, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 7, now);
  rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
  sqlite3_finalize(st);
  return rc;
}

int tr_writer_open(tracer *t, const dist_pg_info *def) {
  char err[256] = "";
  if (mkdirs(t->dir) != 0) {
    DIST_LOG(WARNING, TRACER, "trace directory %s: %s; tracing to disk is off", t->dir,
             strerror(errno));
    return DIST_E_SYS;
  }
  remove_old(t);
  int fd = open(t->path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600); /* 0600 from the start */
  if (fd >= 0)
    close(fd);
  if (sqlite3_open_v2(t->path, &t->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                           SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
      tr_exec(t->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", err, sizeof err) ||
      tr_exec(t->db, "BEGIN", err, sizeof err) ||
      tr_schema_create_rank(t->db, t->rank, err, sizeof err) ||
      write_identity(t, def) != 0 || tr_exec(t->db, "COMMIT", err, sizeof err)) {
    DIST_LOG(WARNING, TRACER, "trace file %s: %s; tracing to disk is off", t->path,
             err[0] ? err : sqlite3_errmsg(t->db));
    sqlite3_close(t->db);
    t->db = NULL;
    return DIST_E_SYS;
  }
  reserve_space(t);
  tr_sink_opts so = {.rank = t->rank, .symbolise = true};
  if (tr_sink_open(t->db, &so, &t->sink) != 0) {
    DIST_LOG(WARNING, TRACER, "trace file %s: %s", t->path, tr_sink_error(t->sink));
    tr_sink_close(t->sink);
    sqlite3_close(t->db);
    t->db = NULL;
    return DIST_E_SYS;
  }
  return DIST_OK;
}

int tr_writer_start(tracer *t) {
  pthread_mutex_init(&t->mu, NULL);
  pthread_condattr_t ca; /* the cycle's deadline is on CLOCK_MONOTONIC */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&t->writer, NULL, writer_main, t) != 0)
    return DIST_E_SYS;
  t->writer_started = true;
  return DIST_OK;
}

void tr_writer_stop(tracer *t, const char *end_state) {
  if (t->writer_started) {
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->writer, NULL);
    t->writer_started = false;
  }
  if (!t->db)
    return;
  snprintf(t->end_state, sizeof t->end_state, "%s", end_state);
  commit_cycle(t, true); /* what came after the thread's last cycle, and the end */
  if (t->live) { /* its last spans need that commit; its counts go in the file */
    char summary[1200];
    uint64_t dropped = tr_live_stop(t->live, summary, sizeof summary);
    t->live = NULL;
    commit_cycle(t, true); /* its failure note, if its last request failed */
    DIST_LOG(INFO, TRACER, "%s", summary);
    char *q = sqlite3_mprintf("INSERT INTO events VALUES (%d, NULL, NULL, 'otlp_export', %lld,"
                              " %lld, NULL, %Q)", t->rank,
                              (long long)(dist_clock_ns() + tr_skew(t)), (long long)dropped,
                              summary);
    tr_exec(t->db, q, NULL, 0);
    sqlite3_free(q);
  }
  /* The disk still full: the end and the count go over the kept space
   * (end_note.c), which no other rank's writer can take first. */
  bool noted = t->lost_unnoted && note_end_aside(t);
  if (t->write_lost)
    DIST_LOG(INFO, TRACER, "trace %s: %llu records could not be written (%s)%s", t->path,
             (unsigned long long)t->write_lost, t->write_err,
             !t->lost_unnoted ? "; counted in the file"
             : noted          ? "; their count and the rank's end are in its .reserve file"
                              : "; not even their count");
  tr_sink_close(t->sink);
  t->sink = NULL;
  sqlite3_close(t->db);
  t->db = NULL;
  if (!noted)
    release_space(t);
}

int dist__tracer_flush_wait(tracer *t, int64_t timeout_ms);
int dist__tracer_flush_wait(tracer *t, int64_t timeout_ms) {
  uint64_t want = atomic_load(&t->ring.head);
  int64_t deadline = dist_clock_ns() + timeout_ms * 1000000;
  while (atomic_load_explicit(&t->committed, memory_order_acquire) < want) {
    if (dist_clock_ns() > deadline)
      return DIST_E_TIMEOUT;
    pthread_mutex_lock(&t->mu);
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return DIST_OK;
}
