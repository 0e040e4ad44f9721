/* test_mpi_sco.c — the checkpoint runner with and without SCO (run under
 * mpirun -np 1..4): loss, input gradient and every weight gradient are
 * bit-identical for budgets 0, partial, all and larger than needed; the
 * tracked boundary bounds of Eq. 4 hold on device and host; L = 1; N = 0 on a
 * rank; per-step pinning; and the refusal paths (a budget beyond host RAM, a
 * pinned allocation failing on one rank) return the same error on every rank
 * instead of deadlocking.  Also the dense block's gradients against finite
 * differences in double (f32 storage). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "model/mlp_block.h"
#include "plateau/host_device.h"
#include "train/ckpt.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

enum { H = 24, I = 40 };

typedef struct result {
  double loss;
  float *dx, *gn, *gu, *gd;
  size_t dev_boundary_peak, host_boundary_peak;
} result;

static void result_free(result *r) {
  free(r->dx), free(r->gn), free(r->gu), free(r->gd);
  memset(r, 0, sizeof *r);
}

static void *host_copy(const void *d, size_t bytes) {
  void *h = malloc(bytes ? bytes : 1);
  ck_assert_int_eq(pl_memcpy_async(pl_dev_stream(dev), h, d, bytes), PL_OK);
  ck_assert_int_eq(pl_stream_sync(pl_dev_stream(dev)), PL_OK);
  return h;
}

/* One step of an L-layer stack on this rank's N tokens; gradients of the
 * last layer block are returned (every block is compared through dx, which
 * depends on all of them, and block 0's weight grads). */
static result run(int L, int64_t N, pl_dtype dt, const pl_sco_budget *budget,
                  pl_sco_release rel, pl_status *status) {
  result r = {0};
  pl_stream *s = pl_dev_stream(dev);
  pl_mlp_block *blocks = calloc((size_t)L, sizeof *blocks);
  void **layers = calloc((size_t)L, sizeof *layers);
  for (int l = 0; l < L; l++) {
    ck_assert_int_eq(pl_mlp_block_init(dev, &blocks[l], H, I, dt, 1234, l),
                     PL_OK);
    layers[l] = &blocks[l];
  }
  size_t bytes = (size_t)N * H * pl_dtype_size(dt);
  void *x0, *g, *dx0;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, "input", &x0), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, "input", &g), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, "input", &dx0), PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, x0, dt, (size_t)N * H, 99,
                               (uint64_t)rank << 32, PL_DIST_NORMAL, 0, 1),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, g, dt, (size_t)N * H, 77,
                               (uint64_t)rank << 32, PL_DIST_NORMAL, 0, 1),
                   PL_OK);
  ck_assert_int_eq(pl_fill(s, dx0, dt, (size_t)N * H, NAN), PL_OK); /* poison */
  pl_ckpt_stack *stack;
  ck_assert_int_eq(
      pl_ckpt_create(dev, L, layers, &pl_mlp_block_layer_ops, H, dt, &stack),
      PL_OK);
  pl_sco *sco = NULL;
  *status = PL_OK;
  if (budget)
    *status = pl_sco_create(dev, world, L, N, H, dt, *budget, rel, &sco);
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  pl_mem_reset_peak(dev, PL_ARENA_HOST);
  if (*status == PL_OK) {
    *status = pl_ckpt_step(stack, sco, x0, g, dx0, N, &r.loss);
    r.dx = host_copy(dx0, bytes);
    r.gn = host_copy(blocks[0].g_norm, H * 4);
    r.gu = host_copy(blocks[0].g_up, (size_t)H * 2 * I * 4);
    r.gd = host_copy(blocks[L - 1].g_down, (size_t)I * H * 4);
    r.dev_boundary_peak = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "boundary");
    r.host_boundary_peak = pl_mem_tag_peak(dev, PL_ARENA_HOST, "boundary");
    int S = pl_sco_count(sco);
    size_t nhb = bytes;
    ck_assert_msg(
        r.dev_boundary_peak <= 2 * nhb + (size_t)(L - S) * nhb,
        "device boundary peak %zu > 2·NHb + (L−|S|)·NHb = %zu (L=%d |S|=%d)",
        r.dev_boundary_peak, 2 * nhb + (size_t)(L - S) * nhb, L, S);
    ck_assert_msg(pl_mem_tag_current(dev, PL_ARENA_HOST, "boundary") <=
                      (size_t)S * nhb,
                  "host boundary");
    ck_assert_msg(r.host_boundary_peak <= (size_t)S * nhb,
                  "host boundary peak %zu > |S|·NHb %zu", r.host_boundary_peak,
                  (size_t)S * nhb);
    ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "boundary"), 0);
    ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "activations"),
                      sizeof(float));
  }
  pl_sco_destroy(sco);
  pl_ckpt_destroy(stack);
  pl_free(dev, x0), pl_free(dev, g), pl_free(dev, dx0);
  for (int l = 0; l < L; l++)
    pl_mlp_block_free(&blocks[l]);
  free(blocks), free(layers);
  return r;
}

