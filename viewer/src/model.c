/* model.c - opening a trace store and reading its header (job, ranks,
 * groups) into plain structs.
 *
 * The viewer meets files after bad nights: missing, empty, half-written,
 * from another program or a newer libdist. Each case gets its own sentence
 * before SQLite is asked anything, because SQLite's own words ("file is not
 * a database", "database disk image is malformed") do not tell a user what
 * to do. The file is opened read-only (a rank file may still be written by
 * its job) and only the header is read here; operations are fetched page by
 * page by model_page.c. A job directory goes through the tracer's reader
 * library, which merges its rank files into a temporary database. */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef VW_HAVE_READER
#include <dist/trace_reader.h>
#endif

#include "vw.h"
#include "vw_sql.h"

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && len)
    vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Checks the file before SQLite sees it: exists, not empty, a SQLite
 * header, and as long as the header says (a copy cut short). */
static int precheck(const char *path, char *err, size_t len) {
  struct stat st;
  if (stat(path, &st) != 0)
    return fail(err, len, "%s: %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail(err, len, "%s: not a regular file", path);
  if (st.st_size == 0)
    return fail(err, len, "%s: empty file (0 bytes), not a trace store", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(err, len, "%s: %s", path, strerror(errno));
  unsigned char h[100];
  ssize_t n = pread(fd, h, sizeof h, 0);
  close(fd);
  if (n < 16 || memcmp(h, "SQLite format 3", 16) != 0)
    return fail(err, len, "%s: not a SQLite database, so not a trace store", path);
  if (n < 100)
    return fail(err, len, "%s: truncated (%lld bytes, shorter than a SQLite header)", path,
                (long long)st.st_size);
  uint32_t psz = (uint32_t)h[16] << 8 | h[17];
  if (psz == 1)
    psz = 65536;
  uint32_t pages = be32(h + 28);
  /* The in-header size is valid only when its version matches the change
   * counter (SQLite's own rule). */
  if (be32(h + 92) == be32(h + 24) && pages > 0 &&
      (int64_t)st.st_size < (int64_t)pages * psz)
    return fail(err, len, "%s: truncated (%lld bytes, its header says %lld): a copy cut short?",
                path, (long long)st.st_size, (long long)pages * psz);
  return 0;
}

static int sql_fail(vw_model *m, char *err, size_t len, int rc) {
  const char *why = sqlite3_errmsg(m->db);
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB)
    return fail(err, len, "%s: corrupt or truncated trace store (%s)", m->path, why);
  return fail(err, len, "%s: %s", m->path, why);
}

/* meta.value of key into out; 1 found, 0 missing, -1 error. */
static int meta(vw_model *m, const char *key, char *out, size_t len, int *rc) {
  sqlite3_stmt *st;
  *rc = sqlite3_prepare_v2(m->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL);
  if (*rc != SQLITE_OK)
    return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  *rc = sqlite3_step(st);
  int found = *rc == SQLITE_ROW;
  if (found)
    vw_sql_text(st, 0, out, len);
  if (*rc == SQLITE_ROW || *rc == SQLITE_DONE)
    *rc = SQLITE_OK;
  sqlite3_finalize(st);
  return *rc == SQLITE_OK ? found : -1;
}

static int check_schema(vw_model *m, char *err, size_t len) {
  char v[32] = "";
  int rc;
  int found = meta(m, "schema_version", v, sizeof v, &rc);
  if (found < 0) {
    if (rc == SQLITE_ERROR)
      return fail(err, len, "%s: a SQLite database but not a libdist trace store (no meta table)",
                  m->path);
    return sql_fail(m, err, len, rc);
  }
  if (!found)
    return fail(err, len, "%s: a SQLite database but not a libdist trace store (no schema_version)",
                m->path);
  char *end;
  long ver = strtol(v, &end, 10);
  if (end == v || ver < 1)
    return fail(err, len, "%s: unreadable schema_version '%s'", m->path, v);
  if (ver > VW_SCHEMA_VERSION)
    return fail(err, len,
                "%s: written with trace schema version %ld; this distview reads version %d "
                "(use a newer distview)", m->path, ver, VW_SCHEMA_VERSION);
  /* Version 1 numbered a group's collectives and point-to-point calls
   * together and has no p2p or pair_seq column: a view in the connection's
   * temp schema (searched before main) adds them, so every query reads
   * either version; its seqs stay what they were. */
  if (ver < 2 && sqlite3_exec(m->db, "PRAGMA query_only = 0; CREATE TEMP VIEW IF NOT EXISTS"
                              " operations AS SELECT rowid AS rowid, *, op IN ('SEND','RECV','SEND_BYTES',"
                              "'RECV_BYTES','BATCH_P2P') AS p2p, NULL AS pair_seq FROM"
                              " main.operations; PRAGMA query_only = 1", NULL, NULL, NULL) !=
                     SQLITE_OK)
    return fail(err, len, "%s: cannot read schema version 1: %s", m->path,
                sqlite3_errmsg(m->db));
  meta(m, "kind", m->job.kind, sizeof m->job.kind, &rc);
  meta(m, "writer", m->job.writer, sizeof m->job.writer, &rc);
  meta(m, "skipped_files", m->job.skipped, sizeof m->job.skipped, &rc);
  return 0;
}

static int open_db(vw_model *m, const char *path, char *err, size_t len) {
  if (precheck(path, err, len) != 0)
    return -1;
#ifdef VW_HAVE_READER
  /* a rank file in a read-only place opens too (immutable=1 when safe) */
  void *db = NULL;
  char why[1024];
  if (dist_trace_open_sqlite(path, &db, why, sizeof why) != 0)
    return fail(err, len, "%s", why);
  m->db = db;
#else
  int rc = sqlite3_open_v2(path, &m->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK)
    return sql_fail(m, err, len, rc);
#endif
  sqlite3_busy_timeout(m->db, 2000);
  /* The viewer must never write, even through a pragma. A 16 MiB page
   * cache keeps the pages of the screen being moved around in memory (the
   * default 2 MiB re-reads them on every key) and bounds what it holds. */
  sqlite3_exec(m->db, "PRAGMA query_only = 1; PRAGMA cache_size = -16384", NULL, NULL, NULL);
  return 0;
}

#ifdef VW_HAVE_READER
static int open_dir(vw_model *m, const char *path, char *err, size_t len) {
  dist_trace *t = NULL;
  char why[512] = "";
  if (dist_trace_open(path, &t, why, sizeof why) != 0) {
    size_t pl = strlen(path);
    if (!strncmp(why, path, pl) && why[pl] == ':')
      return fail(err, len, "%s", why);   // the reader named the file already
    return fail(err, len, "%s: %s", path, why[0] ? why : "not a job directory");
  }
  m->trace = t;
  m->db = dist_trace_sqlite(t);
  return 0;
}
#else
static int open_dir(vw_model *m, const char *path, char *err, size_t len) {
  (void)m;
  return fail(err, len, "%s: a directory; merge it first: distview merge %s -o trace.db", path,
              path);
}
#endif

int vw_attempt = -1;

/* The file of attempt k beside path (tracer/SCHEMA.md, Attempts):
 * trace.db -> trace.attempt-<k>.db. */
static void attempt_path(const char *path, int k, char *out, size_t len) {
  const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - path) : strlen(path);
  snprintf(out, len, "%.*s.attempt-%d%s", (int)stem, path, k, path + stem);
}

