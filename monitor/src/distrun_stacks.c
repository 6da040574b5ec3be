/* distrun_stacks.c - distrun, the ranks' parent, captures every thread's
 * stack of a rank without the rank's help, as eu-stack does: ptrace
 * through elfutils' libdwfl (dwfl_linux_proc_attach, then each thread's
 * frames, symbolised with the rank's own ELF and DWARF). It works for a
 * rank stuck in a system call, in a spin, or stopped (SIGSTOP), where the
 * rank's own watchdog cannot answer.
 *
 * With DIST_SHOW_STACKTRACES=1, distrun prints them for every rank still
 * running when it ends a failed job, before it sends SIGTERM. */
#include <elfutils/libdwfl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "distrun.h"

#define MAX_FRAMES 32
#define OUT_CAP 16384

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

typedef struct walk {
  Dwfl *dwfl;
  char *buf;
  size_t len, off;
  int frames;
} walk;

static const char *base(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static int on_frame(Dwfl_Frame *f, void *arg) {
  walk *w = arg;
  Dwarf_Addr pc;
  bool activation;
  if (!dwfl_frame_pc(f, &pc, &activation))
    return DWARF_CB_ABORT;
  Dwarf_Addr a = activation ? pc : pc - 1; /* a return address: the call */
  Dwfl_Module *mod = dwfl_addrmodule(w->dwfl, a);
  const char *name = mod ? dwfl_module_addrname(mod, a) : NULL;
  Dwfl_Line *line = mod ? dwfl_module_getsrc(mod, a) : NULL;
  int lineno = 0;
  const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  dist__appendf(w->buf, w->len, &w->off, "      #%d %s", w->frames, name ? name : "??");
  if (file)
    dist__appendf(w->buf, w->len, &w->off, " (%s:%d)\n", base(file), lineno);
  else
    dist__appendf(w->buf, w->len, &w->off, " (%#llx)\n", (unsigned long long)pc);
  return ++w->frames < MAX_FRAMES ? DWARF_CB_OK : DWARF_CB_ABORT;
}

static int on_thread(Dwfl_Thread *t, void *arg) {
  walk *w = arg;
  w->frames = 0;
  dist__appendf(w->buf, w->len, &w->off, "    thread %d:\n", (int)dwfl_thread_tid(t));
  dwfl_thread_getframes(t, on_frame, w);
  return DWARF_CB_OK;
}

/* The stacks of every thread of pid, or a line saying why not. */
static void stacks_of(pid_t pid, walk *w) {
  w->dwfl = dwfl_begin(&callbacks);
  if (!w->dwfl || dwfl_linux_proc_report(w->dwfl, pid) != 0 ||
      dwfl_report_end(w->dwfl, NULL, NULL) != 0 ||
      dwfl_linux_proc_attach(w->dwfl, pid, false) != 0) {
    dist__appendf(w->buf, w->len, &w->off, "    (cannot attach: %s)\n", dwfl_errmsg(-1));
  } else {
    dwfl_getthreads(w->dwfl, on_thread, w);
  }
  if (w->dwfl)
    dwfl_end(w->dwfl); /* detaches */
}

void dist__run_dump_stacks(const drun_rank *ranks, int n) {
  const char *v = dist_getenv("DIST_SHOW_STACKTRACES", NULL); /* or torch's name */
  if (!v || strcmp(v, "1") != 0)
    return;
  walk w = {.len = OUT_CAP};
  w.buf = dist__malloc(OUT_CAP);
  if (!w.buf)
    return;
  for (int i = 0; i < n; i++) {
    if (!ranks[i].running)
      continue;
    w.off = 0;
    stacks_of(ranks[i].pid, &w);
    dist__run_say("stacks of rank %d (pid %d), captured by distrun:", ranks[i].global,
                  (int)ranks[i].pid);
    ssize_t k = write(2, w.buf, w.off); /* longer than a dist__run_say line */
    (void)k;
  }
  dist__free(w.buf);
}
