/* ctest: labels=unit timeout=120 */
/* The GPU times of CUDA operations reach trace.db: one rank on the fake
 * NCCL (nccl_fake.h; its GPU clock runs 1 ms per event) with the tracer
 * registered. Each CUDA collective leaves an events row of kind 'gpu'
 * naming the operation (group, seq), at its GPU start on the job clock,
 * with "gpu_ns=N" its time on the GPU (tracer/SCHEMA.md); a cpu operation
 * of the same device map leaves none. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <dist/tracer.h>

#include "backends/nccl/nccl_api.h"
#include "api/api.h"
#include "backends/nccl/backend_nccl.h"
#include "trace_util.h"

#include "nccl_fake.h"
#include "tmpdir.h"

Test(nccl_trace, gpu_times_land_in_the_trace, .timeout = 60) {
  char dir[] = "/tmp/dist-gpu-trace-XXXXXX";
  cr_assert_not_null(dist_test_mkdtemp(dir));
  setenv("DIST_TRACE", dir, 1);
  setenv("DIST_JOB_ID", "gpujob", 1);
  event_state = cudaSuccess;
  dist__nccl_set_api(&fake);
  cr_assert_eq(dist_tracer_register(), DIST_OK, "%s", dist_last_errmsg());
  dist_store *st;
  cr_assert_eq(dist_store_hash_create(&st), DIST_OK);
  dist_init_opts o = dist_init_opts_default();
  o.backend = "cpu:cpu,cuda:nccl";
  o.store = st;
  o.rank = 0;
  o.world_size = 1;
  cr_assert_eq(dist_init_process_group(&o), DIST_OK, "%s", dist_last_errmsg());
  float h[2] = {1, 2};
  dist_tensor ht = dist_tensor_1d(h, DIST_FLOAT32, 2);
  cr_assert_eq(dist_all_reduce(&ht, DIST_SUM, NULL, NULL), DIST_OK); /* #1, cpu */
  dist_tensor t = dist_tensor_1d(b0, DIST_FLOAT32, 4);
  t.device.type = DIST_DEVICE_CUDA;
  cr_assert_eq(dist_all_reduce(&t, DIST_SUM, NULL, NULL), DIST_OK); /* #2, sync */
  dist_work *w = NULL;
  cr_assert_eq(dist_broadcast(&t, 0, NULL, &w), DIST_OK);            /* #3, async */
  cr_assert_eq(dist_work_synchronize(w, -1), DIST_OK);
  dist_work_free(w);
  dist_destroy_process_group(NULL);
  dist_tracer_unregister();
  sqlite3 *db = tq_merge(dir, "gpujob", NULL);
  cr_assert_not_null(db);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM events WHERE kind = 'gpu'"), 2);
  cr_assert_eq(tq_int(db, "SELECT count(*) FROM events WHERE kind = 'gpu' AND seq = 1"), 0);
  for (int seq = 2; seq <= 3; seq++) {
    cr_assert_str_eq(tq_text(db, "SELECT message FROM events WHERE kind = 'gpu' AND seq = %d",
                             seq), "gpu_ns=1000000");
    /* The GPU started it after the host enqueued it, and it ended before
     * the host saw it complete (the fake's clock starts at the anchor). */
    cr_assert_eq(tq_int(db, "SELECT count(*) FROM events e JOIN operations o ON "
                            "o.group_id = e.group_id AND o.seq = e.seq WHERE e.kind = 'gpu' "
                            "AND e.seq = %d AND e.group_id = 0 AND o.t_enqueued_ns > 0", seq),
                 1);
  }
  sqlite3_close(db);
  dist_store_destroy(st);
  dist__nccl_set_api(NULL);
}
