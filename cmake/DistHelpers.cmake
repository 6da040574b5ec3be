# Helper functions for the libdist build.

# dist_require_pkg(PREFIX module debian-package)
# Finds a pkg-config module or stops configuring with a message that names
# the Debian package to install.
function(dist_require_pkg prefix module debpkg)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR
      "libdist needs ${module} (pkg-config module '${module}'), which was not found.\n"
      "On Debian: apt-get install ${debpkg}")
  endif()
endfunction()

# dist_add_program(NAME SOURCES ... LIBS ...)
# A program in build/bin linked against the static runtime.
function(dist_add_program name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${P_SOURCES})
  target_link_libraries(${name} PRIVATE dist_warnings ${P_LIBS})
endfunction()

# dist_add_test(NAME SOURCES ... LABELS ... TIMEOUT s [LIBS ...]
#               [CONFIGURATIONS c ...])
# A Criterion test executable registered with CTest (STYLE.md section 10).
# Tests link the static core so dist__ internals are reachable. With
# CONFIGURATIONS the test runs only under `ctest -C <c>` (a stage of its own
# in .ci/run, never in the README's plain ctest).
function(dist_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LABELS;LIBS;CONFIGURATIONS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE dist_test_support ${DIST_TEST_FRAMEWORK}
                        dist_warnings ${T_LIBS})
  # -j1: multi-process tests fork their own ranks; Criterion's own workers
  # would multiply processes on a 2-core machine.
  if(T_CONFIGURATIONS)
    add_test(NAME ${name} COMMAND ${name} --jobs 1 --full-stats
             CONFIGURATIONS ${T_CONFIGURATIONS})
  else()
    add_test(NAME ${name} COMMAND ${name} --jobs 1 --full-stats)
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "DIST_TEST_BIN=${CMAKE_BINARY_DIR}/bin;DIST_TEST_BUILD=${CMAKE_BINARY_DIR};DIST_TEST_SRC=${PROJECT_SOURCE_DIR};ASAN_OPTIONS=detect_leaks=1:abort_on_error=0;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1;TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${PROJECT_SOURCE_DIR}/tests/tsan.supp")
endfunction()

# dist_add_test_dir(DIR [LIBS ...] [CONFIGURATIONS c ...])
# Registers every tests/<part>/test_*.c as its own test executable, so
# parallel work never edits a shared list. A file states its labels and
# timeout in a comment among its first lines:
#     /* ctest: labels=multiproc timeout=300 cost=180 */
# (defaults: labels=unit timeout=120). cost: about how many seconds the
# suite takes in a plain build, for the few suites that take a minute or
# more. ctest -j starts the costliest first when it has no timings of its
# own (a fresh clone, as CI's), so a long suite does not start last and
# run alone on one core while the other idles.
function(dist_add_test_dir dir)
  cmake_parse_arguments(D "" "" "LIBS;CONFIGURATIONS" ${ARGN})
  file(GLOB tests CONFIGURE_DEPENDS ${dir}/test_*.c)
  foreach(src ${tests})
    get_filename_component(stem ${src} NAME_WE)
    get_filename_component(part ${dir} NAME)
    set(labels unit)
    set(timeout 120)
    file(STRINGS ${src} meta LIMIT_COUNT 20 REGEX "ctest:")
    if(meta MATCHES "labels=([a-z_,]+)")
      string(REPLACE "," ";" labels "${CMAKE_MATCH_1}")
    endif()
    if(meta MATCHES "timeout=([0-9]+)")
      set(timeout ${CMAKE_MATCH_1})
    endif()
    dist_add_test(${part}_${stem} SOURCES ${src} LABELS ${labels}
                  TIMEOUT ${timeout} LIBS ${D_LIBS} CONFIGURATIONS ${D_CONFIGURATIONS})
    if(meta MATCHES "cost=([0-9]+)")
      set_tests_properties(${part}_${stem} PROPERTIES COST ${CMAKE_MATCH_1})
    endif()
    target_compile_definitions(${part}_${stem} PRIVATE _GNU_SOURCE)
  endforeach()
endfunction()
