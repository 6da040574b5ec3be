/* sgd.c - distributed synchronous SGD (torch tutorial "Distributed
 * Training"): every rank trains the same small model (a linear regression
 * with 16 weights and a bias) on its own shard of synthetic data, and after
 * each minibatch the ranks average their gradients with all_reduce(AVG), so
 * the models stay identical. Each rank prints its loss every epoch; it
 * falls on every rank.
 *
 *     build/bin/distrun -n 2 build/bin/sgd [epochs] */
#include <math.h>

#include "example_util.h"

#define DIM 16
#define SAMPLES 512 /* per rank */
#define BATCH 32

typedef struct shard {
  float x[SAMPLES][DIM];
  float y[SAMPLES];
} shard;

static uint64_t next_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static float uniform(uint64_t *s) { return (float)(next_rand(s) % 20001) / 10000.0f - 1.0f; }

/* y = x . w_true + 0.5 + noise; w_true is the same on every rank, the
 * samples differ by rank. */
static void make_shard(shard *d, int rank) {
  uint64_t truth = 42, s = 1000 + (uint64_t)rank;
  float w_true[DIM];
  for (int j = 0; j < DIM; j++)
    w_true[j] = uniform(&truth) * 2;
  for (int i = 0; i < SAMPLES; i++) {
    float y = 0.5f;
    for (int j = 0; j < DIM; j++) {
      d->x[i][j] = uniform(&s);
      y += d->x[i][j] * w_true[j];
    }
    d->y[i] = y + 0.01f * uniform(&s);
  }
}

/* Gradient of the mean squared error over samples [lo, hi) into g (DIM
 * weights then the bias); returns the loss. */
static float gradient(const shard *d, const float *w, int lo, int hi, float *g) {
  memset(g, 0, sizeof(float) * (DIM + 1));
  float loss = 0;
  for (int i = lo; i < hi; i++) {
    float err = w[DIM] - d->y[i];
    for (int j = 0; j < DIM; j++)
      err += w[j] * d->x[i][j];
    loss += err * err;
    for (int j = 0; j < DIM; j++)
      g[j] += 2 * err * d->x[i][j] / (float)(hi - lo);
    g[DIM] += 2 * err / (float)(hi - lo);
  }
  return loss / (float)(hi - lo);
}

int main(int argc, char **argv) {
  example_init(argc, argv, "Synchronous SGD with gradients averaged by all_reduce.", 1);
  int epochs = argc > 1 ? atoi(argv[1]) : 10;
  int rank = dist_get_rank(NULL);
  shard *d = malloc(sizeof *d);
  make_shard(d, rank);
  float w[DIM + 1] = {0}, g[DIM + 1];
  dist_tensor tw = dist_tensor_1d(w, DIST_FLOAT32, DIM + 1);
  dist_tensor tg = dist_tensor_1d(g, DIST_FLOAT32, DIM + 1);
  TRY(dist_broadcast(&tw, 0, NULL, NULL)); /* the same start everywhere */
  for (int epoch = 0; epoch < epochs; epoch++) {
    float epoch_loss = 0;
    for (int b = 0; b < SAMPLES / BATCH; b++) {
      epoch_loss += gradient(d, w, b * BATCH, (b + 1) * BATCH, g);
      TRY(dist_all_reduce(&tg, DIST_AVG, NULL, NULL));
      for (int j = 0; j <= DIM; j++)
        w[j] -= 0.05f * g[j];
    }
    printf("Rank %d, epoch %d: loss %.6f\n", rank, epoch, (double)(epoch_loss / (SAMPLES / BATCH)));
    fflush(stdout);
  }
  /* The averaged updates kept every rank's model identical. */
  float w0[DIM + 1];
  memcpy(w0, w, sizeof w0);
  dist_tensor t0 = dist_tensor_1d(w0, DIST_FLOAT32, DIM + 1);
  TRY(dist_broadcast(&t0, 0, NULL, NULL));
  int same = !memcmp(w0, w, sizeof w0);
  printf("Rank %d: model %s rank 0's\n", rank, same ? "matches" : "DIFFERS FROM");
  free(d);
  TRY(dist_destroy_process_group(NULL));
  return same ? 0 : 1;
}
