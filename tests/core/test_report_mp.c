/* ctest: labels=multiproc timeout=300 */
/* One voice for every failure (status.h, FAILURE REPORTS): the same
 * disagreement between two ranks gives the same report text over shared
 * memory and over TCP, modulo host and pid, and the text holds what a user
 * needs: both values, the group's id and description, the operation's
 * sequence number and the global ranks (with the group ranks beside them,
 * since the groups here are global ranks 1 and 2 of three).
 *
 * Each case runs on a fresh group described after the case, so a case that
 * leaves its group broken cannot colour the next. Ranks write each report
 * to a file; the test compares the files of the two transports. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "tmpdir.h"

/* The root case is a broadcast of 256 KiB: two ranks that both believe
 * they are the root of a small one (one that fits a shared-memory line or
 * TCP's eager size) return before any reader could object, and are caught
 * only at their next collective (status.h's open point). */
enum { C_COUNT, C_DTYPE, C_OP, C_REDOP, C_ROOT, C_SPLIT, C_P2P, N_CASES };
static const char *const case_name[N_CASES] = {"count", "dtype", "op",  "redop",
                                                "root",  "split", "p2p"};
#define ROOT_N (1 << 16)
static float root_buf[ROOT_N];

typedef struct run_arg {
  const char *transport;
  char dir[256];
} run_arg;

/* Runs case k on g as group rank gr; returns the status. */
static int run_case(int k, int gr, dist_pg *g) {
  float f[8] = {0}, out[8] = {0};
  int32_t iv[4] = {0};
  dist_tensor t4 = dist_tensor_1d(f, DIST_FLOAT32, 4);
  switch (k) {
  case C_COUNT: {
    dist_tensor t = dist_tensor_1d(f, DIST_FLOAT32, gr ? 5 : 4);
    return dist_all_reduce(&t, DIST_SUM, g, NULL);
  }
  case C_DTYPE: {
    dist_tensor t = gr ? dist_tensor_1d(iv, DIST_INT32, 4) : t4;
    return dist_all_reduce(&t, DIST_SUM, g, NULL);
  }
  case C_OP: {
    if (gr == 0)
      return dist_all_reduce(&t4, DIST_SUM, g, NULL);
    dist_tensor o = dist_tensor_1d(out, DIST_FLOAT32, 8);
    return dist_all_gather_into_tensor(&o, &t4, g, NULL);
  }
  case C_REDOP:
    return dist_all_reduce(&t4, gr ? DIST_MAX : DIST_SUM, g, NULL);
  case C_ROOT: { /* both ranks believe they are the root */
    dist_tensor t = dist_tensor_1d(root_buf, DIST_FLOAT32, ROOT_N);
    return dist_broadcast(&t, gr ? 2 : 1, g, NULL);
  }
  case C_SPLIT: {
    /* Rank 1 sends 3 elements to rank 2, which expects 2 from it. */
    int64_t in1[2] = {2, 3}, in2[2] = {2, 2}, outs[2] = {2, 2};
    dist_tensor i = dist_tensor_1d(f, DIST_FLOAT32, gr ? 4 : 5);
    dist_tensor o = dist_tensor_1d(out, DIST_FLOAT32, 4);
    return dist_all_to_all_single(&o, &i, outs, gr ? in2 : in1, g, NULL);
  }
  case C_P2P: {
    dist_tensor t8 = dist_tensor_1d(f, DIST_FLOAT32, 8);
    return gr == 0 ? dist_send(&t8, 2, g, 0) : dist_recv(&t4, 1, g, 0, NULL);
  }
  }
  return DIST_E_INVAL;
}

static int write_report(const run_arg *a, int k, int rank, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s-%s-%d.txt", a->dir, a->transport, case_name[k], rank);
  FILE *f = fopen(path, "w");
  if (!f)
    return -1;
  fputs(text, f);
  return fclose(f);
}

static int report_rank(const dist_test_ctx *ctx) {
  const run_arg *a = ctx->arg;
  setenv("DIST_TRANSPORT", a->transport, 1);
  setenv("DIST_TEST_TIMEOUT_MS", "20000", 1);
  CHECK_OK(ctx, dist_test_init_pg(ctx, NULL));
  int members[2] = {1, 2};
  for (int k = 0; k < N_CASES; k++) {
    dist_group_opts o = {.desc = case_name[k]};
    dist_pg *g;
    CHECK_OK(ctx, dist_new_group(members, 2, &o, &g));
    if (ctx->rank == 0)
      continue; /* not a member */
    int rc = run_case(k, ctx->rank - 1, g);
    CHECK(ctx, rc == DIST_E_DESYNC, "%s over %s: %s: %s", case_name[k], a->transport,
          dist_status_name(rc), dist_errmsg(rc, g));
    CHECK(ctx, strcmp(dist_errmsg(rc, g), dist_pg_errmsg(g)) == 0,
          "dist_errmsg and dist_pg_errmsg differ: '%s' / '%s'", dist_errmsg(rc, g),
          dist_pg_errmsg(g));
    CHECK(ctx, write_report(a, k, ctx->rank, dist_errmsg(rc, g)) == 0, "cannot write");
    dist_destroy_process_group(g);
  }
  /* No barrier on the default group: it is healthy, but keep rank 0 (the
   * store's host) until the others are done. */
  dist_test_finish();
  return 0;
}

