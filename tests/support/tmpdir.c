/* tmpdir.c - temporary directories removed at the exit of the process that
 * made them. A test that fails an assertion ends without its own cleanup,
 * and every run of the suite used to leave ~130 directories in /tmp. */
#include "tmpdir.h"

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DIRS 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char dirs[MAX_DIRS][256];
static pid_t owner[MAX_DIRS];
static int ndirs;

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void remove_all(void) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < ndirs; i++)
    if (owner[i] == getpid())
      nftw(dirs[i], remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  ndirs = 0;
  pthread_mutex_unlock(&mu);
}

char *dist_test_mkdtemp(char *tmpl) {
  if (!mkdtemp(tmpl))
    return NULL;
  pthread_mutex_lock(&mu);
  static int registered;
  if (!registered)
    registered = atexit(remove_all) == 0;
  if (ndirs < MAX_DIRS && strlen(tmpl) < sizeof dirs[0]) {
    snprintf(dirs[ndirs], sizeof dirs[0], "%s", tmpl);
    owner[ndirs++] = getpid();
  }
  pthread_mutex_unlock(&mu);
  return tmpl;
}
