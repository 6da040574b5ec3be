/* mp.h - multi-process test support: fork N real ranks, wait with a
 * deadline, kill stragglers, check every exit status (Gloo's
 * multiproc_test, libuv's runner).
 *
 * Ranks are forked before any group or library thread exists. Each child
 * runs fn and _exit()s with its return value; it must not use cr_assert
 * (Criterion's assertions belong to the parent). The parent waits for every
 * child until the deadline, prints the stacks of the ones still running
 * (eu-stack), SIGKILLs their process group, and reports. Ranks die with the
 * harness (PR_SET_PDEATHSIG). */
#ifndef DIST_TEST_MP_H
#define DIST_TEST_MP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <dist/dist.h>

#define DIST_TEST_MAX_RANKS 64

typedef struct dist_test_ctx {
  int rank;
  int world;
  const char *tmpdir;   /* a fresh mkdtemp() directory shared by the ranks */
  int port_pipe[2];     /* rank 0 publishes a TCP port to the others */
  void *arg;
} dist_test_ctx;

typedef int (*dist_test_rank_fn)(const dist_test_ctx *ctx);

typedef struct dist_test_opts {
  int n;
  dist_test_rank_fn fn;
  void *arg;
  int timeout_s;        /* deadline for all ranks (capped below the test's) */
  int kill_rank;        /* -1: none; else SIGKILL this rank ... */
  int kill_after_ms;    /* ... this long after the fork */
} dist_test_opts;

typedef struct dist_test_result {
  int n;
  int exit_code[DIST_TEST_MAX_RANKS];   /* -1 when killed by a signal */
  int signal[DIST_TEST_MAX_RANKS];      /* 0 when it exited */
  bool timed_out[DIST_TEST_MAX_RANKS];  /* still running at the deadline */
  int64_t elapsed_ms[DIST_TEST_MAX_RANKS];
  char where[DIST_TEST_MAX_RANKS][512]; /* a stuck rank's main-thread frames */
  char report[8192];                    /* one line per rank that failed */
} dist_test_result;

/* Runs the ranks; returns 0 when every rank exited 0 (res may be NULL). */
int dist_test_run(const dist_test_opts *opts, dist_test_result *res);
/* Shorthand: n ranks, no kill. The failure report is in dist_test_report(). */
int dist_test_ranks(int n, dist_test_rank_fn fn, void *arg, int timeout_s);
const char *dist_test_report(void);

/* In a rank: a TCP store shared by all ranks (rank 0 hosts it on port 0 and
 * publishes the port through the pipe). */
int dist_test_tcp_store(const dist_test_ctx *ctx, dist_store **out);
/* In a rank: a file store in ctx->tmpdir. */
int dist_test_file_store(const dist_test_ctx *ctx, dist_store **out);
/* In a rank: init the default group over a TCP store with backend (NULL:
 * cpu). The store is owned by the group's lifetime helper: destroy with
 * dist_test_finish(). */
int dist_test_init_pg(const dist_test_ctx *ctx, const char *backend);
void dist_test_finish(void);

/* A 127.0.0.1 port that refuses connections for as long as *held stays
 * open: bound, never listening, so no other process (ctest runs several at
 * once) can take it, as it could a port merely closed. Close *held after. */
uint16_t dist_test_refusing_port(int *held);

/* Seed for sampled tests: DIST_TEST_SEED or the time; printed once. */
uint64_t dist_test_seed(void);

/* Prints a message prefixed with the rank to stderr and returns 1 (for
 * `return FAIL(ctx, ...)` in rank functions). */
int dist_test_fail(const dist_test_ctx *ctx, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define FAIL(ctx, ...) dist_test_fail((ctx), __FILE__, __LINE__, __VA_ARGS__)
/* Returns FAIL when cond is false. */
#define CHECK(ctx, cond, ...)                  \
  do {                                         \
    if (!(cond))                               \
      return FAIL((ctx), __VA_ARGS__);         \
  } while (0)
/* Returns FAIL when call does not return DIST_OK (message included). */
#define CHECK_OK(ctx, call)                                                   \
  do {                                                                        \
    int check_rc_ = (call);                                                   \
    if (check_rc_ != DIST_OK)                                                 \
      return FAIL((ctx), "%s -> %s: %s", #call, dist_status_name(check_rc_),  \
                  dist_last_errmsg());                                        \
  } while (0)

#endif