static char *slurp(const char *dir, const char *tr, int k, int rank) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s-%s-%d.txt", dir, tr, case_name[k], rank);
  FILE *f = fopen(path, "r");
  cr_assert(f, "no report %s", path);
  static char buf[2][4096];
  char *b = buf[strcmp(tr, "shm") == 0];
  size_t n = fread(b, 1, sizeof buf[0] - 1, f);
  b[n] = '\0';
  fclose(f);
  return b;
}

/* "host X, pid N" -> "host H, pid P", in place. */
static void normalise(char *s) {
  char out[4096];
  size_t o = 0;
  for (const char *p = s; *p && o < sizeof out - 16;) {
    if (!strncmp(p, "host ", 5)) {
      o += (size_t)snprintf(out + o, sizeof out - o, "host H");
      p += 5;
      while (*p && *p != ',' && *p != ')')
        p++;
    } else if (!strncmp(p, "pid ", 4)) {
      o += (size_t)snprintf(out + o, sizeof out - o, "pid P");
      p += 4;
      while (*p >= '0' && *p <= '9')
        p++;
    } else {
      out[o++] = *p++;
    }
  }
  out[o] = '\0';
  strcpy(s, out);
}

static void expect_has(const char *text, const char *what, int k, int rank) {
  cr_expect(strstr(text, what), "%s, rank %d: the report lacks '%s':\n%s", case_name[k], rank,
            what, text);
}

/* What each case's report must say (both values, the field). */
static const char *const must[N_CASES][3] = {
    {"ranks disagree on the count", "float32[4]", "float32[5]"},
    {"ranks disagree on the dtype", "float32[4]", "int32[4]"},
    {"ranks disagree on the operation", "ALL_REDUCE float32[4] op=SUM",
     "ALL_GATHER_INTO_TENSOR float32[4]"},
    {"ranks disagree on the reduce op", "op=SUM", "op=MAX"},
    {"ranks disagree on the root", "BROADCAST float32[65536] root 1 (262144 bytes)",
     "BROADCAST float32[65536] root 2 (262144 bytes)  <- root differs"},
    {"ranks disagree on the split size", "float32[3] to rank 2", "float32[2] from rank 1"},
    {"ranks disagree on the size", "SEND #1 float32[8] to rank 2", "RECV #1 float32[4] from rank 1"},
};

Test(core_report, same_disagreement_reads_the_same_over_shm_and_tcp, .timeout = 200) {
  run_arg shm = {.transport = "shm"}, tcp = {.transport = "tcp"};
  char tmpl[] = "/tmp/dist_report_XXXXXX";
  cr_assert(dist_test_mkdtemp(tmpl));
  snprintf(shm.dir, sizeof shm.dir, "%s", tmpl);
  snprintf(tcp.dir, sizeof tcp.dir, "%s", tmpl);
  cr_assert_eq(dist_test_ranks(3, report_rank, &shm, 90), 0, "shm: %s", dist_test_report());
  cr_assert_eq(dist_test_ranks(3, report_rank, &tcp, 90), 0, "tcp: %s", dist_test_report());
  /* Groups 1..7 after the default group 0, one per case, on both runs. */
  for (int k = 0; k < N_CASES; k++)
    for (int rank = 1; rank <= 2; rank++) {
      char *a = slurp(tmpl, "shm", k, rank), *b = slurp(tmpl, "tcp", k, rank);
      normalise(a);
      normalise(b);
      cr_expect_str_eq(a, b, "%s, rank %d: shm and tcp differ:\n%s\n---\n%s", case_name[k], rank, a, b);
      char head[128];
      snprintf(head, sizeof head, "desync in group %d (%s, 2 ranks) at ", k + 1, case_name[k]);
      cr_expect(strncmp(a, head, strlen(head)) == 0, "%s, rank %d: header is not '%s...':\n%s",
                case_name[k], rank, head, a);
      expect_has(a, " #1: ", k, rank);
      expect_has(a, "\n  rank 1 (group rank 0): ", k, rank);
      expect_has(a, "\n  rank 2 (group rank 1): ", k, rank);
      for (int i = 0; i < 3; i++)
        expect_has(a, must[k][i], k, rank);
    }
}
