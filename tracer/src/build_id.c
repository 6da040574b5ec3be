/* build_id.c - the GNU build id of the loaded module holding an address,
 * so a call site stays meaningful after the process is gone (module +
 * build id + offset can be symbolised later against the right binary).
 * Called by the record sink once per distinct call site. */
#define _GNU_SOURCE
#include "reader_int.h"

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

typedef struct find {
  uintptr_t addr;
  char *out;
  size_t len;
  bool found;
} find;

static bool in_module(const struct dl_phdr_info *info, uintptr_t addr) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && addr >= start && addr < start + ph->p_memsz)
      return true;
  }
  return false;
}

static void note_hex(const struct dl_phdr_info *info, find *f) {
  for (int i = 0; i < info->dlpi_phnum && !f->found; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
      const char *name = p + sizeof *n;
      const unsigned char *desc = (const unsigned char *)name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
        size_t k = 0;
        for (unsigned j = 0; j < n->n_descsz && k + 3 <= f->len; j++, k += 2)
          snprintf(f->out + k, 3, "%02x", desc[j]);
        f->found = k > 0;
        return;
      }
      p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
    }
  }
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find *f = arg;
  if (!in_module(info, f->addr))
    return 0;
  note_hex(info, f);
  return 1;
}

bool tr_build_id(uintptr_t addr, char *out, size_t len) {
  find f = {.addr = addr, .out = out, .len = len};
  out[0] = '\0';
  dl_iterate_phdr(visit, &f);
  return f.found;
}
