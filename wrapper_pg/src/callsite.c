/* callsite.c - return addresses into "file.c:88 in fn()".
 *
 * Every public call records its caller's return address (one instruction);
 * it is resolved only when a report is written: DWARF line info through
 * elfutils' libdw, or the symbol and offset without debug info. So that
 * another rank can name where this one was (an absent member's last call),
 * an address also travels as (module, offset from the module's load bias):
 * each process maps the same program at its own address. */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "wpg_int.h"

static uint32_t name_hash(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  uint32_t h = 2166136261u;
  for (; *base; base++)
    h = (h ^ (uint8_t)*base) * 16777619u;
  return h | 1u; /* 0 is the main program */
}

typedef struct find {
  uintptr_t addr;      /* in: an address (locate) */
  uint32_t module;     /* in (resolve) / out (locate) */
  uintptr_t bias;
  bool found;
} find;

static bool contains(const struct dl_phdr_info *i, uintptr_t addr) {
  for (int k = 0; k < i->dlpi_phnum; k++) {
    const ElfW(Phdr) *p = &i->dlpi_phdr[k];
    uintptr_t lo = i->dlpi_addr + p->p_vaddr;
    if (p->p_type == PT_LOAD && addr >= lo && addr < lo + p->p_memsz)
      return true;
  }
  return false;
}

static int by_addr(struct dl_phdr_info *i, size_t size, void *arg) {
  (void)size;
  find *f = arg;
  if (f->found)
    return 1;
  bool main_prog = !i->dlpi_name || !i->dlpi_name[0];
  if (contains(i, f->addr)) {
    f->module = main_prog ? 0 : name_hash(i->dlpi_name);
    f->bias = i->dlpi_addr;
    f->found = true;
    return 1;
  }
  return 0;
}

static int by_module(struct dl_phdr_info *i, size_t size, void *arg) {
  (void)size;
  find *f = arg;
  bool main_prog = !i->dlpi_name || !i->dlpi_name[0];
  uint32_t m = main_prog ? 0 : name_hash(i->dlpi_name);
  if (m != f->module)
    return 0;
  f->bias = i->dlpi_addr;
  f->found = true;
  return 1;
}

void wpg_site_locate(wpg_site_cache *sc, const void *addr, uint64_t *off, uint32_t *module) {
  unsigned slot = (unsigned)((uintptr_t)addr >> 2) & 15u;
  if (sc->addr[slot] == addr && addr) {
    *off = sc->off[slot];
    *module = sc->module[slot];
    return;
  }
  find f = {.addr = (uintptr_t)addr};
  if (addr)
    dl_iterate_phdr(by_addr, &f);
  *off = f.found ? (uint64_t)((uintptr_t)addr - f.bias) : (uint64_t)(uintptr_t)addr;
  *module = f.found ? f.module : UINT32_MAX;
  sc->addr[slot] = addr;
  sc->off[slot] = *off;
  sc->module[slot] = *module;
}

/* --- resolution (report time only) --------------------------------------- */

static pthread_mutex_t dw_lock = PTHREAD_MUTEX_INITIALIZER;

static Dwfl *dw_open(void) {
  static const Dwfl_Callbacks cb = {
      .find_elf = dwfl_linux_proc_find_elf,
      .find_debuginfo = dwfl_standard_find_debuginfo,
  };
  Dwfl *d = dwfl_begin(&cb);
  if (!d)
    return NULL;
  if (dwfl_linux_proc_report(d, getpid()) != 0 || dwfl_report_end(d, NULL, NULL) != 0) {
    dwfl_end(d);
    return NULL;
  }
  return d;
}

static void symbol_only(const void *addr, char *buf, size_t len) {
  Dl_info di;
  if (dladdr(addr, &di) && di.dli_sname) {
    const char *obj = di.dli_fname ? strrchr(di.dli_fname, '/') : NULL;
    snprintf(buf, len, "%s+0x%lx in %s", di.dli_sname,
             (unsigned long)((uintptr_t)addr - (uintptr_t)di.dli_saddr),
             obj ? obj + 1 : di.dli_fname ? di.dli_fname : "?");
  } else {
    snprintf(buf, len, "%p", addr);
  }
}

static void resolve_with(Dwfl *d, const void *addr, char *buf, size_t len) {
  /* A return address points after the call: look up the call itself. */
  Dwarf_Addr a = (Dwarf_Addr)(uintptr_t)addr - 1;
  Dwfl_Module *m = d ? dwfl_addrmodule(d, a) : NULL;
  Dwfl_Line *line = m ? dwfl_module_getsrc(m, a) : NULL;
  const char *fn = m ? dwfl_module_addrname(m, a) : NULL;
  int lineno = 0;
  const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  if (file) {
    const char *base = strrchr(file, '/');
    /* GCC's clones (f.part.0, f.isra.0, f.constprop.0) are f to a reader. */
    int fn_len = fn ? (int)strcspn(fn, ".") : 1;
    snprintf(buf, len, "%s:%d in %.*s()", base ? base + 1 : file, lineno, fn_len,
             fn ? fn : "?");
  } else {
    symbol_only(addr, buf, len);
  }
}

void wpg_site_resolve(const void *addr, char *buf, size_t len) {
  if (!addr) {
    snprintf(buf, len, "?");
    return;
  }
  pthread_mutex_lock(&dw_lock);
  Dwfl *d = dw_open();
  resolve_with(d, addr, buf, len);
  if (d)
    dwfl_end(d);
  pthread_mutex_unlock(&dw_lock);
}

void wpg_site_resolve_off(uint32_t module, uint64_t off, char *buf, size_t len) {
  find f = {.module = module};
  if (module != UINT32_MAX)
    dl_iterate_phdr(by_module, &f);
  if (!f.found) {
    snprintf(buf, len, "?");
    return;
  }
  wpg_site_resolve((const void *)(f.bias + (uintptr_t)off), buf, len);
}

bool wpg_show_stacks(void) {
  const char *s = dist_getenv("DIST_SHOW_STACKTRACES", NULL); /* or torch's name */
  return s && (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes"));
}

void wpg_site_stack(const void *caller, char *buf, size_t len) {
  void *frames[48];
  int n = backtrace(frames, 48);
  size_t off = 0;
  buf[0] = '\0';
  /* The frames above the public call are this library's own: start at the
   * frame that returns into the caller (all of them if none does). */
  int first = 0;
  for (int i = 0; i < n && caller; i++)
    if (frames[i] == caller) {
      first = i;
      break;
    }
  pthread_mutex_lock(&dw_lock);
  Dwfl *d = dw_open();
  for (int i = first; i < n; i++) {
    char one[256];
    resolve_with(d, frames[i], one, sizeof one);
    wpg_appendf(buf, len, &off, "      #%d %s\n", i - first, one);
  }
  if (d)
    dwfl_end(d);
  pthread_mutex_unlock(&dw_lock);
}
