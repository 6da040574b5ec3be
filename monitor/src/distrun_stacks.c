/* distrun_stacks.c - distrun, the ranks' parent, captures every thread's
 * stack of a rank without the rank's help, as eu-stack does: ptrace
 * through elfutils' libdwfl (dwfl_linux_proc_attach, then each thread's
 * frames, symbolised with the rank's own ELF and DWARF). It works for a
 * rank stuck in a system call, in a spin, or stopped (SIGSTOP), where the
 * rank's own watchdog cannot answer.
 *
 * With DIST_SHOW_STACKTRACES=1, distrun prints them for every rank still
 * running when it ends a failed job, before it sends SIGTERM. Whatever
 * the variable says, a hang's culprit that runs its own code gets its
 * program's innermost frame captured for the verdict
 * (dist__run_program_frame, distrun_outside.c). */
#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
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

/* --- the program's innermost frame ------------------------------------------ */

/* The file module mod was reported from (a mapping's path). */
static const char *module_file(Dwfl_Module *mod) {
  const char *name = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  return name ? name : "?";
}

typedef struct find {
  Dwfl *dwfl;
  pid_t pid;
  char exe[4096];            /* the program's file (/proc/<pid>/exe) */
  char at[160];              /* the frame found, "" none */
  bool main_had;             /* the main thread's frame was found */
  int running;               /* a thread of the program's that runs while the
                                main thread sleeps (its tid), else 0 */
} find;

/* Whether thread tid is one of the library's own ("dist-..."). */
static bool library_thread(pid_t pid, int tid) {
  char path[64], name[32] = "";
  snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid, tid);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  bool lib = fgets(name, sizeof name, f) && strncmp(name, "dist-", 5) == 0;
  fclose(f);
  return lib;
}

char dist__run_thread_state(pid_t pid, int tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, tid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  return p && p[1] == ' ' ? p[2] : 0;
}

/* A thread of the program's (not the library's) that runs while the main
 * thread sleeps (a helper thread in an endless loop, main in its
 * pthread_join): that one is where the rank is stuck. Read before the
 * attach stops them all. */
static int running_helper(pid_t pid) {
  if (dist__run_thread_state(pid, (int)pid) == 'R')
    return 0;
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  int tid = 0;
  for (struct dirent *e; d && !tid && (e = readdir(d));) {
    int t = atoi(e->d_name);
    if (t > 0 && t != (int)pid && dist__run_thread_state(pid, t) == 'R' &&
        !library_thread(pid, t))
      tid = t;
  }
  if (d)
    closedir(d);
  return tid;
}

/* "func (file.c:42)" of a pc in module mod; false without a name. */
static bool frame_words(Dwfl_Module *mod, Dwarf_Addr a, char *out, size_t len) {
  const char *name = dwfl_module_addrname(mod, a);
  if (!name)
    return false;
  char fn[96];
  snprintf(fn, sizeof fn, "%s", name);
  char *dot = strchr(fn, '.'); /* "f.isra.0": the compiler's clone of f */
  if (dot && dot != fn)
    *dot = '\0';
  Dwfl_Line *line = dwfl_module_getsrc(mod, a);
  int lineno = 0;
  const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  if (file)
    snprintf(out, len, "%s (%s:%d)", fn, base(file), lineno);
  else
    snprintf(out, len, "%s (%s)", fn, base(module_file(mod)));
  return true;
}

static int on_program_frame(Dwfl_Frame *f, void *arg) {
  find *w = arg;
  Dwarf_Addr pc;
  bool activation;
  if (!dwfl_frame_pc(f, &pc, &activation))
    return DWARF_CB_ABORT;
  Dwarf_Addr a = activation ? pc : pc - 1;
  Dwfl_Module *mod = dwfl_addrmodule(w->dwfl, a);
  const char *file = mod ? module_file(mod) : NULL;
  if (!file || strcmp(file, w->exe) != 0)
    return DWARF_CB_OK; /* libc, libdist, the loader: not the program's code */
  char at[sizeof w->at];
  if (frame_words(mod, a, at, sizeof at))
    snprintf(w->at, sizeof w->at, "%s", at);
  return DWARF_CB_ABORT; /* the innermost frame of the program's */
}

/* A helper thread that runs while the main thread sleeps wins; else the
 * main thread's frame; else the first other thread of the program's (not
 * the library's) that has one. */
static int on_program_thread(Dwfl_Thread *t, void *arg) {
  find *w = arg;
  int tid = (int)dwfl_thread_tid(t);
  if (w->running && tid != w->running)
    return DWARF_CB_OK;
  if (w->main_had || (w->at[0] && tid != w->pid) || library_thread(w->pid, tid))
    return DWARF_CB_OK;
  char keep[sizeof w->at];
  snprintf(keep, sizeof keep, "%s", w->at);
  w->at[0] = '\0';
  dwfl_thread_getframes(t, on_program_frame, w);
  if (w->at[0])
    w->main_had = tid == w->pid;
  else
    snprintf(w->at, sizeof w->at, "%s", keep);
  return DWARF_CB_OK;
}

bool dist__run_program_frame(pid_t pid, char *out, size_t len, char *why, size_t wlen) {
  find w = {.pid = pid};
  char link[64];
  snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
  ssize_t k = readlink(link, w.exe, sizeof w.exe - 1);
  if (k <= 0) {
    snprintf(why, wlen, "cannot read %s: %s", link, strerror(errno));
    return false;
  }
  w.exe[k] = '\0';
  w.running = running_helper(pid);
  w.dwfl = dwfl_begin(&callbacks);
  if (!w.dwfl || dwfl_linux_proc_report(w.dwfl, pid) != 0 ||
      dwfl_report_end(w.dwfl, NULL, NULL) != 0 ||
      dwfl_linux_proc_attach(w.dwfl, pid, false) != 0)
    snprintf(why, wlen, "cannot attach: %s", dwfl_errmsg(-1));
  else if (dwfl_getthreads(w.dwfl, on_program_thread, &w) != 0 && !w.at[0])
    snprintf(why, wlen, "cannot walk its threads: %s", dwfl_errmsg(-1));
  if (w.dwfl && !w.at[0] && w.running) { /* its frame was not the program's */
    w.running = 0;
    dwfl_getthreads(w.dwfl, on_program_thread, &w);
  }
  else if (!w.at[0])
    snprintf(why, wlen, "no frame of its threads is in %s", base(w.exe));
  if (w.dwfl)
    dwfl_end(w.dwfl); /* detaches */
  snprintf(out, len, "%s", w.at);
  return w.at[0] != '\0';
}
