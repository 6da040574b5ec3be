/* vw_sql.h - small SQLite helpers the viewer's SQL files share: column
 * reads that map NULL to -1 or "", and a prepare that keeps SQLite's
 * message on the model (first error wins until the next call clears it). */
#ifndef DIST_VW_SQL_H
#define DIST_VW_SQL_H

#include <sqlite3.h>

#include "vw.h"

/* Column i as text into out (NUL-terminated, cut to len), "" for NULL. */
void vw_sql_text(sqlite3_stmt *st, int i, char *out, size_t len);
/* Column i as int64, -1 for NULL. */
int64_t vw_sql_i64(sqlite3_stmt *st, int i);
/* Prepares sql on m->db; on failure writes m->err and returns NULL. */
sqlite3_stmt *vw_sql_prepare(vw_model *m, const char *sql);
/* Steps a statement to its end or error; records the error on m. Returns
 * SQLITE_ROW, SQLITE_DONE, or -1 on error. */
int vw_sql_step(vw_model *m, sqlite3_stmt *st);
/* A single int64 from a query with one int parameter per '?', -1 if none. */
int64_t vw_sql_scalar(vw_model *m, const char *sql, int nargs, const int64_t *args);

/* A 'gpu' event's time on the GPU, from its message "gpu_ns=N" (SCHEMA.md). */
#define VW_SQL_GPU_NS "CAST(substr(message, 8) AS INTEGER)"

#endif
