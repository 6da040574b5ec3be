/* reader_files.c - the files the reader library touches besides its
 * output: trace stores opened read-only wherever they lie, the checks
 * that make a SQLite file a trace store, and the temporary files of a
 * merge, which a signal must not leave behind.
 *
 * Read-only places. A rank file is a WAL database, and SQLite opens a WAL
 * database read-only only when it can create (or already finds) the
 * `-shm` file beside it. In a read-only mount, or another user's
 * directory, it cannot: "unable to open database file". A WAL database
 * with no `-wal` file (or an empty one) holds every row in the main file,
 * so it is then opened with `immutable=1`, which needs no `-shm`. One with
 * rows still in its `-wal` cannot be read that way without losing them:
 * that case is refused here with a sentence saying what to do (a merge
 * then reads a copy, rank_aside.c).
 *
 * Temporary files. A merge writes `<out>.tmp` and renames it; opening a
 * job directory merges into a file in $TMPDIR (or /tmp). Both are held in
 * a small table of paths that dist_trace_remove_temps() unlinks; it is
 * async-signal-safe, so a program's signal handler calls it (distview
 * does, for SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE). */
#define _GNU_SOURCE
#include "reader_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- read-only opening ----------------------------------------------------- */

char *tr_uri(const char *path, bool immutable) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(path);
  char *esc = sqlite3_malloc64(n * 3 + 1);
  if (!esc)
    return NULL;
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        strchr("/._-~", *p)) {
      esc[k++] = (char)*p;
    } else {
      esc[k++] = '%';
      esc[k++] = hex[*p >> 4];
      esc[k++] = hex[*p & 15];
    }
  }
  esc[k] = '\0';
  char *uri = sqlite3_mprintf("file:%s%s", esc, immutable ? "?immutable=1" : "?mode=ro");
  sqlite3_free(esc);
  return uri;
}

/* SQLite reads a database lazily: the first statement is what fails. */
static int probe(sqlite3 *db) {
  return sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
}

static int open_uri(const char *path, bool immutable, sqlite3 **db) {
  char *uri = tr_uri(path, immutable);
  if (!uri)
    return SQLITE_NOMEM;
  int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                           NULL);
  sqlite3_free(uri);
  if (rc == SQLITE_OK)
    rc = probe(*db);
  if (rc == SQLITE_OK)
    rc = tr_kin_register(*db); /* reader_kin.c */
  return rc;
}

/* Size of path's -wal file: 0 when there is none. */
static off_t wal_bytes(const char *path) {
  char wal[4200];
  struct stat st;
  if ((size_t)snprintf(wal, sizeof wal, "%s-wal", path) >= sizeof wal || stat(wal, &st) != 0)
    return 0;
  return st.st_size;
}

int tr_open_ro(const char *path, sqlite3 **db, bool *immutable, char *err, size_t errlen) {
  *db = NULL;
  if (immutable)
    *immutable = false;
  int rc = open_uri(path, false, db);
  if (rc == SQLITE_OK)
    return DIST_OK;
  /* CANTOPEN: the -shm cannot be made (a read-only place); READONLY: it
   * exists but cannot be written, and SQLite wants to recover it. */
  bool place = (rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_READONLY;
  if (place && access(path, R_OK) == 0) {
    off_t wal = wal_bytes(path);
    if (wal > 0) {
      snprintf(err, errlen, "%s: cannot be read in place: %lld bytes of it are still in %s-wal, "
               "which SQLite reads only with a %s-shm it can create here (a read-only place); "
               "copy the file with its -wal somewhere writable", path, (long long)wal, path,
               path);
      sqlite3_close(*db);
      *db = NULL;
      return DIST_E_SYS;
    }
    sqlite3_close(*db);
    *db = NULL;
    rc = open_uri(path, true, db);
    if (rc == SQLITE_OK) {
      if (immutable)
        *immutable = true;
      return DIST_OK;
    }
  }
  snprintf(err, errlen, "%s: %s", path, *db ? sqlite3_errmsg(*db) : sqlite3_errstr(rc));
  sqlite3_close(*db);
  *db = NULL;
  return (rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT ? DIST_E_INVAL
                                                                        : DIST_E_SYS;
}

int dist_trace_open_sqlite(const char *path, void **db, char *err, size_t errlen) {
  char local[8];
  if (!err) {
    err = local;
    errlen = sizeof local;
  }
  if (!path || !db) {
    snprintf(err, errlen, "dist_trace_open_sqlite: NULL argument");
    return DIST_E_INVAL;
  }
  sqlite3 *s = NULL;
  int rc = tr_open_ro(path, &s, NULL, err, errlen);
  *db = s;
  return rc;
}

/* --- what makes a trace store ------------------------------------------------ */

static bool has_table(sqlite3 *db, const char *name) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view')"
                             " AND name = ?", -1, &st, NULL) != SQLITE_OK)
    return false;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  bool yes = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return yes;
}

