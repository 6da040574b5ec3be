/* netbed.c - the multi-host test bed from C (netbed.h): the bed's life
 * tied to the test process through a guardian, and jobs of one distrun
 * per host. Everything about namespaces, links and faults is done by
 * netbed.sh, so a person at a shell and a test build the same bed. */
#include "netbed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *netbed_script(void) {
  static char path[512];
  const char *src = getenv("DIST_TEST_SRC");
  snprintf(path, sizeof path, "%s/tests/multihost/netbed.sh", src ? src : ".");
  return path;
}

const char *netbed_addr(int k) {
  static char bufs[4][32];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, 32, "10.213.0.%d", k + 1);
  return b;
}

/* Runs argv, output into p (a fresh dist_proc); its status. */
static int run(dist_proc *p, const char *const *argv, int timeout_ms) {
  return dist_proc_run(p, argv, NULL, timeout_ms);
}

bool netbed_supported(char *why, size_t len) {
  if (geteuid() != 0) {
    snprintf(why, len, "the test bed needs root (network namespaces)");
    return false;
  }
  if (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0 &&
      access("/usr/bin/ip", X_OK) != 0) {
    snprintf(why, len, "the test bed needs iproute2 (apt-get install iproute2)");
    return false;
  }
  return true;
}

int netbed_sh(netbed *b, const char *sub, ...) {
  const char *argv[24] = {"/bin/bash", netbed_script(), sub, b->prefix};
  int n = 4;
  va_list ap;
  va_start(ap, sub);
  for (const char *a; n < 23 && (a = va_arg(ap, const char *));)
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  static dist_proc p;
  int st = run(&p, argv, 30000);
  if (st != 0)
    snprintf(b->err, sizeof b->err, "netbed.sh %s %s: status %d\n%.1500s%.2000s", sub,
             b->prefix, st, DIST_PROC_OUT(&p), DIST_PROC_ERR(&p));
  return st;
}

/* The guardian: `netbed.sh guard P` in its own session (ctest kills the
 * test's process group at a timeout), reading the pipe only we write. */
static int start_guard(netbed *b) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return -1;
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    setsid();
    dup2(fds[0], 0); /* dup2 clears close-on-exec on fd 0 */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
      dup2(null, 1);
    execl("/bin/bash", "bash", netbed_script(), "guard", b->prefix, (char *)NULL);
    _exit(127);
  }
  close(fds[0]);
  b->guard_fd = fds[1];
  b->guard_pid = pid;
  return 0;
}

int netbed_up(netbed *b, int hosts, int skew_s) {
  memset(b, 0, sizeof *b);
  b->guard_fd = -1;
  const char *fixed = getenv("NETBED_PREFIX");
  if (fixed && *fixed)
    snprintf(b->prefix, sizeof b->prefix, "%s", fixed);
  else
    snprintf(b->prefix, sizeof b->prefix, "dtb%d", (int)getpid());
  b->hosts = hosts;
  snprintf(b->dir, sizeof b->dir, "/tmp/netbed-%s-XXXXXX", b->prefix);
  if (!mkdtemp(b->dir)) {
    snprintf(b->err, sizeof b->err, "mkdtemp: %s", strerror(errno));
    return -1;
  }
  char n[16], skew[16];
  snprintf(n, sizeof n, "%d", hosts);
  snprintf(skew, sizeof skew, "%d", skew_s);
  /* The guardian first: a bed half made when we are killed goes too. */
  if (start_guard(b) != 0) {
    snprintf(b->err, sizeof b->err, "cannot start the guardian: %s", strerror(errno));
    return -1;
  }
  return netbed_sh(b, "up", n, skew, NULL) == 0 ? 0 : -1;
}

char *netbed_left(const char *prefix, char *buf, size_t len) {
  const char *argv[] = {"/bin/bash", netbed_script(), "left", prefix, NULL};
  static dist_proc p;
  run(&p, argv, 30000);
  snprintf(buf, len, "%s%s", DIST_PROC_OUT(&p), DIST_PROC_ERR(&p));
  return buf;
}

static void remove_tree(const char *dir) {
  const char *argv[] = {"/bin/rm", "-rf", dir, NULL};
  static dist_proc p;
  if (dir[0] == '/' && strstr(dir, "/tmp/netbed-") == dir)
    run(&p, argv, 30000);
}

int netbed_down(netbed *b) {
  if (b->guard_fd < 0 || b->guard_pid <= 0) /* down already, or never up (a skipped test) */
    return 0;
  close(b->guard_fd); /* the guardian takes the bed down ... */
  b->guard_fd = -1;
  int st = 0;
  dist_test_wait_exit(b->guard_pid, &st, 30000); /* its exit: the bed is gone */
  remove_tree(b->dir);
  netbed_left(b->prefix, b->err, sizeof b->err); /* ... and we check it did */
  return b->err[0] ? -1 : 0;
}

