/* reader_kin.c - which groups are of one kind: the SQL function
 * dist_kin(description, members) the trace readers compare groups by.
 *
 * A group's kind is its description when it has one ("dp", "tp", "pp":
 * a mesh's dimension, the program's name for it). Groups made without one
 * (dist_new_group with no options) are all described '' in the trace, and
 * compared by that they would be one kind: every dp pair and every tp pair
 * of a mesh made by hand, whose calls differ. Their kind is then their
 * shape: the size and the steps between consecutive members ({3,7} is
 * "n=2 d=4" as {0,4} is; {2,3} is "n=2 d=1"), which tells the data-parallel
 * pairs of a mesh from its tensor-parallel ones, and the stages of two
 * pipelines apart from each other's groups. */
#include "reader_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIN_LEN 256 /* a shape longer than this is cut (it stays one kind) */

static void kin(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const char *desc = (const char *)sqlite3_value_text(argv[0]);
  const char *m = (const char *)sqlite3_value_text(argv[1]);
  if (desc && *desc) {
    sqlite3_result_text(ctx, desc, -1, SQLITE_TRANSIENT);
    return;
  }
  char out[KIN_LEN];
  size_t off = 0;
  long prev = 0;
  int n = 0;
  for (const char *s = m && *m == '[' ? m + 1 : ""; *s && *s != ']';) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s)
      break;
    if (n++ && off < sizeof out)
      off += (size_t)snprintf(out + off, sizeof out - off, "%s%ld", n == 2 ? " d=" : ",",
                              v - prev);
    prev = v;
    s = *end == ',' ? end + 1 : end;
  }
  char key[KIN_LEN + 32];
  snprintf(key, sizeof key, "n=%d%s", n, off < sizeof out ? (out[off] = '\0', out) : out);
  sqlite3_result_text(ctx, key, -1, SQLITE_TRANSIENT);
}

int tr_kin_register(sqlite3 *db) {
  return sqlite3_create_function(db, "dist_kin", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                 kin, NULL, NULL);
}
