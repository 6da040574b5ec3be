# Build options of libdist (STYLE.md section 12).

option(DIST_BUILD_TESTS "Build the Criterion test suites (needs criterion via pkg-config)" ON)
option(DIST_WERROR "Treat warnings as errors (ON in the dev and CI presets)" OFF)
set(DIST_SANITIZER "none" CACHE STRING "Sanitizer build: none, address (with undefined), thread")
set_property(CACHE DIST_SANITIZER PROPERTY STRINGS none address thread)

# Warnings every target links (STYLE.md: dist_warnings).
add_library(dist_warnings INTERFACE)
target_compile_options(dist_warnings INTERFACE
  -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
  -Wformat=2 -Wvla -Wno-format-nonliteral)
if(DIST_WERROR)
  target_compile_options(dist_warnings INTERFACE -Werror)
endif()

# Sanitizers apply to every target, so the flags go on an interface target
# that dist_warnings pulls in (no global flags).
add_library(dist_sanitize INTERFACE)
if(DIST_SANITIZER STREQUAL "address")
  target_compile_options(dist_sanitize INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(dist_sanitize INTERFACE -fsanitize=address,undefined)
elseif(DIST_SANITIZER STREQUAL "thread")
  target_compile_options(dist_sanitize INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(dist_sanitize INTERFACE -fsanitize=thread)
elseif(NOT DIST_SANITIZER STREQUAL "none")
  message(FATAL_ERROR "DIST_SANITIZER must be none, address or thread (got '${DIST_SANITIZER}')")
endif()
# DIST_FUZZ: the libFuzzer targets of tests/fuzz (ctest label fuzz), in a
# build of their own (build-fuzz, CC=clang): every target is instrumented
# for coverage and built with AddressSanitizer and UBSan; the targets link
# libFuzzer. The README's gcc build never sets it.
option(DIST_FUZZ "Build the libFuzzer targets (tests/fuzz; needs clang and libclang-rt-dev)" OFF)
if(DIST_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DIST_FUZZ=ON needs clang (libFuzzer), not ${CMAKE_C_COMPILER_ID}: "
            "configure a separate build with CC=clang, e.g.\n"
            "  CC=clang cmake -S . -B build-fuzz -DDIST_FUZZ=ON\n"
            "On Debian: apt-get install clang libclang-rt-dev")
  endif()
  if(NOT DIST_SANITIZER STREQUAL "none")
    message(FATAL_ERROR "DIST_FUZZ=ON brings its own sanitizers (address, undefined): "
            "leave DIST_SANITIZER at none")
  endif()
  target_compile_options(dist_sanitize INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)
  target_link_options(dist_sanitize INTERFACE -fsanitize=address,undefined)
endif()
target_link_libraries(dist_warnings INTERFACE dist_sanitize)

# Optional backends: AUTO builds them when their dependency is found, ON
# stops configuring when it is not, OFF never builds them.
set(DIST_WITH_MPI "AUTO" CACHE STRING "Build the MPI backend: AUTO, ON, OFF")
set_property(CACHE DIST_WITH_MPI PROPERTY STRINGS AUTO ON OFF)
set(DIST_WITH_NCCL "AUTO" CACHE STRING "Build the NCCL backend: AUTO, ON, OFF")
set_property(CACHE DIST_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
