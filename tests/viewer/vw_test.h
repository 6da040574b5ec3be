/* vw_test.h - helpers shared by the viewer's suites: a fixture story in a
 * fresh temporary directory, and finding lines on a rendered screen. */
#ifndef DIST_VW_TEST_H
#define DIST_VW_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace_fixture.h"
#include "vw_ui.h"
#include "tmpdir.h"

/* A path "<fresh temp dir>/name" (the directory lives until the process ends). */
static inline const char *vwt_path(const char *name) {
  static char dir[64];
  static char path[4][256];
  static int next;
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/vwtest-XXXXXX");
    if (!dist_test_mkdtemp(dir))
      abort();
  }
  char *p = path[next++ % 4];
  snprintf(p, 256, "%s/%s", dir, name);
  return p;
}

/* The first screen line containing s, copied into buf; NULL when none. */
static inline const char *vwt_line_with(vw_app *a, const char *s, char *buf, size_t len) {
  for (int y = 0; y < a->canvas.rows; y++)
    if (strstr(vw_app_line(a, y, buf, len), s))
      return buf;
  return NULL;
}

static inline void vwt_dump(vw_app *a) {
  vw_canvas_dump(&a->canvas, stderr);
}

#endif
