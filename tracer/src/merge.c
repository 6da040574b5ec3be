/* merge.c - rank files (and crash dumps) into one indexed trace.db
 * (SCHEMA.md "Merge").
 *
 * Each rank file is checked first (SQLite's quick_check, the meta table's
 * schema version, kind, job and rank; rank_check.c, on a second thread a
 * few files ahead), then attached read-only and copied
 * with INSERT ... SELECT, its times moved onto the job clock by the rank's
 * clock offset. A file that fails a check is named in the report and
 * skipped; the others merge. Indexes are built once at the end, and a
 * `.ring` side file (the raw ring a dying rank wrote) is decoded through
 * the record sink into a scratch database and folded in: rows the rank
 * file lacks are added, rows it has are brought to their newest state.
 * Call sites get their function, file and line (callsite_sym.c). The
 * result is written to <out>.tmp and renamed, so a reader never sees half
 * a merge; a signal that ends the program meanwhile removes <out>.tmp
 * (dist_trace_remove_temps), and a full disk ends the merge with "no space
 * left" (journal_mode=OFF: nothing written after that can be trusted).
 * Rank files are read wherever they lie, read-only places included
 * (reader_files.c); one that cannot be read in place (rows in its -wal on
 * a full disk or in a read-only place) is read from a copy beside the
 * output (rank_aside.c). */
#define _GNU_SOURCE
#include "reader_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MERGE_BUSY_MS 5000 /* waiting for another reader of a rank file */
/* threads: the sorts that build the indexes use a second core (op_by_coll
 * at 1.28 M rows: 1.43 -> 1.09 s here). */
#define MERGE_PRAGMAS                                                             \
  "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536;" \
  "PRAGMA threads=2;"
/* Made before the copy, which appends in its order (rank by rank, each in
 * enqueue order), so it costs nearly nothing then; built at the end it
 * was a sort of every row (0.45 s of 1.28 M rows' 1.95 s of indexes).
 * tr_schema_indexes makes the others and skips it. */
#define MERGE_EARLY_INDEX \
  "CREATE INDEX IF NOT EXISTS op_by_rank ON operations(rank, t_enqueued_ns);"

static void seterr(char *err, size_t len, const char *fmt, ...) {
  if (!err || !len)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

static void skip(dist_trace_merge_report *rep, const char *path, const char *why) {
  rep->files_skipped++;
  size_t n = strlen(rep->skipped);
  snprintf(rep->skipped + n, sizeof rep->skipped - n, "%s: %s\n", path, why);
}

/* Whether db's last failure was the disk (or the quota) running out. */
static bool disk_full(sqlite3 *db) {
  int se = sqlite3_system_errno(db);
  return (sqlite3_extended_errcode(db) & 0xff) == SQLITE_FULL || se == ENOSPC || se == EDQUOT;
}

/* The merge cannot go on: the disk of tmp is full. */
static int no_space(const char *tmp, char *err, size_t errlen) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s", tmp);
  char *slash = strrchr(dir, '/');
  if (slash)
    *(slash == dir ? slash + 1 : slash) = '\0';
  else
    snprintf(dir, sizeof dir, ".");
  struct statvfs vfs;
  char left[64] = "";
  if (statvfs(dir, &vfs) == 0)
    snprintf(left, sizeof left, " (%.1f MB left there)",
             (double)vfs.f_bavail * (double)vfs.f_frsize / 1e6);
  seterr(err, errlen, "no space left on the device of %s%s: the merged trace needs room for "
         "every rank file's rows; free some space or write it elsewhere (-o FILE, or TMPDIR "
         "for a job directory)", tmp, left);
  return DIST_E_SYS;
}

/* |a - b| > bound, for any values (a rank file's are not to be trusted:
 * a damaged one holds anything, and a - b may not fit in 64 bits). */
static bool differ(int64_t a, int64_t b, int64_t bound) {
  uint64_t d = a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
  return bound < 0 || d > (uint64_t)bound;
}