static void expect_identical(const result *a, const result *b, size_t dx_bytes,
                             const char *what) {
  ck_assert_msg(memcmp(&a->loss, &b->loss, sizeof a->loss) == 0,
                "%s: loss %.9g vs %.9g", what, a->loss, b->loss);
  ck_assert_msg(memcmp(a->dx, b->dx, dx_bytes) == 0, "%s: dx differs", what);
  ck_assert_msg(memcmp(a->gn, b->gn, H * 4) == 0, "%s: norm grads differ",
                what);
  ck_assert_msg(memcmp(a->gu, b->gu, (size_t)H * 2 * I * 4) == 0,
                "%s: up grads differ", what);
  ck_assert_msg(memcmp(a->gd, b->gd, (size_t)I * H * 4) == 0,
                "%s: down grads differ", what);
}

START_TEST(sco_is_bit_exact_and_bounded) {
  static const int Ls[] = {1, 5};
  for (int li = 0; li < 2; li++)
    for (int dti = 0; dti < 2; dti++) {
      int L = Ls[li];
      pl_dtype dt = dti ? PL_BF16 : PL_F32;
      int64_t N = 13 + 7 * rank; /* uneven per rank */
      size_t nhb = (size_t)N * H * pl_dtype_size(dt);
      pl_status st;
      result ref = run(L, N, dt, NULL, PL_SCO_RELEASE_CONTEXT, &st);
      ck_assert_int_eq(st, PL_OK);
      ck_assert(isfinite(ref.loss) && ref.loss != 0);
      for (int64_t i = 0; i < N * H; i++) {
        float v = dt == PL_F32 ? ref.dx[i]
                               : pl_bf16_to_f32(((const pl_bf16 *)ref.dx)[i]);
        ck_assert_msg(isfinite(v), "dx[%lld] not written", (long long)i);
      }
      /* 0, 2 boundaries on the largest N, all, more than needed */
      const pl_sco_budget budgets[] = {{false, 0},
                                       {false, 2 * nhb + nhb / 2},
                                       {true, 0},
                                       {false, 100 * nhb}};
      const char *names[] = {"0", "partial", "all", "more"};
      for (int bi = 0; bi < 4; bi++)
        for (int rel = 0; rel < 2; rel++) {
          result r = run(L, N, dt, &budgets[bi], (pl_sco_release)rel, &st);
          ck_assert_msg(st == PL_OK, "budget %s: %s", names[bi],
                        pl_last_error());
          char what[96];
          snprintf(what, sizeof what, "L=%d %s budget=%s release=%d", L,
                   pl_dtype_name(dt), names[bi], rel);
          expect_identical(&ref, &r, nhb, what);
          if (bi == 2 ||
              bi == 3) /* all offloaded: at most two restored boundaries */
            ck_assert_msg(r.dev_boundary_peak <= 2 * nhb, "%s: dev peak %zu",
                          what, r.dev_boundary_peak);
          if (bi == 0)
            ck_assert_uint_eq(r.host_boundary_peak, 0);
          result_free(&r);
        }
      /* with everything on the device the peak holds every boundary */
      ck_assert_uint_ge(ref.dev_boundary_peak, (size_t)L * nhb);
      result_free(&ref);
    }
}
END_TEST

START_TEST(selection_agrees_across_ranks) {
  /* rank r's budget fits r+1 boundaries: everyone must select 1 (the min) */
  int64_t N = 10;
  size_t nhb = (size_t)N * H * 4;
  pl_sco_budget b = {false, (uint64_t)(rank + 1) * nhb};
  pl_sco *sco;
  ck_assert_int_eq(pl_sco_create(dev, world, 6, N, H, PL_F32, b,
                                 PL_SCO_RELEASE_CONTEXT, &sco),
                   PL_OK);
  ck_assert_int_eq(pl_sco_count(sco), 1);
  ck_assert(pl_sco_selected(sco, 0) && !pl_sco_selected(sco, 1));
  ck_assert_uint_eq(pl_sco_pinned_bytes(sco), nhb);
  pl_sco_destroy(sco);
}
END_TEST

