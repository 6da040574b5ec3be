/* distrun_output.c - each rank's stdout and stderr: split into lines,
 * prefixed with the rank ("[3] ..."), shown on distrun's own stdout and
 * stderr, and/or written to per-rank log files.
 *
 * Each line goes out in one writev, so lines of different ranks never mix
 * on the terminal. A line longer than LINE_CAP bytes is cut into pieces of
 * LINE_CAP, each shown as a line; an unfinished last line is shown at EOF
 * with a newline added. Log files (--log-dir DIR: DIR/rank-R.out and
 * DIR/rank-R.err) get the bytes exactly as the rank wrote them, without
 * prefixes; with --log-dir the terminal shows nothing unless --tee.
 * torchrun's --redirects and --tee pick the streams (1 stdout, 2 stderr, 3
 * both), and --local-ranks-filter the local ranks the terminal shows. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "distrun.h"

#define LINE_CAP 65536
#define CHUNK 16384
#define READS_PER_PUMP 4 /* then let other ranks' streams have a turn */

/* Writes every byte (a terminal or log may take them in pieces). A closed
 * terminal (EPIPE) drops the output rather than ending the job. */
static void write_iov(int fd, struct iovec *iov, int n) {
  while (n > 0) {
    ssize_t w = writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN) {
        struct pollfd p = {fd, POLLOUT, 0};
        poll(&p, 1, 1000);
        continue;
      }
      return;
    }
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
}

static void emit_line(const drun_cfg *c, int rank, int fd, const char *data, size_t len) {
  char prefix[24];
  int pl = c->prefix ? snprintf(prefix, sizeof prefix, "[%d] ", rank) : 0;
  struct iovec iov[3] = {
      {prefix, (size_t)(pl > 0 ? pl : 0)},
      {(void *)data, len},
      {"\n", 1},
  };
  write_iov(fd, iov, 3);
}

/* Splits new bytes into lines for the terminal. */
static void feed(const drun_cfg *c, int rank, drun_stream *s, const char *p, size_t n) {
  while (n > 0) {
    const char *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) : n;
    if (s->len == 0 && nl && take <= LINE_CAP) {
      emit_line(c, rank, s->term_fd, p, take); /* whole line: no copy */
    } else {
      size_t room = LINE_CAP - s->len;
      size_t copy = take < room ? take : room;
      memcpy(s->buf + s->len, p, copy);
      s->len += copy;
      if (copy < take || (nl && copy == take) || s->len == LINE_CAP) {
        emit_line(c, rank, s->term_fd, s->buf, s->len);
        s->len = 0;
      }
      if (copy < take) { /* the rest of an overlong line comes round again */
        p += copy;
        n -= copy;
        continue;
      }
    }
    p += take + (nl ? 1 : 0);
    n -= take + (nl ? 1 : 0);
  }
}

static int open_log(const drun_cfg *c, int rank, const char *ext) {
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%d.%s", c->log_dir, rank, ext);
  return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/* bit: 1 stdout, 2 stderr (torchrun's --redirects/--tee masks). */
static int open_one(const drun_cfg *c, int rank, drun_stream *s, int term, const char *ext,
                    int bit) {
  bool to_file = c->log_dir && (c->redirects & bit);
  int local = rank - c->node_rank * c->nproc;
  bool shown = !c->ranks_filter || (local < 64 && (c->ranks_filter >> local) & 1);
  s->len = 0;
  s->log_fd = -1;
  s->term_fd = shown && (!to_file || (c->tee & bit)) ? term : -1;
  s->buf = NULL;
  if (s->term_fd >= 0 && !(s->buf = dist__malloc(LINE_CAP)))
    return ENOMEM;
  if (to_file && (s->log_fd = open_log(c, rank, ext)) < 0)
    return errno;
  return 0;
}

int dist__run_output_open(const drun_cfg *c, int rank, drun_stream *out,
                          drun_stream *err) {
  int e = open_one(c, rank, out, STDOUT_FILENO, "out", 1);
  return e ? e : open_one(c, rank, err, STDERR_FILENO, "err", 2);
}

bool dist__run_output_pump(const drun_cfg *c, int rank, drun_stream *s) {
  char chunk[CHUNK];
  for (int i = 0; i < READS_PER_PUMP; i++) {
    ssize_t n = read(s->fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return true;
    if (n <= 0)
      return false;
    if (s->log_fd >= 0) {
      struct iovec iov = {chunk, (size_t)n};
      write_iov(s->log_fd, &iov, 1);
    }
    if (s->term_fd >= 0)
      feed(c, rank, s, chunk, (size_t)n);
  }
  return true;
}

void dist__run_output_close(const drun_cfg *c, int rank, drun_stream *s) {
  if (s->term_fd >= 0 && s->len > 0)
    emit_line(c, rank, s->term_fd, s->buf, s->len);
  s->len = 0;
  dist__free(s->buf);
  s->buf = NULL;
  if (s->fd >= 0)
    close(s->fd);
  if (s->log_fd >= 0)
    close(s->log_fd);
  s->fd = s->log_fd = -1;
}