/* The rank's clock offsets as segments of its own time, in temp table
 * seg(t_from, v): a measurement starts a new segment when its offset
 * differs from the segment's by more than either round trip (the clock
 * changed; within that it is noise); a segment takes the offset of its
 * measurement with the smallest round trip, and times before the first
 * measurement the first segment's. A file without the clocks table (older
 * writer) or without a measurement has one segment: ranks.clock_offset_ns.
 * Returns the number of segments, or -1. */
static int build_segments(sqlite3 *db, int rank, char *err, size_t errlen) {
  if (tr_exec(db, "CREATE TEMP TABLE IF NOT EXISTS seg(t_from INTEGER PRIMARY KEY,"
                  " v INTEGER NOT NULL); DELETE FROM seg;", err, errlen) != 0)
    return -1;
  sqlite3_stmt *q, *ins;
  const char *sql = "SELECT t_ns, offset_ns, rtt_ns FROM src.clocks WHERE rank = ?"
                    " ORDER BY t_ns";
  bool have = sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK;
  if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO seg VALUES (?, ?)", -1, &ins, NULL)) {
    sqlite3_finalize(q);
    seterr(err, errlen, "%s", sqlite3_errmsg(db));
    return -1;
  }
  int n = 0;
  int64_t from = -(1ll << 62), v = 0, rtt = 0;
  if (have)
    sqlite3_bind_int(q, 1, rank);
  while (have && sqlite3_step(q) == SQLITE_ROW) {
    int64_t t = sqlite3_column_int64(q, 0), o = sqlite3_column_int64(q, 1);
    int64_t r = sqlite3_column_int64(q, 2), bound = r > rtt ? r : rtt;
    if (n > 0 && differ(o, v, bound)) { /* a new segment from t */
      sqlite3_bind_int64(ins, 1, from);
      sqlite3_bind_int64(ins, 2, v);
      sqlite3_step(ins);
      sqlite3_reset(ins);
      from = t;
      n++;
      v = o;
      rtt = r;
    } else if (n == 0 || r < rtt) {
      n = n ? n : 1;
      v = o;
      rtt = r;
    }
  }
  sqlite3_finalize(q);
  if (n == 0) { /* no history: the rank's one offset */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT clock_offset_ns FROM src.ranks WHERE rank = ?", -1, &st,
                           NULL) == SQLITE_OK) {
      sqlite3_bind_int(st, 1, rank);
      v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
      sqlite3_finalize(st);
    }
    n = 1;
  }
  sqlite3_bind_int64(ins, 1, from);
  sqlite3_bind_int64(ins, 2, v);
  int rc = sqlite3_step(ins) == SQLITE_DONE ? n : -1;
  if (rc < 0)
    seterr(err, errlen, "%s", sqlite3_errmsg(db));
  sqlite3_finalize(ins);
  return rc;
}

/* The offset to add to rank time x: one segment is a constant (SQLite
 * evaluates the uncorrelated subquery once); several, a seek by x. */
static char *off(int segments, const char *x) {
  if (segments == 1)
    return sqlite3_mprintf("(SELECT v FROM seg)");
  return sqlite3_mprintf("(SELECT v FROM seg WHERE t_from <= (%s) ORDER BY t_from DESC"
                         " LIMIT 1)", x);
}

/* Copies one attached rank database `src` into main, its times moved onto
 * the job clock (build_segments). An operation's three times take the
 * offset at its enqueue, so its durations stay what the rank measured. */
