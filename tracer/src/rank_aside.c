/* rank_aside.c - a rank file that cannot be read where it lies, read from
 * a copy.
 *
 * A rank file is a WAL database. When its rank ended on a full disk (or
 * was killed), rows are still in its `-wal`, and SQLite reads them only
 * through a `-shm` index it must create or grow beside the file: on a full
 * disk that fails ("disk I/O error"), in a read-only place too ("unable
 * to open database file"). The merge then copies the file and its -wal
 * next to its own output, whose disk it is writing anyway, and reads the
 * copy; the copies (and the -shm SQLite makes for them) are armed for
 * dist_trace_remove_temps, so a signal leaves none behind. */
#define _GNU_SOURCE
#include "reader_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const sides[TR_ASIDE_FILES] = {"", "-wal", "-shm"};

/* Copies from to to (created, 0600); 0 or an errno. A missing from is
 * no error when may_lack (a file whose rows are all in its main file has
 * no -wal). */
static int copy_file(const char *from, const char *to, bool may_lack) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return may_lack && errno == ENOENT ? 0 : errno;
  int out = open(to, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (out < 0) {
    int e = errno;
    close(in);
    return e;
  }
  int e = 0;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      e = n < 0 ? errno : 0;
      break;
    }
    for (ssize_t done = 0; done < n && !e;) {
      ssize_t w = write(out, buf + done, (size_t)(n - done));
      if (w < 0 && errno != EINTR)
        e = errno;
      done += w > 0 ? w : 0;
    }
    if (e)
      break;
  }
  close(in);
  if (close(out) != 0 && !e)
    e = errno;
  return e;
}

int tr_aside_copy(const char *path, const char *near, tr_aside *a, char *err, size_t errlen) {
  for (int i = 0; i < TR_ASIDE_FILES; i++)
    a->slot[i] = -1;
  if ((size_t)snprintf(a->path, sizeof a->path, "%s.rank-copy-%d", near, (int)getpid()) >=
      sizeof a->path - 8) {
    snprintf(err, errlen, "the path of its copy beside %s is too long", near);
    return DIST_E_INVAL;
  }
  char from[sizeof a->path + 8], to[sizeof a->path + 8];
  for (int i = 0; i < TR_ASIDE_FILES; i++) {
    snprintf(to, sizeof to, "%s%s", a->path, sides[i]);
    unlink(to); /* a copy an earlier merge of this process left */
    a->slot[i] = tr_temp_hold(to); /* armed before it exists */
  }
  for (int i = 0; i < 2; i++) { /* the file and its -wal; never the -shm */
    snprintf(from, sizeof from, "%s%s", path, sides[i]);
    snprintf(to, sizeof to, "%s%s", a->path, sides[i]);
    int e = copy_file(from, to, i > 0);
    if (e) {
      snprintf(err, errlen, "copying it to %s: %s", to, strerror(e));
      tr_aside_remove(a);
      return DIST_E_SYS;
    }
  }
  return DIST_OK;
}

void tr_aside_remove(tr_aside *a) {
  if (!a->path[0])
    return; /* none, or removed already */
  char p[sizeof a->path + 8];
  for (int i = 0; i < TR_ASIDE_FILES; i++) {
    snprintf(p, sizeof p, "%s%s", a->path, sides[i]);
    unlink(p);
    tr_temp_release(a->slot[i]);
    a->slot[i] = -1;
  }
  a->path[0] = '\0';
}
