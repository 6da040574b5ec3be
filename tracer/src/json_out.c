/* json_out.c - the exporters' JSON writer (json_out.h). */
#include "json_out.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void jo_raw(jout *j, const char *s, size_t n) {
  if (j->f) {
    fwrite(s, 1, n, j->f);
    return;
  }
  if (j->oom)
    return;
  if (j->len + n + 1 > j->cap) {
    size_t cap = j->cap ? j->cap : 4096;
    while (cap < j->len + n + 1)
      cap *= 2;
    char *b = realloc(j->buf, cap);
    if (!b) {
      j->oom = true;
      return;
    }
    j->buf = b;
    j->cap = cap;
  }
  memcpy(j->buf + j->len, s, n);
  j->len += n;
  j->buf[j->len] = '\0';
}

void jo_puts(jout *j, const char *s) { jo_raw(j, s, strlen(s)); }

void jo_printf(jout *j, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n < sizeof small) {
    jo_raw(j, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    j->oom = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  jo_raw(j, big, (size_t)n);
  free(big);
}

void jo_str(jout *j, const char *s) {
  if (!s) {
    jo_puts(j, "null");
    return;
  }
  jo_raw(j, "\"", 1);
  const char *run = s;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p >= 0x20 && *p != '"' && *p != '\\')
      continue;
    jo_raw(j, run, (size_t)((const char *)p - run));
    char esc[8];
    switch (*p) {
    case '"': jo_puts(j, "\\\""); break;
    case '\\': jo_puts(j, "\\\\"); break;
    case '\n': jo_puts(j, "\\n"); break;
    case '\t': jo_puts(j, "\\t"); break;
    case '\r': jo_puts(j, "\\r"); break;
    default:
      snprintf(esc, sizeof esc, "\\u%04x", *p);
      jo_puts(j, esc);
    }
    run = (const char *)p + 1;
  }
  jo_puts(j, run);
  jo_raw(j, "\"", 1);
}