static int copy_rank(sqlite3 *db, int rank, bool first, char *err, size_t errlen) {
  int segs = build_segments(db, rank, err, errlen);
  if (segs < 0)
    return -1;
  char *o_op = off(segs, "t_enqueued_ns"), *o_ev = off(segs, "t_ns"),
       *o_cr = off(segs, "s.created_ns"), *o_de = off(segs, "s.destroyed_ns");
  bool clocks = tr_exec(db, "SELECT 1 FROM src.clocks LIMIT 1", NULL, 0) == 0;
  char *sql = sqlite3_mprintf(
      "INSERT OR REPLACE INTO main.ranks SELECT * FROM src.ranks;"
      "%s"
      "INSERT INTO main.operations SELECT rank, group_id, seq, op, is_async, state, dtype,"
      " shape, n_inputs, n_outputs, numel_in, numel_out, bytes_in, bytes_out, root, tag,"
      " redop, timeout_ms, t_enqueued_ns + %s, t_started_ns + %s, t_ended_ns + %s, status,"
      " message, callsite_id, pair_seq FROM src.operations;"
      "INSERT INTO main.events SELECT rank, group_id, seq, kind, t_ns + %s,"
      " status, peer, message FROM src.events;"
      "INSERT INTO main.stats SELECT rank, group_id, t_ns + %s, op, count,"
      " bytes, p50_ns, p99_ns, straggler_rank, lateness_ns FROM src.stats;"
      "INSERT INTO main.drops SELECT rank, group_id, seq_first, seq_last, records,"
      " t_ns + %s, p2p FROM src.drops;"
      "%s"
      "INSERT OR IGNORE INTO main.callsites (rank, callsite_id, address, module, build_id,"
      " offset, function) SELECT rank, callsite_id, address, module, build_id, offset,"
      " function FROM src.callsites;"
      "INSERT OR IGNORE INTO main.groups SELECT group_id, name, description, backend, size,"
      " members, timeout_ms, NULL, NULL FROM src.groups;"
      "UPDATE main.groups SET"
      " created_ns = (SELECT min(coalesce(main.groups.created_ns, 1<<62), s.created_ns + %s)"
      "   FROM src.groups s WHERE s.group_id = main.groups.group_id),"
      " destroyed_ns = coalesce((SELECT max(coalesce(main.groups.destroyed_ns, 0),"
      "   s.destroyed_ns + %s)"
      "   FROM src.groups s WHERE s.group_id = main.groups.group_id"
      "   AND s.destroyed_ns IS NOT NULL),"
      "   main.groups.destroyed_ns)"
      " WHERE group_id IN (SELECT group_id FROM src.groups);",
      first ? "INSERT INTO main.job SELECT job_id, world_size, unix_minus_mono_ns, NULL, NULL"
              " FROM src.job LIMIT 1;"
            : "",
      o_op, o_op, o_op, o_ev, o_ev, o_ev,
      clocks ? "INSERT INTO main.clocks SELECT rank, t_ns + offset_ns, offset_ns, rtt_ns"
               " FROM src.clocks;"
             : "",
      o_cr, o_de);
  int rc = sql && o_op && o_ev && o_cr && o_de ? tr_exec(db, sql, err, errlen) : -1;
  if (!sql)
    seterr(err, errlen, "out of memory");
  sqlite3_free(sql);
  sqlite3_free(o_op);
  sqlite3_free(o_ev);
  sqlite3_free(o_cr);
  sqlite3_free(o_de);
  return rc;
}

static int cmp_int(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Ranks with a rank-R.<ext> file in dir, sorted, into *ranks (free it);
 * how many, or -1 with errno set. As many as there are: a job of 10,000
 * ranks merges whole. */
static int list_ranks(const char *dir, const char *ext, int **ranks) {
  *ranks = NULL;
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  int n = 0, cap = 0, *r = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    int x;
    char tail[16];
    if (sscanf(e->d_name, "rank-%d.%15s", &x, tail) != 2 || x < 0 || strcmp(tail, ext))
      continue;
    if (n == cap) {
      int *m = realloc(r, sizeof *r * (size_t)(cap = cap ? cap * 2 : 256));
      if (!m) {
        free(r);
        closedir(d);
        errno = ENOMEM;
        return -1;
      }
      r = m;
    }
    r[n++] = x;
  }
  closedir(d);
  if (n)
    qsort(r, (size_t)n, sizeof *r, cmp_int);
  *ranks = r;
  return n;
}