/* --- jobs ---------------------------------------------------------------- */

void netbed_node_start(netbed *b, dist_proc *p, const netbed_node *n) {
  char kk[16], traces[320], tracevar[340];
  snprintf(kk, sizeof kk, "%d", n->host);
  snprintf(traces, sizeof traces, "%s/traces", b->dir);
  mkdir(traces, 0700);
  snprintf(tracevar, sizeof tracevar, "DIST_TRACE=%s", traces);
  /* Not dist_test_bin: it keeps four results, the caller's prog[0] among
   * them, and a job starts a node per host. */
  char distrun[1024];
  const char *bin = getenv("DIST_TEST_BIN");
  snprintf(distrun, sizeof distrun, "%s/distrun", bin ? bin : "build/bin");
  const char *e[32] = {"DIST_TOKEN=netbed-shared-job-token", tracevar};
  int ne = 2;
  for (int i = 0; n->env && n->env[i] && ne < 31; i++)
    e[ne++] = n->env[i];
  e[ne] = NULL;
  const char *argv[64] = {"/bin/bash", netbed_script(), "exec", b->prefix, kk, distrun};
  int na = 6;
  for (int i = 0; n->opts[i] && na < 63; i++)
    argv[na++] = n->opts[i];
  for (int i = 0; n->prog[i] && na < 63; i++)
    argv[na++] = n->prog[i];
  argv[na] = NULL;
  dist_proc_start(p, argv, e);
}

void netbed_job_start(netbed_job *j, netbed *b, int nnodes, int nproc, const char *const *env,
                      const char *const *prog) {
  j->bed = b;
  j->nnodes = nnodes;
  j->nproc = nproc;
  char nn[16], np[16], port[16];
  snprintf(nn, sizeof nn, "%d", nnodes);
  snprintf(np, sizeof np, "%d", nproc);
  snprintf(port, sizeof port, "%d", NETBED_PORT);
  for (int k = 0; k < nnodes; k++) {
    char kk[16];
    snprintf(kk, sizeof kk, "%d", k);
    snprintf(j->trace[k], sizeof j->trace[k], "%s/trace-%d.db", b->dir, k);
    const char *opts[] = {"--nnodes", nn, "--node-rank", kk, "--master-addr", netbed_addr(0),
                          "--master-port", port, "-n", np, "--trace-out", j->trace[k], NULL};
    netbed_node_start(b, &j->node[k], &(netbed_node){k, opts, prog, env});
  }
}

void netbed_job_finish(netbed_job *j, int timeout_ms) {
  dist_proc_finish_all(j->node, j->nnodes, 0, timeout_ms);
}

const char *netbed_job_output(const netbed_job *j) {
  static char out[1 << 18];
  size_t at = 0;
  out[0] = '\0';
  for (int k = 0; k < j->nnodes && at < sizeof out - 1; k++)
    at += (size_t)snprintf(out + at, sizeof out - at,
                           "--- node %d: status %d\n--- stdout:\n%.20000s\n--- stderr:\n%.40000s\n",
                           k, j->node[k].status, DIST_PROC_OUT(&j->node[k]),
                           DIST_PROC_ERR(&j->node[k]));
  return out;
}

/* --- processes in a host ------------------------------------------------- */

/* Whether pid's argv[0] ends in /exe (or is exe) and its command line
 * (argv joined with spaces) holds needle (NULL: anything). */
static bool is_process(pid_t pid, const char *exe, const char *needle) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
  if (n == 0 || strcmp(base, exe) != 0)
    return false;
  for (size_t i = 0; i + 1 < n; i++)
    if (buf[i] == '\0')
      buf[i] = ' ';
  return !needle || strstr(buf, needle) != NULL;
}

static pid_t find_once(ino_t ns, const char *exe, const char *needle) {
  DIR *d = opendir("/proc");
  pid_t found = -1;
  for (struct dirent *e; d && found < 0 && (e = readdir(d));) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0)
      continue;
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%ld/ns/net", pid);
    if (stat(path, &st) == 0 && st.st_ino == ns && is_process((pid_t)pid, exe, needle))
      found = (pid_t)pid;
  }
  if (d)
    closedir(d);
  return found;
}

pid_t netbed_find(netbed *b, int k, const char *exe, const char *needle, int timeout_ms) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/run/netns/%s-h%d", b->prefix, k);
  if (stat(path, &st) != 0)
    return -1;
  int64_t deadline = dist_test_now_ms() + timeout_ms;
  for (;;) {
    pid_t pid = find_once(st.st_ino, exe, needle);
    if (pid > 0 || dist_test_now_ms() >= deadline)
      return pid;
    struct timespec ts = {0, 20 * 1000 * 1000}; /* polling /proc against a deadline */
    nanosleep(&ts, NULL);
  }
}
