/* json_out.h - a small JSON writer over a FILE or a growing buffer, for the
 * exporters (Chrome trace, OTLP/JSON). Strings are escaped per RFC 8259. */
#ifndef DIST_TRACE_JSON_OUT_H
#define DIST_TRACE_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct jout {
  FILE *f;        /* FILE mode, or NULL: buffer mode */
  char *buf;
  size_t len, cap;
  bool oom;
} jout;

void jo_raw(jout *j, const char *s, size_t n);
void jo_puts(jout *j, const char *s);
void jo_printf(jout *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A quoted, escaped string (NULL writes null). */
void jo_str(jout *j, const char *s);

#endif
