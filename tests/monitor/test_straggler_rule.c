/* ctest: labels=unit timeout=30 */
/* The straggler rule (mon_stats.c, dist__mon_stats_judge) on crafted
 * statistics: who arrived last at each compared collective, how long after
 * the first and after the second latest. The figures are the ones measured
 * on a 2-core machine (each run's own clocks said who was last): a
 * balanced job of 12 ranks over TCP, where the scheduler makes the high
 * ranks last two to six times as often as the low ones, 1.1-1.3 ms after
 * the first and 0.12 ms after the second latest whoever it is, names nobody
 * although it passes the frequency and 1 ms tests; a rank that sleeps
 * 50 ms per step, or every fourth step, is named; ranks that all sleep at
 * random, plus the scheduler's favour for one of them, name nobody. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "mon_int.h"

#define MS 1000000LL
#define US 1000LL

static mon_lasts t;
static int size;

static void setup_size(int n) {
  size = n;
  cr_assert(dist__mon_lasts_alloc(&t, n));
  dist__mon_lasts_reset(&t, n);
}

static void teardown(void) { dist__mon_lasts_free(&t); }

/* k collectives where rank r was last, skew after the first, gap after the
 * second latest; jitter (a deterministic +-1/8) keeps the gaps spread over
 * neighbouring bins as measured ones are. */
static void lasts(int r, int k, int64_t skew, int64_t gap) {
  for (int i = 0; i < k; i++) {
    int64_t j = (i % 5 - 2) * gap / 16;
    dist__mon_lasts_add(&t, r, skew + (i % 7 - 3) * skew / 24, gap + j);
  }
}

/* 3000 back-to-back all_reduces, 12 ranks over TCP on 2 cores, DETAIL:
 * how often each rank was last (a measured run that named rank 11). */
static const int balanced_12[12] = {186, 201, 163, 178, 197, 181, 235, 231, 233, 313, 371, 511};

Test(straggler_rule, a_balanced_oversubscribed_job_names_nobody, .fini = teardown) {
  setup_size(12);
  for (int r = 0; r < 12; r++)
    lasts(r, balanced_12[r], r == 11 ? 1300 * US : 1100 * US, 120 * US);
  /* rank 11: last in 17% where chance is 8.3% (p far below 1e-5), 1.3 ms
   * late in most: what the frequency and lateness tests named */
  cr_assert_eq(t.last[11], 511);
  cr_assert_eq(dist__mon_stats_judge(&t, size), -1);
}

Test(straggler_rule, one_swapped_out_moment_does_not_make_a_straggler, .fini = teardown) {
  setup_size(12);
  for (int r = 0; r < 12; r++)
    lasts(r, balanced_12[r], 1100 * US, 120 * US);
  lasts(11, 1, 2000 * MS, 2000 * MS); /* a mean of 5 ms more, the median unmoved */
  cr_assert_eq(dist__mon_stats_judge(&t, size), -1);
}

Test(straggler_rule, a_rank_sleeping_50_ms_each_step_is_named, .fini = teardown) {
  setup_size(12);
  lasts(1, 60, 50600 * US, 49200 * US);
  lasts(4, 1, 2 * MS, 30 * US); /* the others are last once: no reference */
  cr_assert_eq(dist__mon_stats_judge(&t, size), 1);
}

Test(straggler_rule, a_rank_sleeping_every_fourth_step_is_named, .fini = teardown) {
  setup_size(12);
  for (int r = 0; r < 12; r++)
    lasts(r, r == 1 ? 13 : 26, 1100 * US, 120 * US); /* the spread's lasts */
  lasts(1, 100, 50 * MS, 49 * MS);
  cr_assert_eq(dist__mon_stats_judge(&t, size), 1);
}

Test(straggler_rule, a_rank_3_ms_slower_on_a_loaded_machine_is_named, .fini = teardown) {
  /* measured: rank 1 computes 5 ms a step where the others compute 2 ms,
   * 12 ranks on 2 cores: last in 246 of 601, its median gap about 1 ms
   * where the others' is 0.3 ms */
  setup_size(12);
  for (int r = 0; r < 12; r++)
    lasts(r, r == 1 ? 246 : 32, r == 1 ? 21 * MS : 17 * MS, r == 1 ? 1100 * US : 300 * US);
  cr_assert_eq(dist__mon_stats_judge(&t, size), 1);
}

Test(straggler_rule, random_sleepers_and_the_schedulers_favourite_name_nobody, .fini = teardown) {
  /* each rank sleeps 50 ms at one step in ten: all are last about as often
   * (and then 49 ms after the rest); rank 11 is also last at most of the
   * steps nobody slept (the scheduler's order), enough to be significant */
  setup_size(12);
  for (int r = 0; r < 12; r++)
    lasts(r, 160, 50 * MS, 49 * MS);
  lasts(11, 250, 1200 * US, 120 * US);
  lasts(3, 50, 1200 * US, 120 * US);
  cr_assert_eq(dist__mon_stats_judge(&t, size), -1);
}

Test(straggler_rule, the_tail_of_a_spread_is_not_late_alone, .fini = teardown) {
  /* always last, 1.3 ms after the first, but 0.12 ms after the next: with
   * no other rank last often enough to compare with, it must arrive late
   * alone to be named */
  setup_size(12);
  lasts(11, 2995, 1300 * US, 120 * US);
  lasts(10, 5, 1300 * US, 120 * US);
  cr_assert_eq(dist__mon_stats_judge(&t, size), -1);
}

Test(straggler_rule, of_two_ranks_only_the_distinctly_later_one_is_named, .fini = teardown) {
  setup_size(2);
  lasts(1, 700, 1200 * US, 1200 * US); /* last more often, but no later */
  lasts(0, 300, 1200 * US, 1200 * US);
  cr_assert_eq(dist__mon_stats_judge(&t, size), -1);
  dist__mon_lasts_reset(&t, size);
  lasts(1, 900, 40 * MS, 40 * MS);
  lasts(0, 100, 1 * MS, 1 * MS);
  cr_assert_eq(dist__mon_stats_judge(&t, size), 1);
}

Test(straggler_rule, a_block_of_20_with_one_late_rank_names_it, .fini = teardown) {
  /* DIST_STATS_EVERY=20: the block's own verdict */
  setup_size(3);
  lasts(1, 20, 50 * MS, 49 * MS);
  cr_assert_eq(dist__mon_stats_judge(&t, size), 1);
}

Test(straggler_rule, microseconds_or_a_few_hiccups_name_nobody, .fini = teardown) {
  setup_size(4);
  lasts(3, 955, 80 * US, 40 * US); /* systematically last, by microseconds */
  lasts(0, 573, 90 * US, 40 * US);
  cr_assert_eq(dist__mon_stats_judge(&t, size), -1);
  dist__mon_lasts_reset(&t, size);
  lasts(2, 9, 100 * MS, 100 * MS); /* fewer than 10 */
  cr_assert_eq(dist__mon_stats_judge(&t, size), -1);
}
