/* test_mpi_fsdp2_cuda.c — the FSDP2 baseline on CUDA against the same
 * baseline on the CPU backend, bf16, one GPU per rank (mpirun -np 1..4;
 * prints "skipped" and passes when the node has fewer GPUs than ranks, or
 * none).
 *
 * A tiny model of CUDA shapes (H 256, d 64 and 128, GQA 2:1, a dense first
 * layer and a MoE layer of 8 experts, top-2, widths 64 / 128, V 512), S 256
 * per CP group, in two configurations: ring attention over all ranks with
 * experts over all ranks, AC selective and the optimizer on the GPU; and
 * cp 1, ep 1, AC full with the optimizer offloaded to the host
 * (CPUOffloadPolicy: pinned shards, the copies each way).  The same weights
 * and tokens on both backends (the counter RNG gives the same bits).
 * Checked: the loss of the first forward/backward and every parameter's
 * gradient gathered to the full tensor, normwise, within bf16 tolerance
 * (3e-2 loss, 8e-2 dense parameters, 0.2 router and experts: a route near a
 * top-k tie may go another way on the other backend), then three training
 * steps' losses within 3e-2.  Every error is printed. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp2.h"
#include "train/data.h"
#include "train/trainer_testlib.h"

static pl_dev *cdev, *gdev;
static pl_comm *cworld, *gworld;
static int rank, size, have_gpus;

/* The FSDP2 trainer as tt_grads_close sees it. */
static int nparams(const void *t) {
  return pl_fsdp2_nparams(t);
}
static pl_status info(const void *t, int i, pl_param_info *out) {
  return pl_fsdp2_param_info(t, i, out);
}
static pl_status gather(void *t, int i, bool grad, float *out) {
  return pl_fsdp2_gather(t, i, grad, out);
}
static const tt_trainer_ops ops = {nparams, info, gather};

static void check_one(int d, int ring) {
  pl_model_cfg m;
  tt_cuda_model(d, &m);
  pl_fsdp2_cfg c = pl_fsdp2_cfg_default();
  c.dt = PL_BF16;
  c.hp.lr = 3e-3;
  if (ring) {
    c.cp = size, c.ep = size;
    c.ac = PL_FSDP2_AC_SELECTIVE;
  } else {
    c.optim = PL_FSDP2_OPTIM_CPU;
  }
  const int64_t S = 256;
  char name[96];
  pl_fsdp2_cfg_name(&c, name, sizeof name);
  pl_fsdp2 *t[2];
  pl_dev *devs[2] = {cdev, gdev};
  pl_comm *worlds[2] = {cworld, gworld};
  for (int b = 0; b < 2; b++)
    ck_assert_msg(pl_fsdp2_create(devs[b], worlds[b], &m, &c, S, &t[b]) ==
                      PL_OK,
                  "%s %s: %s", b ? "cuda" : "cpu", name, pl_last_error());
  pl_data *data;
  ck_assert_int_eq(pl_data_synthetic(m.V, 21, &data), PL_OK);
  int32_t *tok = malloc((size_t)pl_fsdp2_tokens_per_rank(t[0]) * 4);
  pl_step_result r[2];
  ck_assert_int_eq(pl_fsdp2_batch(t[0], data, 0, tok), PL_OK);
  for (int b = 0; b < 2; b++)
    ck_assert_msg(pl_fsdp2_forward_backward(t[b], tok, &r[b]) == PL_OK,
                  "%s: %s", b ? "cuda" : "cpu", pl_last_error());
  const double el = fabs(r[1].loss - r[0].loss) / fabs(r[0].loss);
  if (rank == 0)
    printf("# d=%d %s loss cpu %.6f cuda %.6f (rel %.3g)\n", d, name, r[0].loss,
           r[1].loss, el);
  const int ok = tt_grads_close(&ops, t[0], t[1], rank) && el < 3e-2;
  ck_assert_msg(ok, "d=%d %s: CUDA beyond bf16 tolerance of the CPU", d, name);
  for (int b = 0; b < 2; b++)
    ck_assert_int_eq(pl_fsdp2_update(t[b], NULL), PL_OK);
  for (int s = 1; s <= 3; s++) {
    ck_assert_int_eq(pl_fsdp2_batch(t[0], data, s, tok), PL_OK);
    for (int b = 0; b < 2; b++)
      ck_assert_msg(pl_fsdp2_step(t[b], tok, &r[b]) == PL_OK, "%s",
                    pl_last_error());
    const double e = fabs(r[1].loss - r[0].loss) / fabs(r[0].loss);
    if (rank == 0)
      printf("# d=%d %s step %d loss cpu %.6f cuda %.6f (rel %.3g)\n", d, name,
             s + 1, r[0].loss, r[1].loss, e);
    ck_assert_msg(e < 3e-2, "d=%d %s step %d: loss %.6f (cuda) vs %.6f (cpu)",
                  d, name, s + 1, r[1].loss, r[0].loss);
  }
  free(tok);
  pl_data_close(data);
  for (int b = 0; b < 2; b++)
    pl_fsdp2_destroy(t[b]);
}

START_TEST(cuda_matches_cpu) {
  if (!have_gpus)
    return;
  for (int d = 64; d <= 128; d *= 2) {
    check_one(d, 1);
    check_one(d, 0);
  }
}
END_TEST

int main(int argc, char **argv) {
  const TTest *tests[] = {cuda_matches_cpu, NULL};
  return tt_cuda_main(argc, argv, "fsdp2_cuda", 600, tests, &cdev, &gdev,
                      &cworld, &gworld, &rank, &size, &have_gpus);
}
