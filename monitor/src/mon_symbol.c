/* mon_symbol.c - addresses as "func (file.c:42)", and the stack of a
 * thread of this process.
 *
 * Symbols and lines come from elfutils' libdwfl over this process's own
 * mappings (as eu-stack does), so functions of the program that are not
 * exported (no -rdynamic) still get their names, and lines come from the
 * DWARF line table when the program has one. Only the watchdog and a dying
 * process symbolise; an operation records its caller's address and nothing
 * more. A small cache keeps the call sites a stalled loop repeats.
 *
 * Another thread's stack: the watchdog sends it MON_STACK_SIG; the handler
 * captures its frames with backtrace() (warmed at init so it does not load
 * libgcc inside the handler); the watchdog symbolises them. A thread stuck
 * in a system call runs the handler there and returns to it (SA_RESTART). */
#include <elfutils/libdwfl.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mon_int.h"

#define MON_STACK_SIG (SIGRTMIN + 4)
#define MAX_FRAMES 48
#define CACHE 128

static pthread_mutex_t sym_mu = PTHREAD_MUTEX_INITIALIZER;
static Dwfl *dwfl;
static struct {
  uintptr_t addr;
  char text[MON_SITE_LEN];
} cache[CACHE];

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

/* (Re)reads this process's mappings (a library loaded since is missed). */
static Dwfl *get_dwfl(bool fresh) {
  if (dwfl && !fresh)
    return dwfl;
  if (dwfl)
    dwfl_end(dwfl);
  dwfl = dwfl_begin(&callbacks);
  if (dwfl && (dwfl_linux_proc_report(dwfl, getpid()) != 0 ||
               dwfl_report_end(dwfl, NULL, NULL) != 0)) {
    dwfl_end(dwfl);
    dwfl = NULL;
  }
  return dwfl;
}

static const char *base(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* pc is a return address: the call is the instruction before it. */
static void lookup(uintptr_t pc, char *out, size_t len) {
  Dwarf_Addr a = (Dwarf_Addr)pc - 1;
  Dwfl_Module *mod = NULL;
  for (int fresh = 0; fresh < 2 && !mod; fresh++) {
    Dwfl *d = get_dwfl(fresh);
    mod = d ? dwfl_addrmodule(d, a) : NULL;
  }
  if (!mod) {
    snprintf(out, len, "%#lx", (unsigned long)pc);
    return;
  }
  const char *name = dwfl_module_addrname(mod, a);
  Dwfl_Line *line = dwfl_module_getsrc(mod, a);
  int lineno = 0;
  const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  const char *modname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  /* "f.isra.0", "f.constprop.0", "f.part.0": the compiler's clones of f. */
  char fn[96];
  snprintf(fn, sizeof fn, "%s", name ? name : "??");
  char *dot = strchr(fn, '.');
  if (dot && dot != fn)
    *dot = '\0';
  if (file)
    snprintf(out, len, "%s (%s:%d)", fn, base(file), lineno);
  else
    snprintf(out, len, "%s (%s)", fn, modname ? base(modname) : "?");
}

void dist__mon_symbolize(uintptr_t addr, char *out, size_t len) {
  if (!addr) {
    snprintf(out, len, "?");
    return;
  }
  pthread_mutex_lock(&sym_mu);
  size_t h = (addr >> 2) % CACHE;
  if (cache[h].addr != addr) {
    lookup(addr, cache[h].text, sizeof cache[h].text);
    cache[h].addr = addr;
  }
  snprintf(out, len, "%s", cache[h].text);
  pthread_mutex_unlock(&sym_mu);
}

/* --- stacks ---------------------------------------------------------------- */

static void *frames[MAX_FRAMES];
static _Atomic int n_frames = -1; /* -1: no capture pending an answer */

static void on_stack_signal(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)si, (void)uc;
  int saved = errno;
  atomic_store(&n_frames, backtrace(frames, MAX_FRAMES));
  errno = saved;
}

void dist__mon_stack_init(void) {
  static bool done;
  if (done)
    return;
  done = true;
  void *warm[4];
  backtrace(warm, 4); /* loads the unwinder outside the handler */
  struct sigaction sa = {.sa_sigaction = on_stack_signal, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&sa.sa_mask);
  sigaction(MON_STACK_SIG, &sa, NULL);
}

/* Frames from the first one outside the handler and libc's trampoline. */
static size_t format_frames(void **fr, int n, int skip, char *out, size_t len) {
  size_t off = 0;
  out[0] = '\0';
  for (int i = skip, k = 0; i < n; i++, k++) {
    char site[MON_SITE_LEN];
    dist__mon_symbolize((uintptr_t)fr[i], site, sizeof site);
    dist__appendf(out, len, &off, "      #%d %s\n", k, site);
  }
  return off;
}

size_t dist__mon_stack_of(int tid, char *out, size_t len) {
  int self = (int)syscall(SYS_gettid);
  if (tid <= 0 || tid == self) {
    void *fr[MAX_FRAMES];
    int n = backtrace(fr, MAX_FRAMES);
    return format_frames(fr, n, 1, out, len);
  }
  atomic_store(&n_frames, -1);
  if (syscall(SYS_tgkill, getpid(), tid, MON_STACK_SIG) != 0)
    return (size_t)snprintf(out, len, "      (thread %d: %s)\n", tid, strerror(errno));
  int n = -1;
  for (int i = 0; i < 1000 && (n = atomic_load(&n_frames)) < 0; i++)
    dist__sleep_ms(1);
  if (n < 0)
    return (size_t)snprintf(out, len, "      (thread %d did not answer)\n", tid);
  /* frames[0] is the handler, [1] the signal trampoline: skip both. */
  return format_frames(frames, n, 2, out, len);
}
