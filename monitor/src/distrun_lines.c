/* distrun_lines.c - whole lines out of a byte stream read in pieces.
 *
 * The watcher thread writes each event as one line in one write, but the
 * supervisor reads the pipe in chunks: a chunk may end inside a line, whose
 * rest comes with the next read. The unfinished tail stays in the buffer
 * until its newline arrives. */
#include <string.h>

#include "distrun.h"

void dist__run_take_lines(char *buf, size_t *len, size_t cap, void (*fn)(void *, char *),
                          void *arg) {
  size_t start = 0;
  for (size_t i = 0; i < *len; i++) {
    if (buf[i] != '\n')
      continue;
    buf[i] = '\0';
    if (i > start)
      fn(arg, buf + start);
    start = i + 1;
  }
  size_t rest = *len - start;
  if (rest + 1 >= cap) { /* a line longer than the buffer: pass it as it is */
    buf[*len] = '\0';
    fn(arg, buf + start);
    rest = 0;
  }
  memmove(buf, buf + start, rest);
  *len = rest;
}
