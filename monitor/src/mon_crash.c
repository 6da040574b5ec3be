/* mon_crash.c - a rank that dies of SIGSEGV, SIGBUS, SIGFPE, SIGILL or
 * SIGABRT leaves its backtrace, as torchrun's error file does.
 *
 * The handler first captures and writes what is safe in a signal handler:
 * backtrace() (its unwinder loaded in advance), and the raw frames with
 * backtrace_symbols_fd, to stderr and to the crash file
 * $TMPDIR/libdist-crash-<pid>.txt, where distrun, the parent, finds it by
 * the dead rank's pid and shows it in its summary. Then, with an alarm as a
 * guard (the heap may be what broke), it symbolises the frames with
 * libdwfl and writes them again with function names and lines. Finally
 * the signal is raised again with its default action, so the exit status
 * says what killed the process. It runs on an alternate stack (installed
 * for the thread that loads the library, the program's main thread): a
 * stack overflow leaves none to run on, and the rank died with no
 * backtrace. */
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mon_int.h"

#define CRASH_FRAMES 64

static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static char crash_dir[200];
static _Atomic int crashing;

static void put(int fd, const char *s) {
  size_t n = strlen(s);
  while (fd >= 0 && n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= (size_t)w;
  }
}

/* Decimal without stdio (async-signal-safe). */
static const char *dec(long v, char *buf) {
  char tmp[24];
  int k = 0;
  bool neg = v < 0;
  unsigned long u = neg ? (unsigned long)-v : (unsigned long)v;
  do
    tmp[k++] = (char)('0' + u % 10);
  while ((u /= 10) && k < 22);
  int j = 0;
  if (neg)
    buf[j++] = '-';
  while (k)
    buf[j++] = tmp[--k];
  buf[j] = '\0';
  return buf;
}

static char env_rank[16]; /* RANK at install, "" when unset or odd */

static void header(int fd, int sig) {
  char b[24];
  put(fd, "libdist: rank ");
  put(fd, dist__mon.on ? dec(dist__mon.rank, b) : env_rank[0] ? env_rank : "?");
  put(fd, " (pid ");
  put(fd, dec((long)getpid(), b));
  put(fd, ") caught SIG");
  put(fd, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  put(fd, ": backtrace:\n");
}

/* fr[0] is the handler, fr[1] libc's signal trampoline, fr[2] the
 * instruction that faulted; the rest are return addresses. Ends at main:
 * the frames below it (libc's start, _start) say nothing to the user and
 * their lines are wrong (a return address past the end of _start). */
static void symbolised(int fd, void **fr, int n) {
  for (int i = 2; i < n; i++) {
    char site[MON_SITE_LEN], b[24];
    /* The symboliser looks up pc - 1, the call before a return address;
     * the faulting instruction is itself the line. */
    dist__mon_symbolize((uintptr_t)fr[i] + (i == 2), site, sizeof site);
    put(fd, "  #");
    put(fd, dec(i - 2, b));
    put(fd, " ");
    put(fd, site);
    put(fd, "\n");
    if (strncmp(site, "main (", 6) == 0)
      break;
  }
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
  (void)si, (void)uc;
  if (atomic_exchange(&crashing, 1)) { /* a second fault while reporting */
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  void *fr[CRASH_FRAMES];
  int n = backtrace(fr, CRASH_FRAMES);
  char path[256], b[24];
  size_t dl = strlen(crash_dir);
  const char *pid = dec((long)getpid(), b);
  memcpy(path, crash_dir, dl);
  memcpy(path + dl, "/libdist-crash-", 15);
  memcpy(path + dl + 15, pid, strlen(pid));
  memcpy(path + dl + 15 + strlen(pid), ".txt", 5);
  int file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  header(2, sig);
  backtrace_symbols_fd(fr, n, 2);
  alarm(3); /* symbolising may meet the lock or heap that broke */
  put(2, "libdist: the same frames, symbolised:\n");
  symbolised(2, fr, n);
  header(file, sig);
  symbolised(file, fr, n);
  if (file >= 0)
    close(file);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* The calling thread's alternate signal stack, unless it has one. */
static void alt_stack(void) {
  stack_t cur;
  if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
    return;
  size_t len = 256 * 1024; /* libdwfl's symbolising runs on it */
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return;
  stack_t ss = {.ss_sp = p, .ss_size = len, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0)
    munmap(p, len);
}

void dist__mon_crash_install(void) {
  /* Before init the launcher's RANK is the only rank there is (read now:
   * the handler may not call getenv). */
  const char *rank = getenv("RANK");
  snprintf(env_rank, sizeof env_rank, "%s",
           rank && strspn(rank, "0123456789") == strlen(rank) && *rank ? rank : "");
  const char *tmp = getenv("TMPDIR");
  snprintf(crash_dir, sizeof crash_dir, "%s", tmp && *tmp ? tmp : "/tmp");
  void *warm[4];
  backtrace(warm, 4);
  alt_stack();
  struct sigaction sa = {.sa_sigaction = on_fatal,
                         .sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK};
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
    struct sigaction old;
    /* A handler the program installed first stays. */
    if (sigaction(fatal[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
      sigaction(fatal[i], &sa, NULL);
  }
}