/* --attempt K: the attempt's file, or a message naming those there are. */
static int resolve_attempt(const char *path, char *out, size_t len, char *err, size_t errlen) {
  struct stat st;
  if (vw_attempt < 0 || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
    snprintf(out, len, "%s", path);
    return 0;
  }
  attempt_path(path, vw_attempt, out, len);
  if (stat(out, &st) == 0)
    return 0;
  int n = 0;
  char probe[1100];
  for (; n < 10000; n++) {
    attempt_path(path, n, probe, sizeof probe);
    if (stat(probe, &st) != 0)
      break;
  }
  if (n)
    return fail(err, errlen, "--attempt %d: %s does not exist (the job kept attempts 0 to %d)",
                vw_attempt, out, n - 1);
  return fail(err, errlen, "--attempt %d: %s does not exist (no attempt files beside %s: a job "
              "run without distrun --max-restarts keeps one trace)", vw_attempt, out, path);
}

int vw_model_attempt(vw_model *m, int *attempt, int *max_restarts, char *run, size_t len) {
  char a[16] = "", mx[16] = "";
  int rc;
  if (!m->db || meta(m, "attempt", a, sizeof a, &rc) != 1 || meta(m, "run_id", run, len, &rc) != 1)
    return 0;
  meta(m, "max_restarts", mx, sizeof mx, &rc);
  *attempt = atoi(a);
  *max_restarts = atoi(mx);
  return 1;
}