int tr_check_store(sqlite3 *db, const char *path, char *err, size_t errlen) {
  char v[64];
  if (!has_table(db, "meta") || tr_meta_get(db, "schema_version", v, sizeof v) != 0) {
    snprintf(err, errlen, "%s: %s", path,
             sqlite3_errcode(db) == SQLITE_CORRUPT || sqlite3_errcode(db) == SQLITE_NOTADB
                 ? "corrupt or truncated trace store"
                 : "not a libdist trace (no meta.schema_version)");
    return DIST_E_INVAL;
  }
  char *end;
  errno = 0;
  long ver = strtol(v, &end, 10);
  if (end == v || *end || errno || ver < 1) {
    snprintf(err, errlen, "%s: unreadable schema_version '%s'", path, v);
    return DIST_E_INVAL;
  }
  if (ver > TR_SCHEMA_VERSION) {
    snprintf(err, errlen, "%s: written with trace schema version %ld; this reader reads "
             "version %d (use a newer libdist)", path, ver, TR_SCHEMA_VERSION);
    return DIST_E_INVAL;
  }
  static const char *const tables[] = {"job", "ranks", "groups", "operations", "events"};
  for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
    if (!has_table(db, tables[i])) {
      snprintf(err, errlen, "%s: a SQLite database but not a libdist trace store (no %s "
               "table)", path, tables[i]);
      return DIST_E_INVAL;
    }
  return DIST_OK;
}

/* --- temporary files ----------------------------------------------------------- */

static int random_bytes(unsigned char *buf, size_t n) {
  return getrandom(buf, n, GRND_NONBLOCK) == (ssize_t)n ? 0 : -1;
}

const char *tr_tmpdir(void) {
  const char *d = getenv("TMPDIR");
  return d && *d ? d : "/tmp";
}

#define TEMP_SLOTS 16
#define TEMP_PATH 4200

static char temp_path[TEMP_SLOTS][TEMP_PATH];
static atomic_int temp_used[TEMP_SLOTS]; /* 0 free, 1 being filled, 2 armed */

int tr_temp_hold(const char *path) {
  if (strlen(path) >= TEMP_PATH)
    return -1;
  for (int i = 0; i < TEMP_SLOTS; i++) {
    int expect = 0;
    if (atomic_compare_exchange_strong(&temp_used[i], &expect, 1)) {
      memcpy(temp_path[i], path, strlen(path) + 1);
      atomic_store(&temp_used[i], 2); /* a handler sees the whole path or none */
      return i;
    }
  }
  return -1;
}

int tr_temp_create(const char *prefix, char *path, size_t len, int *slot) {
  *slot = -1;
  for (int tries = 0; tries < 100; tries++) {
    unsigned char r[6];
    if (random_bytes(r, sizeof r) != 0)
      return -1;
    if ((size_t)snprintf(path, len, "%s/%s-%02x%02x%02x%02x%02x%02x", tr_tmpdir(), prefix, r[0],
                         r[1], r[2], r[3], r[4], r[5]) >= len) {
      errno = ENAMETOOLONG;
      return -1;
    }
    /* armed before it exists: a signal between the two leaves nothing */
    *slot = tr_temp_hold(path);
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    int e = errno;
    tr_temp_release(*slot);
    *slot = -1;
    if (e != EEXIST) {
      errno = e;
      return -1;
    }
  }
  errno = EEXIST;
  return -1;
}

void tr_temp_release(int slot) {
  if (slot >= 0 && slot < TEMP_SLOTS)
    atomic_store(&temp_used[slot], 0);
}

void dist_trace_remove_temps(void) {
  int saved = errno; // a handler must leave errno as it found it
  for (int i = 0; i < TEMP_SLOTS; i++) {
    int armed = 2;
    if (atomic_compare_exchange_strong(&temp_used[i], &armed, 1)) {
      unlink(temp_path[i]);
      atomic_store(&temp_used[i], 0);
    }
  }
  errno = saved;
}
