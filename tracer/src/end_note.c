/* end_note.c - the end of a rank whose trace file could not take it.
 *
 * A rank keeps 64 KiB aside at open (rank-<R>.reserve, fallocated). When
 * its disk is still full at the end, the writer cannot commit the rank's
 * end state and its count of dropped records; freeing that space for them
 * raced with the other ranks' writers on the same disk, which could take
 * it first (the merged trace then called a rank that finished 'lost'). So
 * the end is written over the first bytes of the kept space instead, which
 * needs no new block, and the merge applies it:
 *
 *   libdist-end 1 <end_state> <dropped records> <t_ns>\n<why>\n
 *
 * t_ns on the rank's clock. A reserve whose first bytes are not such a
 * note (the zeros of a rank killed before its end) is ignored. */
#include "reader_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NOTE_MAX 512

int tr_end_note_write(const char *reserve, const tr_end_note *n) {
  char line[NOTE_MAX];
  int len = snprintf(line, sizeof line, "libdist-end 1 %s %" PRIu64 " %" PRId64 "\n%s\n",
                     n->end_state, n->dropped, n->t_ns, n->why);
  if (len < 0 || (size_t)len >= sizeof line)
    len = (int)sizeof line - 1;
  int fd = open(reserve, O_WRONLY | O_CLOEXEC); /* never O_TRUNC: the kept blocks stay */
  if (fd < 0)
    return -1;
  bool ok = pwrite(fd, line, (size_t)len, 0) == len;
  ok = close(fd) == 0 && ok;
  return ok ? 0 : -1;
}

int tr_end_note_read(const char *reserve, tr_end_note *n) {
  memset(n, 0, sizeof *n);
  int fd = open(reserve, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  char buf[NOTE_MAX];
  ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  if (got <= 0)
    return -1;
  buf[got] = '\0';
  int used = 0;
  if (sscanf(buf, "libdist-end 1 %15s %" SCNu64 " %" SCNd64 "\n%n", n->end_state, &n->dropped,
             &n->t_ns, &used) != 3 || used == 0)
    return -1;
  static const char *const states[] = {"finished", "exited", "crashed"};
  bool known = false;
  for (size_t i = 0; i < sizeof states / sizeof *states; i++)
    known |= !strcmp(n->end_state, states[i]);
  if (!known)
    return -1;
  const char *why = buf + used;
  size_t wl = strcspn(why, "\n");
  snprintf(n->why, sizeof n->why, "%.*s", (int)(wl < sizeof n->why ? wl : sizeof n->why - 1),
           why);
  return 0;
}

int tr_end_note_apply(sqlite3 *db, const char *job_dir, int rank, char *err, size_t errlen) {
  char path[4200];
  tr_end_note n;
  snprintf(path, sizeof path, "%s/rank-%d.reserve", job_dir, rank);
  if (tr_end_note_read(path, &n) != 0)
    return 0;
  char *sql = sqlite3_mprintf(
      "INSERT INTO main.events SELECT rank, NULL, NULL, 'trace_write_failed', %lld +"
      " clock_offset_ns, %lld, NULL, %Q FROM main.ranks WHERE rank = %d"
      " AND (end_state = 'running' OR dropped_records < %lld);"
      "UPDATE main.ranks SET end_state = CASE end_state WHEN 'running' THEN %Q"
      " ELSE end_state END, dropped_records = max(dropped_records, %lld) WHERE rank = %d;",
      (long long)n.t_ns, (long long)n.dropped, n.why, rank, (long long)n.dropped, n.end_state,
      (long long)n.dropped, rank);
  int rc = sql ? tr_exec(db, sql, err, errlen) : -1;
  if (!sql)
    snprintf(err, errlen, "out of memory");
  sqlite3_free(sql);
  return rc;
}
