/* callsite_sym.c - call sites as function, file and line, at merge.
 *
 * A rank records only its callers' return addresses, as (module, offset
 * from where the module is mapped), because symbolising costs time the job
 * should not spend. The merge runs on the job's machine after it ended, so
 * the modules are still there: each is opened with elfutils' libdwfl (as
 * monitor/src/mon_symbol.c does in the live process) and every offset gets
 * its function and the DWARF line, so `select file, line from callsites`
 * answers "which line". A return address points after the call, so the
 * byte before it is looked up: the line is the call's. A module that
 * cannot be read, or whose build id is no longer the one recorded (it was
 * rebuilt since), leaves file and line NULL. */
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reader_int.h"

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

typedef struct module {
  Dwfl *dwfl;
  Dwfl_Module *mod;
  GElf_Addr map_start;    /* the file's vaddr where its first mapping starts */
  GElf_Addr bias;
} module;

/* dladdr's dli_fbase is where the first PT_LOAD is mapped (page-aligned):
 * an offset from it plus that segment's page-aligned vaddr is a vaddr. */
static bool first_load(Elf *elf, GElf_Addr *out) {
  size_t n;
  if (elf_getphdrnum(elf, &n) != 0)
    return false;
  GElf_Addr page = (GElf_Addr)sysconf(_SC_PAGESIZE);
  for (size_t i = 0; i < n; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
      *out = ph.p_vaddr & ~(page - 1);
      return true;
    }
  }
  return false;
}

/* Whether the module's build id is the recorded one (hex); none recorded
 * passes. */
static bool same_build(Dwfl_Module *mod, const char *want) {
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = want && *want ? dwfl_module_build_id(mod, &bits, &vaddr) : 0;
  if (!want || !*want)
    return true;
  if (n <= 0 || strlen(want) != (size_t)n * 2)
    return false;
  for (int i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(want + 2 * i, "%2x", &v) != 1 || v != bits[i])
      return false;
  }
  return true;
}

static void module_close(module *m) {
  if (m->dwfl)
    dwfl_end(m->dwfl);
  memset(m, 0, sizeof *m);
}

static bool module_open(module *m, const char *path, const char *build_id) {
  memset(m, 0, sizeof *m);
  m->dwfl = dwfl_begin(&callbacks);
  if (!m->dwfl)
    return false;
  dwfl_report_begin(m->dwfl);
  m->mod = dwfl_report_elf(m->dwfl, path, path, -1, 0, false);
  dwfl_report_end(m->dwfl, NULL, NULL);
  Elf *elf = m->mod ? dwfl_module_getelf(m->mod, &m->bias) : NULL;
  if (!elf || !first_load(elf, &m->map_start) || !same_build(m->mod, build_id)) {
    module_close(m);
    return false;
  }
  return true;
}

/* Binds function (NULL: keep dladdr's), file and line of offset. */
static void lookup(const module *m, int64_t offset, sqlite3_stmt *upd) {
  Dwarf_Addr a = m->bias + m->map_start + (GElf_Addr)offset - 1;
  const char *name = dwfl_module_addrname(m->mod, a);
  char fn[256] = "";
  if (name) {  // "f.isra.0", "f.constprop.0": the compiler's clones of f
    snprintf(fn, sizeof fn, "%s", name);
    char *dot = strchr(fn, '.');
    if (dot && dot != fn)
      *dot = '\0';
  }
  Dwfl_Line *line = dwfl_module_getsrc(m->mod, a);
  int lineno = 0;
  const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  fn[0] ? sqlite3_bind_text(upd, 1, fn, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(upd, 1);
  file ? sqlite3_bind_text(upd, 2, file, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(upd, 2);
  file && lineno > 0 ? sqlite3_bind_int(upd, 3, lineno) : sqlite3_bind_null(upd, 3);
}

int tr_callsites_symbolise(sqlite3 *db) {
  sqlite3_stmt *q = NULL, *upd = NULL;
  if (sqlite3_prepare_v2(db, "SELECT DISTINCT module, build_id, offset FROM callsites WHERE"
                             " module IS NOT NULL AND offset IS NOT NULL ORDER BY module",
                         -1, &q, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "UPDATE callsites SET function = coalesce(?1, function), file = ?2,"
                             " line = ?3 WHERE module = ?4 AND offset = ?5", -1, &upd,
                         NULL) != SQLITE_OK) {
    sqlite3_finalize(q);
    return -1;
  }
  module m = {0};
  char cur[1024] = "";
  bool ok = false;
  while (sqlite3_step(q) == SQLITE_ROW) {
    const char *path = (const char *)sqlite3_column_text(q, 0);
    const char *bid = (const char *)sqlite3_column_text(q, 1);
    if (strcmp(path, cur) != 0) {  // rows come by module: open each once
      module_close(&m);
      snprintf(cur, sizeof cur, "%s", path);
      ok = module_open(&m, path, bid);
    }
    if (!ok)
      continue;
    lookup(&m, sqlite3_column_int64(q, 2), upd);
    sqlite3_bind_text(upd, 4, path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(upd, 5, sqlite3_column_int64(q, 2));
    sqlite3_step(upd);
    sqlite3_reset(upd);
  }
  module_close(&m);
  sqlite3_finalize(q);
  sqlite3_finalize(upd);
  return 0;
}
