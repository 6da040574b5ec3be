/* ctest: labels=install timeout=300 */
/* `cmake --install` puts libdist (with its soname), the public headers,
 * distrun, libdist.pc and the CMake package config in place, and a tiny
 * outside program builds against that tree both with
 * `pkg-config --cflags --libs libdist` and with find_package(libdist). */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tmpdir.h"

static char prefix[512], work[256];

/* Runs a shell command; returns its output (static) and asserts success. */
static const char *sh(const char *fmt, ...) {
  static char out[16384];
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char full[4200];
  snprintf(full, sizeof full, "(%s) 2>&1", cmd);
  FILE *p = popen(full, "r");
  cr_assert(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  cr_assert_eq(st, 0, "command failed (%d): %s\n%s", st, cmd, out);
  return out;
}

static const char *program =
    "#include <dist/dist.h>\n"
    "#include <stdio.h>\n"
    "int main(void) {\n"
    "  dist_store *s;\n"
    "  if (dist_store_hash_create(&s)) return 1;\n"
    "  int64_t v = 0;\n"
    "  dist_store_add(s, \"k\", 41, &v);\n"
    "  dist_store_add(s, \"k\", 1, &v);\n"
    "  printf(\"libdist %s says %lld\\n\", dist_version(), (long long)v);\n"
    "  dist_store_destroy(s);\n"
    "  return v == 42 ? 0 : 1;\n"
    "}\n";

static void setup(void) {
  snprintf(work, sizeof work, "/tmp/dist-install-XXXXXX");
  cr_assert(dist_test_mkdtemp(work));
  snprintf(prefix, sizeof prefix, "%s/prefix", work);
  sh("cmake --install '%s' --prefix '%s'", getenv("DIST_TEST_BUILD"), prefix);
  char path[512];
  snprintf(path, sizeof path, "%s/train.c", work);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs(program, f);
  fclose(f);
}

static void teardown(void) { sh("rm -rf '%s'", work); }

TestSuite(install, .init = setup, .fini = teardown);

Test(install, tree_holds_library_with_soname_headers_distrun_and_configs, .timeout = 120) {
  const char *ls = sh("cd '%s' && find . | sort", prefix);
  cr_expect(strstr(ls, "/include/dist/dist.h"), "%s", ls);
  cr_expect(strstr(ls, "/include/dist/pg.h"), "%s", ls);
  cr_expect(strstr(ls, "/bin/distrun"), "%s", ls);
  cr_expect(strstr(ls, "/pkgconfig/libdist.pc"), "%s", ls);
  cr_expect(strstr(ls, "/cmake/libdist/libdistConfig.cmake"), "%s", ls);
  const char *soname = sh("objdump -p %s/lib*/libdist.so | grep SONAME", prefix);
  cr_expect(strstr(soname, "libdist.so.0"), "%s", soname);
  /* Only the public API is exported. */
  const char *syms = sh("nm -D --defined-only %s/lib*/libdist.so | awk '{print $3}'", prefix);
  cr_expect(strstr(syms, "dist_all_reduce"), "dist_all_reduce is not exported");
  cr_expect(!strstr(syms, "dist__"), "internal symbols leak:\n%s", syms);
  const char *help = sh("%s/bin/distrun --help", prefix);
  cr_expect(strstr(help, "usage"), "%s", help);
}

Test(install, outside_program_builds_with_pkg_config, .timeout = 120) {
  sh("cd '%s' && export PKG_CONFIG_PATH=$(dirname $(find '%s' -name libdist.pc)) && "
     "cc train.c -o train $(pkg-config --cflags --libs libdist)",
     work, prefix);
  const char *out = sh("cd '%s' && LD_LIBRARY_PATH=$(dirname $(find '%s' -name 'libdist.so' | "
                       "head -1)) ./train", work, prefix);
  cr_expect(strstr(out, "says 42"), "%s", out);
}

Test(install, outside_program_builds_with_find_package, .timeout = 200) {
  char path[512];
  snprintf(path, sizeof path, "%s/CMakeLists.txt", work);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs("cmake_minimum_required(VERSION 3.20)\nproject(train C)\n"
        "find_package(libdist REQUIRED)\nadd_executable(train train.c)\n"
        "target_link_libraries(train PRIVATE libdist::dist)\n", f);
  fclose(f);
  sh("cd '%s' && cmake -S . -B b -DCMAKE_PREFIX_PATH='%s' >/dev/null && cmake --build b", work,
     prefix);
  const char *out = sh("cd '%s' && ./b/train", work);
  cr_expect(strstr(out, "says 42"), "%s", out);
}
