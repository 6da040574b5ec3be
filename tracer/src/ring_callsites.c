/* ring_callsites.c - the call sites of a ring dump, placed in their modules.
 *
 * A rank's writer names a call site (module, offset from where the module
 * is mapped) when it first commits a record made there (trace_sink.c,
 * dladdr in the rank's own process). A ring dumped from a signal handler
 * holds bare return addresses, so a record its writer had not committed
 * (a writer that lagged, DIST_TRACE_COMMIT_MS) came into the merge with no
 * call site: a rank ended by SIGTERM while its peers were blocked named no
 * line. The handler also copies the process's /proc/self/maps
 * (rank-<R>.maps, tracer_crash.c); here each address is looked up in it:
 * the module is the file mapped over the call, the offset is from that
 * file's lowest mapping (dladdr's dli_fbase), so callsite_sym.c gives it
 * its function, file and line as any other. An address the rank file
 * already named keeps that id. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader_int.h"

typedef struct mapping {
  uint64_t start, end;
  char *path;
} mapping;

typedef struct maps {
  mapping *m;
  size_t n;
} maps;

static void maps_free(maps *ms) {
  for (size_t i = 0; i < ms->n; i++)
    free(ms->m[i].path);
  free(ms->m);
  ms->m = NULL;
  ms->n = 0;
}

/* The file-backed mappings of the dump's maps file; none when it is
 * missing or unreadable (the call sites then stay bare addresses). */
static void maps_load(const char *path, maps *ms) {
  FILE *f = fopen(path, "r");
  char line[4352];
  size_t cap = 0;
  while (f && fgets(line, sizeof line, f)) {
    uint64_t lo, hi;
    int at = 0;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %n", &lo, &hi, &at) != 2 ||
        at <= 0 || line[at] != '/')
      continue;
    line[strcspn(line, "\n")] = '\0';
    if (ms->n == cap) {
      mapping *g = realloc(ms->m, (cap = cap ? cap * 2 : 64) * sizeof *g);
      if (!g)
        break;
      ms->m = g;
    }
    char *p = strdup(line + at);
    if (!p)
      break;
    ms->m[ms->n++] = (mapping){lo, hi, p};
  }
  if (f)
    fclose(f);
}

/* The module over addr (a return address: the call is the byte before)
 * and addr's offset from the module's lowest mapping; false if none. */
static bool place(const maps *ms, uint64_t addr, const char **module, int64_t *offset) {
  const mapping *hit = NULL;
  for (size_t i = 0; i < ms->n && !hit; i++)
    if (addr - 1 >= ms->m[i].start && addr - 1 < ms->m[i].end)
      hit = &ms->m[i];
  if (!hit)
    return false;
  uint64_t base = hit->start;
  for (size_t i = 0; i < ms->n; i++)
    if (ms->m[i].start < base && !strcmp(ms->m[i].path, hit->path))
      base = ms->m[i].start;
  *module = hit->path;
  *offset = (int64_t)(addr - base);
  return true;
}

/* The id main.callsites gives (rank, addr): the rank file's, or a new row
 * placed by the maps; -1 on an error. */
static int64_t merged_id(sqlite3 *db, int rank, uint64_t addr, const maps *ms) {
  sqlite3_stmt *st;
  int64_t id = -1;
  if (sqlite3_prepare_v2(db, "SELECT callsite_id FROM main.callsites WHERE rank = ?1 AND"
                             " address = ?2 UNION ALL SELECT coalesce(max(callsite_id) + 1, 0)"
                             " FROM main.callsites WHERE rank = ?1", -1, &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int64(st, 2, (int64_t)addr);
  bool known = false;
  if (sqlite3_step(st) == SQLITE_ROW) {
    id = sqlite3_column_int64(st, 0);
    /* two rows: the first is the rank file's own id */
    known = sqlite3_step(st) == SQLITE_ROW;
  }
  sqlite3_finalize(st);
  if (known || id < 0)
    return id;
  const char *module = NULL;
  int64_t offset = 0;
  bool placed = place(ms, addr, &module, &offset);
  if (sqlite3_prepare_v2(db, "INSERT INTO main.callsites (rank, callsite_id, address, module,"
                             " offset) VALUES (?1, ?2, ?3, ?4, ?5)", -1, &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_int64(st, 2, id);
  sqlite3_bind_int64(st, 3, (int64_t)addr);
  placed ? sqlite3_bind_text(st, 4, module, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 4);
  placed ? sqlite3_bind_int64(st, 5, offset) : sqlite3_bind_null(st, 5);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? id : -1;
}

int tr_ring_callsites(sqlite3 *db, int rank, const char *maps_path) {
  if (tr_exec(db, "CREATE TEMP TABLE IF NOT EXISTS ring_cs(old INTEGER PRIMARY KEY, new"
                  " INTEGER); DELETE FROM temp.ring_cs", NULL, 0))
    return -1;
  maps ms = {0};
  maps_load(maps_path, &ms);
  sqlite3_stmt *q = NULL, *ins = NULL;
  int rc = -1;
  if (sqlite3_prepare_v2(db, "SELECT callsite_id, address FROM rs.callsites", -1, &q, NULL) ||
      sqlite3_prepare_v2(db, "INSERT INTO temp.ring_cs VALUES (?1, ?2)", -1, &ins, NULL))
    goto out;
  while (sqlite3_step(q) == SQLITE_ROW) {
    int64_t id = merged_id(db, rank, (uint64_t)sqlite3_column_int64(q, 1), &ms);
    if (id < 0)
      goto out;
    sqlite3_bind_int64(ins, 1, sqlite3_column_int64(q, 0));
    sqlite3_bind_int64(ins, 2, id);
    if (sqlite3_step(ins) != SQLITE_DONE)
      goto out;
    sqlite3_reset(ins);
  }
  rc = 0;
out:
  sqlite3_finalize(q);
  sqlite3_finalize(ins);
  maps_free(&ms);
  return rc;
}