/* Returns how many crash-dump rings were imported. */
static int import_rings(sqlite3 *db, const char *dir, dist_trace_merge_report *rep) {
  int *ranks;
  int n = list_ranks(dir, "ring", &ranks), imported = 0;
  for (int i = 0; i < n; i++) {
    char path[1200], err[256];
    snprintf(path, sizeof path, "%s/rank-%d.ring", dir, ranks[i]);
    if (tr_ring_import(db, path, ranks[i], err, sizeof err) != 0)
      skip(rep, path, err);
    else
      imported++;
  }
  free(ranks);
  return imported;
}

/* Appends the run lo..hi of ranks: "3", "3,4", or "3-9" from three on. */
static void put_run(sqlite3_str *s, int lo, int hi) {
  const char *sep = sqlite3_str_length(s) ? "," : "";
  if (hi - lo >= 2)
    sqlite3_str_appendf(s, "%s%d-%d", sep, lo, hi);
  else if (hi > lo)
    sqlite3_str_appendf(s, "%s%d,%d", sep, lo, hi);
  else
    sqlite3_str_appendf(s, "%s%d", sep, lo);
}

/* The merged ranks, runs folded ("0-1023", "0,1,3-7"): every one of them,
 * however many (sqlite3_free; NULL out of memory). */
static char *merged_ranks(sqlite3 *db) {
  sqlite3_str *s = sqlite3_str_new(db);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT rank FROM ranks ORDER BY rank", -1, &st, NULL) == SQLITE_OK) {
    int lo = -1, hi = -1;
    while (sqlite3_step(st) == SQLITE_ROW) {
      int r = sqlite3_column_int(st, 0);
      if (lo >= 0 && r == hi + 1) {
        hi = r;
        continue;
      }
      if (lo >= 0)
        put_run(s, lo, hi);
      lo = hi = r;
    }
    if (lo >= 0)
      put_run(s, lo, hi);
    sqlite3_finalize(st);
  }
  return sqlite3_str_finish(s);
}

static void finish_meta(sqlite3 *db, const char *job, const dist_trace_merge_report *rep) {
  char *merged = merged_ranks(db);
  tr_meta_set(db, "schema_version", TR_SCHEMA_VERSION_STR);
  tr_meta_set(db, "kind", "merged");
  tr_meta_set(db, "job_id", job);
  tr_meta_set(db, "merged_ranks", merged ? merged : "");
  sqlite3_free(merged);
  tr_meta_set(db, "skipped_files", rep->skipped);
  tr_exec(db,
          "UPDATE ranks SET end_state = 'lost' WHERE end_state = 'running';"
          "UPDATE job SET started_ns = (SELECT min(init_ns + clock_offset_ns) FROM ranks),"
          " ended_ns = max(coalesce((SELECT max(coalesce(t_ended_ns, t_started_ns, t_enqueued_ns))"
          " FROM operations), 0), coalesce((SELECT max(t_ns) FROM events), 0));",
          NULL, 0);
}

static int open_out(const char *tmp, sqlite3 **db, char *err, size_t errlen) {
  unlink(tmp);
  int fd = open(tmp, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == ENOSPC || errno == EDQUOT))
    return no_space(tmp, err, errlen);
  if (fd < 0) {
    seterr(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    return DIST_E_SYS;
  }
  close(fd);
  char e[256] = "";
  /* URIs: a rank file in a read-only place is attached with immutable=1 */
  if (sqlite3_open_v2(tmp, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL) != SQLITE_OK ||
      sqlite3_busy_timeout(*db, MERGE_BUSY_MS) != SQLITE_OK || /* the ATTACHed rank files */
      tr_exec(*db, MERGE_PRAGMAS, e, sizeof e) || tr_schema_create(*db, false, e, sizeof e) ||
      tr_exec(*db, MERGE_EARLY_INDEX, e, sizeof e)) {
    if (*db && disk_full(*db))
      no_space(tmp, err, errlen);
    else
      seterr(err, errlen, "%s: %s", tmp, e[0] ? e : sqlite3_errmsg(*db));
    sqlite3_close(*db);
    *db = NULL;
    unlink(tmp);
    return DIST_E_SYS;
  }
  return DIST_OK;
}