int vw_model_open(const char *path_in, vw_model **out, char *err, size_t errlen) {
  *out = NULL;
  if (!path_in || !*path_in)
    return fail(err, errlen, "no trace store named");
  char path[1024];
  if (resolve_attempt(path_in, path, sizeof path, err, errlen) != 0)
    return -1;
  vw_model *m = calloc(1, sizeof *m);
  if (!m)
    return fail(err, errlen, "out of memory");
  snprintf(m->path, sizeof m->path, "%s", path);
  struct stat st;
  int rc = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? open_dir(m, path, err, errlen)
                                                       : open_db(m, path, err, errlen);
  if (rc == 0)
    rc = check_schema(m, err, errlen);
  if (rc == 0 && vw_model_reload(m) != 0)
    rc = fail(err, errlen, "%s", m->err);
  if (rc == 0 && m->trace && m->job.nranks == 0) {
    char *nl;
    while ((nl = strchr(m->job.skipped, '\n')))
      *nl = ';';   // one line
    rc = fail(err, errlen, "%s: no rank file could be read%s%.400s", path,
              m->job.skipped[0] ? ": " : " (no rank-*.db in it)", m->job.skipped);
  }
  if (rc != 0) {
    vw_model_close(m);
    return -1;
  }
  *out = m;
  return 0;
}

void vw_model_close(vw_model *m) {
  if (!m)
    return;
  vw_job_free(&m->job);
#ifdef VW_HAVE_READER
  if (m->trace)
    dist_trace_close(m->trace);   // owns the sqlite handle
  else
#endif
    sqlite3_close(m->db);
  free(m);
}

int vw_model_refresh(vw_model *m) {
#ifdef VW_HAVE_READER
  if (m->trace) {
    /* a job directory: merge its rank files again (they grew) */
    dist_trace *t = NULL;
    char why[512] = "";
    if (dist_trace_open(m->path, &t, why, sizeof why) != 0) {
      snprintf(m->err, sizeof m->err, "%.200s: %.300s", m->path, why);
      return -1;
    }
    dist_trace_close(m->trace);
    m->trace = t;
    m->db = dist_trace_sqlite(t);
  }
#endif
  return vw_model_reload(m);
}

const vw_group *vw_model_group(const vw_model *m, int group_id) {
  int i = vw_model_group_index(m, group_id);
  return i < 0 ? NULL : &m->job.groups[i];
}

int vw_model_group_index(const vw_model *m, int group_id) {
  for (int i = 0; i < m->job.ngroups; i++)
    if (m->job.groups[i].id == group_id)
      return i;
  return -1;
}

const vw_rank_info *vw_model_rank(const vw_model *m, int rank) {
  /* the header reads ranks in order, so rank r is at index r unless some
   * rank is missing (the matrix asks for each of 1,024 ranks per screen) */
  if (rank >= 0 && rank < m->job.nranks && m->job.ranks[rank].rank == rank)
    return &m->job.ranks[rank];
  for (int i = 0; i < m->job.nranks; i++)
    if (m->job.ranks[i].rank == rank)
      return &m->job.ranks[i];
  return NULL;
}