START_TEST(n_zero_on_a_rank) {
  int64_t N = rank == size - 1 ? 0 : 9;
  pl_status st;
  result ref = run(3, N, PL_F32, NULL, PL_SCO_RELEASE_CONTEXT, &st);
  ck_assert_int_eq(st, PL_OK);
  result r =
      run(3, N, PL_F32, &(pl_sco_budget){true, 0}, PL_SCO_RELEASE_CONTEXT, &st);
  ck_assert_int_eq(st, PL_OK);
  expect_identical(&ref, &r, (size_t)N * H * 4, "N=0 on the last rank");
  if (N == 0)
    ck_assert(ref.loss == 0);
  result_free(&ref), result_free(&r);
}
END_TEST

START_TEST(refusals_reach_every_rank) {
  pl_sco_budget huge = {false, (uint64_t)1 << 62};
  pl_sco *sco = (pl_sco *)0x1;
  /* only rank 0 asks for the impossible: every rank refuses */
  pl_sco_budget mine = rank == 0 ? huge : (pl_sco_budget){true, 0};
  ck_assert_int_eq(pl_sco_create(dev, world, 4, 8, H, PL_F32, mine,
                                 PL_SCO_RELEASE_CONTEXT, &sco),
                   PL_EINVAL);
  ck_assert_ptr_null(sco);
  ck_assert_msg(strstr(pl_last_error(), "exceeds physical host RAM") != NULL,
                "%s", pl_last_error());
  /* "all" on a rank whose boundaries outgrow host RAM (N = 2^40 tokens there):
   * refused up front on every rank, nothing pinned */
  int64_t bigN = rank == size - 1 ? (int64_t)1 << 40 : 8;
  ck_assert_int_eq(pl_sco_create(dev, world, 4, bigN, H, PL_F32,
                                 (pl_sco_budget){true, 0},
                                 PL_SCO_RELEASE_CONTEXT, &sco),
                   PL_EINVAL);
  ck_assert_ptr_null(sco);
  ck_assert_msg(strstr(pl_last_error(), "exceed physical host RAM") != NULL,
                "%s", pl_last_error());
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "boundary"), 0);
  /* the last rank cannot pin (host arena limit): every rank gets PL_ENOMEM */
  if (rank == size - 1)
    pl_mem_set_limit(dev, PL_ARENA_HOST, 100);
  pl_status st =
      pl_sco_create(dev, world, 4, 8, H, PL_F32, (pl_sco_budget){true, 0},
                    PL_SCO_RELEASE_CONTEXT, &sco);
  pl_mem_set_limit(dev, PL_ARENA_HOST, 0);
  ck_assert_int_eq(st, PL_ENOMEM);
  ck_assert_ptr_null(sco);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "boundary"), 0);
  /* per-step pinning: refused at the step, on every rank, nothing run */
  ck_assert_int_eq(pl_sco_create(dev, world, 4, 8, H, PL_F32,
                                 (pl_sco_budget){true, 0}, PL_SCO_RELEASE_STEP,
                                 &sco),
                   PL_OK);
  if (rank == 0)
    pl_mem_set_limit(dev, PL_ARENA_HOST, 100);
  ck_assert_int_eq(pl_sco_begin_step(sco), PL_ENOMEM);
  pl_mem_set_limit(dev, PL_ARENA_HOST, 0);
  ck_assert_int_eq(pl_sco_begin_step(sco), PL_OK);
  ck_assert_int_eq(pl_sco_end_step(sco), PL_OK);
  pl_sco_destroy(sco);
}
END_TEST

/* Finite differences in double on f32 storage: d(loss)/dx and d/dW_up. */
static double loss_of(pl_mlp_block *b, const float *x, const float *g,
                      int64_t N) {
  pl_stream *s = pl_dev_stream(dev);
  size_t bytes = (size_t)N * H * 4;
  float *xd, *yd;
  pl_alloc(dev, PL_ARENA_DEVICE, bytes, "t", (void **)&xd);
  pl_alloc(dev, PL_ARENA_DEVICE, bytes, "t", (void **)&yd);
  memcpy(xd, x, bytes); /* CPU backend: device memory is host-addressable */
  ck_assert_int_eq(pl_mlp_block_forward(b, s, xd, yd, N), PL_OK);
  double l = 0;
  for (int64_t i = 0; i < N * H; i++)
    l += (double)yd[i] * g[i];
  pl_free(dev, xd), pl_free(dev, yd);
  return l;
}