/* Attaches the rank file at path, which chk checked (tr_checker), as src:
 * where it lies, or from a copy beside out (*aside) when it cannot be read
 * in place (rank_aside.c). The first good file names the job; a file of
 * another job is skipped. 0, or -1 with why filled. */
static int attach_rank(sqlite3 *db, const char *path, int rank, const tr_check_result *chk,
                       const char *out, char *job, size_t joblen, tr_aside *aside, char *why,
                       size_t whylen) {
  const char *from = path;
  aside->path[0] = '\0';
  tr_check_result c = *chk;
  if (c.rc != 0) {
    snprintf(why, whylen, "%s", c.why);
    char e[600];
    if (c.rc != TR_CHECK_CANNOT_OPEN || access(path, R_OK) != 0)
      return -1;
    if (tr_aside_copy(path, out, aside, e, sizeof e) != DIST_OK) {
      size_t n = strlen(why);
      snprintf(why + n, whylen - n, "; reading a copy failed too: %s", e);
      return -1;
    }
    from = aside->path;
    if (tr_check_rank_file(from, rank, MERGE_BUSY_MS, &c) != 0) {
      snprintf(why, whylen, "%s (read from a copy, as it cannot be read in place)", c.why);
      return -1;
    }
  }
  if (job[0] && strcmp(job, c.job) != 0) {
    snprintf(why, whylen, "belongs to job %s, not %s", c.job, job);
    return -1;
  }
  snprintf(job, joblen, "%s", c.job);
  char *uri = tr_uri(from, c.immutable);
  char *att = uri ? sqlite3_mprintf("ATTACH %Q AS src", uri) : NULL;
  snprintf(why, whylen, "out of memory");
  /* ATTACH and DETACH only outside a transaction */
  int rc = att ? tr_exec(db, att, why, whylen) : -1;
  sqlite3_free(att);
  sqlite3_free(uri);
  return rc;
}

/* Copies every rank file into db (out: its path, beside which a rank
 * file that cannot be read in place is copied); -1 when the disk filled
 * up (the merge cannot go on), 0 otherwise (bad files are skipped and
 * reported). */
static int copy_ranks(sqlite3 *db, const char *out, const char *job_dir, const int *ranks, int n,
                      char *job, size_t joblen, dist_trace_merge_report *rep) {
  tr_checker *ck = tr_checker_start(job_dir, ranks, n, MERGE_BUSY_MS);
  for (int i = 0; i < n; i++) {
    char path[1200], why[1800];
    tr_aside aside;
    tr_check_result chk;
    snprintf(path, sizeof path, "%s/rank-%d.db", job_dir, ranks[i]);
    if (ck)
      tr_checker_take(ck, i, &chk);
    else
      tr_check_rank_file(path, ranks[i], MERGE_BUSY_MS, &chk);
    int rc = attach_rank(db, path, ranks[i], &chk, out, job, joblen, &aside, why, sizeof why);
    if (rc == 0) {
      tr_exec(db, "BEGIN", NULL, 0);
      rc = copy_rank(db, ranks[i], rep->ranks_merged == 0, why, sizeof why);
      if (rc == 0) /* the end its file could not take (end_note.c) */
        rc = tr_end_note_apply(db, job_dir, ranks[i], why, sizeof why);
      if (rc == 0)
        rc = tr_exec(db, "COMMIT", why, sizeof why); // the pages reach the disk here
      bool full = rc != 0 && disk_full(db);
      if (rc != 0)
        tr_exec(db, "ROLLBACK", NULL, 0);
      tr_exec(db, "DETACH src", NULL, 0);
      if (full) {
        tr_aside_remove(&aside);
        tr_checker_stop(ck);
        return -1;
      }
    }
    tr_aside_remove(&aside);
    if (rc != 0) {
      skip(rep, path, why);
      continue;
    }
    rep->ranks_merged++;
  }
  tr_checker_stop(ck);
  return 0;
}

/* Indexes, ring dumps, summaries, call sites and meta; DIST_OK or an error in err. */
static int finish(sqlite3 *db, const char *job_dir, const char *tmp, char *job, size_t joblen,
                  dist_trace_merge_report *rep, char *err, size_t errlen) {
  char e[256] = "";
  if (tr_schema_indexes(db, e, sizeof e) != 0) {
    if (disk_full(db))
      return no_space(tmp, err, errlen);
    /* two files with the same operation: a copied or foreign rank file */
    seterr(err, errlen, "building indexes: %s", e);
    return DIST_E_INVAL;
  }
  import_rings(db, job_dir, rep);
  if (disk_full(db))
    return no_space(tmp, err, errlen);
  tr_exec(db, "BEGIN", NULL, 0);
  /* after the rings: their rows count. Best effort: without the summaries
   * distview reads every operation, with the same answers; op_totals, which
   * the summary writes too, is counted in SQL then. */
  if (tr_summary_build(db, NULL, 0) != 0)
    tr_op_totals_build(db);
  tr_callsites_symbolise(db); /* best effort: unreadable modules stay NULL */
  if (!job[0]) { /* no rank file: the directory names the job */
    const char *slash = strrchr(job_dir, '/');
    snprintf(job, joblen, "%s", slash && slash[1] ? slash + 1 : job_dir);
  }
  finish_meta(db, job, rep);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT count(*) FROM operations", -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      rep->operations = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  if (tr_exec(db, "COMMIT", e, sizeof e) != 0) {
    if (disk_full(db))
      return no_space(tmp, err, errlen);
    seterr(err, errlen, "%s: %s", tmp, e);
    return DIST_E_SYS;
  }
  return DIST_OK;
}

int dist_trace_merge(const char *job_dir, const char *out_path, dist_trace_merge_report *rep,
                     char *err, size_t errlen) {
  dist_trace_merge_report local;
  rep = rep ? rep : &local;
  memset(rep, 0, sizeof *rep);
  if (!job_dir || !out_path) {
    seterr(err, errlen, "dist_trace_merge: a job directory and an output path are needed");
    return DIST_E_INVAL;
  }
  int *ranks;
  int n = list_ranks(job_dir, "db", &ranks);
  if (n < 0) {
    seterr(err, errlen, "cannot read %s: %s", job_dir, strerror(errno));
    return DIST_E_SYS;
  }
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
  int slot = tr_temp_hold(tmp); /* a signal during the merge removes it */
  sqlite3 *db;
  int rc = open_out(tmp, &db, err, errlen);
  if (rc != DIST_OK) {
    tr_temp_release(slot);
    free(ranks);
    return rc;
  }
  char job[128] = "";
  if (copy_ranks(db, tmp, job_dir, ranks, n, job, sizeof job, rep) != 0)
    rc = no_space(tmp, err, errlen);
  free(ranks);
  if (rc == DIST_OK)
    rc = finish(db, job_dir, tmp, job, sizeof job, rep, err, errlen);
  sqlite3_close(db);
  if (rc == DIST_OK && rename(tmp, out_path) != 0) {
    seterr(err, errlen, "cannot rename %s to %s: %s", tmp, out_path, strerror(errno));
    rc = DIST_E_SYS;
  }
  if (rc != DIST_OK)
    unlink(tmp);
  tr_temp_release(slot);
  return rc;
}