START_TEST(block_gradients_by_finite_differences) {
  if (pl_dev_backend(dev) != PL_BACKEND_CPU)
    return;
  int64_t N = 3;
  pl_mlp_block b;
  ck_assert_int_eq(pl_mlp_block_init(dev, &b, H, I, PL_F32, 5, 0), PL_OK);
  float x[3 * H], g[3 * H], dx[3 * H];
  pl_stream *s = pl_dev_stream(dev);
  pl_rng_fill(s, x, PL_F32, 3 * H, 1, 0, PL_DIST_NORMAL, 0, 1);
  pl_rng_fill(s, g, PL_F32, 3 * H, 2, 0, PL_DIST_NORMAL, 0, 1);
  float *xd, *gd, *dxd;
  pl_alloc(dev, PL_ARENA_DEVICE, sizeof x, "t", (void **)&xd);
  pl_alloc(dev, PL_ARENA_DEVICE, sizeof x, "t", (void **)&gd);
  pl_alloc(dev, PL_ARENA_DEVICE, sizeof x, "t", (void **)&dxd);
  memcpy(xd, x, sizeof x), memcpy(gd, g, sizeof g);
  ck_assert_int_eq(pl_mlp_block_backward(&b, s, xd, gd, dxd, N), PL_OK);
  memcpy(dx, dxd, sizeof dx);
  const double eps = 1e-2;
  for (int i = 0; i < 3 * H; i += 7) {
    float keep = x[i];
    x[i] = keep + (float)eps;
    double lp = loss_of(&b, x, g, N);
    x[i] = keep - (float)eps;
    double lm = loss_of(&b, x, g, N);
    x[i] = keep;
    double fd = (lp - lm) / (2 * eps);
    ck_assert_msg(fabs(fd - dx[i]) <= 2e-2 * (1 + fabs(fd)),
                  "dx[%d]: analytic %g vs fd %g", i, dx[i], fd);
  }
  float *wu = b.w_up;
  for (int i = 0; i < H * 2 * I; i += 97) {
    float keep = wu[i];
    wu[i] = keep + (float)eps;
    double lp = loss_of(&b, x, g, N);
    wu[i] = keep - (float)eps;
    double lm = loss_of(&b, x, g, N);
    wu[i] = keep;
    double fd = (lp - lm) / (2 * eps);
    ck_assert_msg(fabs(fd - b.g_up[i]) <= 2e-2 * (1 + fabs(fd)),
                  "dW_up[%d]: analytic %g vs fd %g", i, b.g_up[i], fd);
  }
  pl_free(dev, xd), pl_free(dev, gd), pl_free(dev, dxd);
  pl_mlp_block_free(&b);
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK) {
    fprintf(stderr, "pl_init: %s\n", pl_last_error());
    return 2;
  }
  /* CUDA when every rank of this node has a GPU of its own (NCCL refuses
   * two ranks on one GPU); else the CPU backend, as the other multi-rank
   * CUDA tests skip */
  const int ngpu = pl_cuda_device_count(), nlocal = pl_local_size();
  pl_backend be = ngpu > 0 && ngpu >= nlocal ? PL_BACKEND_CUDA : PL_BACKEND_CPU;
  if (ngpu > 0 && be == PL_BACKEND_CPU && pl_world_rank() == 0)
    printf("# CUDA skipped: %d ranks on this node, %d GPU(s) (NCCL needs one "
           "GPU per rank): the CPU backend\n",
           nlocal, ngpu);
  if (pl_dev_create(be, -1, &dev) != PL_OK ||
      pl_comm_world(dev, &world) != PL_OK) {
    fprintf(stderr, "setup: %s\n", pl_last_error());
    return 3;
  }
  rank = pl_comm_rank(world), size = pl_comm_size(world);
  const TTest *tests[] = {sco_is_bit_exact_and_bounded,
                          selection_agrees_across_ranks,
                          n_zero_on_a_rank,
                          refusals_reach_every_rank,
                          block_gradients_by_finite_differences,
                          NULL};
  const int failed = pl_check_run("sco", 0, tests, rank, world);
  pl_comm_destroy(world);
  pl_dev_destroy(dev);
  pl_finalize();
  return failed ? 1 : 0;
}
