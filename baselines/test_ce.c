/* test_ce.c — the single-device vocabulary heads against the f64 dense
 * reference: the dense baseline (baselines/dense_ce), the fused head
 * (baselines/fused_ce: the three-GEMM schedule, = Ring-DTP at P = 1), the
 * blocked fused head (four GEMMs, the schedule of Ring-DTP's meetings) and the
 * token-chunked variant with an f32 dW (pl_fused_ce_chunked), f32 and bf16,
 * all three reductions, over a shape table that reaches every branch (N = 0,
 * N = 1, V = 1, V not a multiple of the block, ignored rows, all rows ignored,
 * every target in one block, peaked logits, one chunk and many, a bound too
 * small for one row); and the bound: the tracked "logits" peak of the fused
 * heads ≤ N×Vb strip bytes, and the three-GEMM head's whole device peak above
 * its inputs and gradients ≤ that strip + 8 bytes a row, while the dense
 * baseline's logits are 3·N·V·4.  Runs on the CPU backend, and on CUDA too
 * when a device is present (CK_NOFORK: no CUDA context before a fork). */
#include <check.h>

#include "core/check_run.h"
#include "dense_ce.h"
#include "fused_ce.h"
#include "ops/test_ce_ref.h"

typedef struct shape {
  int64_t n, h, v, block;
  int ign_every;
  int64_t lo, hi;
  float scale;
} shape;

static const shape shapes[] = {
    {13, 8, 37, 5, 4, 0, 0, 1.0f},     /* non-multiples, ignored rows       */
    {1, 3, 1, 0, 0, 0, 0, 1.0f},       /* N = 1, V = 1                      */
    {0, 8, 10, 4, 0, 0, 0, 1.0f},      /* N = 0                             */
    {17, 16, 64, 64, 3, 10, 12, 4.0f}, /* targets in one block, peaked      */
    {5, 4, 9, 4, 1, 0, 0, 1.0f},       /* every row ignored                 */
    {48, 32, 300, 128, 7, 0, 0, 2.0f}, /* several blocks, last one partial  */
    {9, 5, 40, 1, 0, 0, 0, 8.0f},      /* block 1, very peaked              */
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

typedef pl_status (*head_fn)(pl_stream *, const pl_ce_problem *);

static int run_case(pl_dev *dev, head_fn fn, const char *name, pl_dtype dt,
                    pl_ce_reduction red, const shape *sh) {
  pl_backend be = pl_dev_backend(dev);
  pl_stream *s = pl_dev_stream(dev);
  ref_problem p;
  ref_make(&p, sh->n, sh->h, sh->v, dt, 1234 + (uint64_t)sh->v, sh->ign_every,
           sh->lo, sh->hi, sh->scale);
  size_t nl = red == PL_CE_NONE ? (size_t)p.n : 1;
  double *rl = calloc(nl + 1, sizeof(double));
  double *rdx = calloc((size_t)(p.n * p.h) + 1, sizeof(double));
  double *rdw = calloc((size_t)(p.h * p.v) + 1, sizeof(double));
  ref_solve(&p, red, rl, rdx, rdw);
  void *x = dev_up(dev, p.x, (size_t)(p.n * p.h), dt, "inputs");
  void *w = dev_up(dev, p.w, (size_t)(p.h * p.v), dt, "weights");
  void *t = dev_up_raw(dev, p.t, sizeof(int32_t) * (size_t)p.n, "inputs");
  void *dl = dev_up(dev, p.dl, (size_t)p.n, PL_F32, "inputs");
  void *loss = dev_poison(dev, nl, PL_F32, "outputs");
  void *dx = dev_poison(dev, (size_t)(p.n * p.h), dt, "grads");
  void *dw = dev_poison(dev, (size_t)(p.h * p.v), dt, "grads");
  pl_ce_problem pb = {.dt = dt,
                      .n = p.n,
                      .h = p.h,
                      .v = p.v,
                      .red = red,
                      .ignore = PL_CE_IGNORE_INDEX,
                      .block = sh->block,
                      .x = x,
                      .t = t,
                      .w = w,
                      .dloss = red == PL_CE_NONE ? dl : NULL,
                      .loss = loss,
                      .dx = dx,
                      .dw = dw};
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  pl_status st = fn(s, &pb);
  ck_assert_msg(st == PL_OK, "%s: %s", name, pl_last_error());
  ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
  double *gl = dev_down(dev, loss, nl, PL_F32);
  double *gdx = dev_down(dev, dx, (size_t)(p.n * p.h), dt);
  double *gdw = dev_down(dev, dw, (size_t)(p.h * p.v), dt);
  int f32 = dt == PL_F32;
  /* bf16: the dense baseline and the three-GEMM head round their logits to
   * bf16 (as PyTorch's bf16 GEMM does), the blocked heads keep f32 strips:
   * different loss tolerances. */
  double tl = f32 ? (be == PL_BACKEND_CPU ? 1e-6 : 1e-5)
                  : (fn == pl_dense_ce || fn == pl_fused_ce ? 1e-2 : 2e-5);
  double tg = f32 ? (be == PL_BACKEND_CPU ? 1e-6 : 1e-5) : 2e-2;
  char what[160];
  int ok = 1;
  snprintf(what, sizeof what, "%s %s %s %s n=%lld v=%lld loss", name,
           pl_backend_name(be), pl_dtype_name(dt), pl_ce_reduction_name(red),
           (long long)p.n, (long long)p.v);
  int64_t cnt = 0;
  for (int64_t i = 0; i < p.n; i++)
    cnt += p.t[i] != PL_CE_IGNORE_INDEX;
  if (red == PL_CE_MEAN && cnt == 0) {
    /* mean over no targets: NaN, as PyTorch */
    if (!isnan(gl[0])) {
      fprintf(stderr, "%s: want NaN, got %g\n", what, gl[0]);
      ok = 0;
    }
  } else {
    ok &= ref_close(what, gl, rl, nl, tl);
  }
  snprintf(what + strlen(what) - 4, 8, "dx");
  ok &= ref_close(what, gdx, rdx, (size_t)(p.n * p.h), tg);
  snprintf(what + strlen(what) - 2, 8, "dw");
  ok &= ref_close(what, gdw, rdw, (size_t)(p.h * p.v), tg);
  /* nothing of the head left allocated */
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "logits"), 0);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "ce_state"), 0);
  free(gl), free(gdx), free(gdw), free(rl), free(rdx), free(rdw);
  pl_free(dev, x), pl_free(dev, w), pl_free(dev, t), pl_free(dev, dl);
  pl_free(dev, loss), pl_free(dev, dx), pl_free(dev, dw);
  ref_free(&p);
  return ok;
}

static void run_all(pl_backend be, head_fn fn, const char *name) {
  int bad = 0;
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(be, 0, &dev), PL_OK);
  for (int d = 0; d < 2; d++)
    for (int r = 0; r < 3; r++)
      for (int i = 0; i < NSHAPES; i++)
        bad += !run_case(dev, fn, name, d ? PL_BF16 : PL_F32,
                         (pl_ce_reduction)r, &shapes[i]);
  pl_dev_destroy(dev);
  ck_assert_msg(bad == 0, "%s on %s: %d cases out of tolerance (see stderr)",
                name, pl_backend_name(be), bad);
}

START_TEST(dense_cpu) {
  run_all(PL_BACKEND_CPU, pl_dense_ce, "dense");
}
END_TEST
START_TEST(fused_cpu) {
  run_all(PL_BACKEND_CPU, pl_fused_ce, "fused");
}
END_TEST
START_TEST(blocked_cpu) {
  run_all(PL_BACKEND_CPU, pl_fused_ce_blocked, "blocked");
}
END_TEST
START_TEST(chunked_cpu) {
  run_all(PL_BACKEND_CPU, pl_fused_ce_chunked, "chunked");
}
END_TEST

/* Rows per chunk of the three-GEMM head: the largest balanced chunk whose
 * logits (Nc·V values of dt) fit the blocked strip bound N·Vb·(6|4) bytes;
 * 0 when not one row fits (the blocked schedule runs then). */
START_TEST(head3_rows) {
  pl_ce_problem pb = {
      .dt = PL_BF16, .n = 16384, .h = 7168, .v = 200000, .block = 4096};
  /* bound 16384·4096·6 B; a row 400,000 B: ≤ 1006 rows, 17 chunks of 976 */
  ck_assert_uint_eq(pl_ce_strip_bound(&pb), (size_t)16384 * 4096 * 6);
  ck_assert_int_eq(pl_ce_head3_rows(&pb), 976);
  pb.n = 32768;
  ck_assert_int_eq(pl_ce_head3_rows(&pb), 1936);
  pb.dt = PL_F32;
  pb.n = 16384; /* bound 16384·4096·4 B, a row 800,000 B: 49 chunks of 335 */
  ck_assert_int_eq(pl_ce_head3_rows(&pb), 335);
  /* the dtypes' default blocks: f32 16384 (bound 16384·16384·4 B: <= 1342
   * rows, 13 chunks of 1264), bf16 4096 (976 as above) */
  pb.block = 0;
  ck_assert_uint_eq(pl_ce_strip_bound(&pb), (size_t)16384 * 16384 * 4);
  ck_assert_int_eq(pl_ce_head3_rows(&pb), 1264);
  pb.dt = PL_BF16;
  ck_assert_int_eq(pl_ce_head3_rows(&pb), 976);
  for (int dt = 0; dt < 2; dt++)
    for (int64_t n = 1; n < 300; n += 7)
      for (int64_t v = 1; v < 900; v += 89)
        for (int64_t b = 1; b < 70; b += 17) {
          pb.dt = dt ? PL_BF16 : PL_F32;
          pb.n = n, pb.v = v, pb.block = b;
          int64_t nc = pl_ce_head3_rows(&pb);
          size_t row = (size_t)v * pl_dtype_size(pb.dt);
          if (nc == 0) {
            ck_assert_uint_lt(pl_ce_strip_bound(&pb), row);
            continue;
          }
          ck_assert_int_le(nc, n);
          ck_assert_uint_le((size_t)nc * row, pl_ce_strip_bound(&pb));
          /* no fewer chunks possible within the bound */
          int64_t cap = (int64_t)(pl_ce_strip_bound(&pb) / row);
          ck_assert_int_eq((n + nc - 1) / nc, (n + cap - 1) / cap);
        }
}
END_TEST

START_TEST(heads_cuda) {
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return;
  }
  run_all(PL_BACKEND_CUDA, pl_dense_ce, "dense");
  run_all(PL_BACKEND_CUDA, pl_fused_ce, "fused");
  run_all(PL_BACKEND_CUDA, pl_fused_ce_blocked, "blocked");
  run_all(PL_BACKEND_CUDA, pl_fused_ce_chunked, "chunked");
}
END_TEST

/* The bound: fused "logits" peak ≤ N×Vb×(4|6) bytes; dense = 3·N·V·4 > it. */
static void bound_case(pl_backend be, pl_dtype dt) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(be, 0, &dev), PL_OK);
  pl_stream *s = pl_dev_stream(dev);
  ref_problem p;
  ref_make(&p, 40, 16, 1000, dt, 99, 5, 0, 0, 1.0f);
  void *x = dev_up(dev, p.x, (size_t)(p.n * p.h), dt, "inputs");
  void *w = dev_up(dev, p.w, (size_t)(p.h * p.v), dt, "weights");
  void *t = dev_up_raw(dev, p.t, sizeof(int32_t) * (size_t)p.n, "inputs");
  void *loss = dev_poison(dev, 1, PL_F32, "outputs");
  void *dx = dev_poison(dev, (size_t)(p.n * p.h), dt, "grads");
  void *dw = dev_poison(dev, (size_t)(p.h * p.v), dt, "grads");
  pl_ce_problem pb = {.dt = dt,
                      .n = p.n,
                      .h = p.h,
                      .v = p.v,
                      .red = PL_CE_MEAN,
                      .ignore = PL_CE_IGNORE_INDEX,
                      .block = 64,
                      .x = x,
                      .t = t,
                      .w = w,
                      .loss = loss,
                      .dx = dx,
                      .dw = dw};
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  ck_assert_int_eq(pl_fused_ce_blocked(s, &pb), PL_OK);
  ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
  size_t fused = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "logits");
  size_t bound = pl_fused_ce_logits_bound(&pb);
  ck_assert_uint_eq(bound, (size_t)40 * 64 * (dt == PL_BF16 ? 6 : 4));
  ck_assert_msg(fused <= bound && fused > 0,
                "fused logits peak %zu > bound %zu", fused, bound);
  /* the three-GEMM head, several chunks (bf16: 7 rows of 1000, f32: 2):
   * its logits within the same bound, and its whole peak above what was live
   * (inputs, the caller's gradients) at most that strip + 8 bytes a row + the
   * two loss statistics */
  ck_assert_int_eq(pl_ce_head3_rows(&pb), dt == PL_BF16 ? 7 : 2);
  pl_mem_stats m0, m1;
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m0), PL_OK);
  ck_assert_int_eq(pl_fused_ce(s, &pb), PL_OK);
  ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m1), PL_OK);
  size_t head3 = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "logits");
  ck_assert_uint_eq(head3,
                    (size_t)pl_ce_head3_rows(&pb) * 1000 * pl_dtype_size(dt));
  ck_assert_msg(head3 <= bound, "three-GEMM logits peak %zu > bound %zu", head3,
                bound);
  ck_assert_msg(m1.peak - m0.current <= bound + 8 * (size_t)p.n + 8,
                "three-GEMM peak above its inputs %zu > %zu",
                m1.peak - m0.current, bound + 8 * (size_t)p.n + 8);
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  ck_assert_int_eq(pl_fused_ce_chunked(s, &pb), PL_OK);
  ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
  size_t chunked = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "logits");
  size_t cbound = pl_fused_ce_chunked_logits_bound(&pb);
  /* Nc = ⌊40·64/1000⌋ = 2 rows of the full vocabulary */
  ck_assert_int_eq(pl_fused_ce_chunk_rows(&pb), 2);
  ck_assert_msg(chunked <= cbound && cbound <= bound,
                "chunked logits peak %zu, bound %zu, strip bound %zu", chunked,
                cbound, bound);
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  ck_assert_int_eq(pl_dense_ce(s, &pb), PL_OK);
  ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
  size_t dense = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "logits");
  ck_assert_uint_eq(dense, pl_dense_ce_logits_peak(p.n, p.v));
  ck_assert_msg(dense > bound, "dense %zu should exceed the strip bound %zu",
                dense, bound);
  /* dx_alloc mode: the dense head allocates its gradients after its peak,
   * like PyTorch's autograd, so the live set at the peak holds no "grads"
   * beyond what the caller already had. */
  void *gx = NULL, *gw = NULL;
  pb.dx = pb.dw = NULL;
  pb.dx_alloc = &gx;
  pb.dw_alloc = &gw;
  size_t grads_before = pl_mem_tag_current(dev, PL_ARENA_DEVICE, "grads");
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  ck_assert_int_eq(pl_dense_ce(s, &pb), PL_OK);
  ck_assert_ptr_nonnull(gx);
  ck_assert_ptr_nonnull(gw);
  pl_mem_stats ms;
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ms), PL_OK);
  for (int i = 0; i < ms.n_tags; i++)
    if (!strcmp(ms.at_peak[i].tag, "grads"))
      ck_assert_uint_eq(ms.at_peak[i].bytes, grads_before);
  double *a = dev_down(dev, gw, (size_t)(p.h * p.v), dt);
  double *b = dev_down(dev, dw, (size_t)(p.h * p.v), dt);
  ck_assert(ref_close("dense dw_alloc", a, b, (size_t)(p.h * p.v), 0.0));
  free(a), free(b);
  pl_free(dev, gx), pl_free(dev, gw);
  pl_free(dev, x), pl_free(dev, w), pl_free(dev, t);
  pl_free(dev, loss), pl_free(dev, dx), pl_free(dev, dw);
  ref_free(&p);
  pl_dev_destroy(dev);
}

START_TEST(bound_cpu) {
  bound_case(PL_BACKEND_CPU, PL_F32);
  bound_case(PL_BACKEND_CPU, PL_BF16);
}
END_TEST

START_TEST(bound_cuda) {
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return;
  }
  bound_case(PL_BACKEND_CUDA, PL_F32);
  bound_case(PL_BACKEND_CUDA, PL_BF16);
}
END_TEST

/* Bad input is PL_EINVAL with a message, never a crash. */
START_TEST(bad_input) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  float loss;
  pl_ce_problem pb = {.dt = PL_I32, .n = 1, .h = 1, .v = 1, .loss = &loss};
  ck_assert_int_eq(pl_dense_ce(pl_dev_stream(dev), &pb), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "dtype"));
  pb.dt = PL_F32;
  pb.h = 0;
  ck_assert_int_eq(pl_fused_ce(pl_dev_stream(dev), &pb), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "h=0"));
  pl_ce_reduction r;
  ck_assert_int_eq(pl_ce_reduction_parse("avg", &r), PL_EINVAL);
  pl_dev_destroy(dev);
}
END_TEST

int main(void) {
  const TTest *tests[] = {dense_cpu,  fused_cpu, blocked_cpu, chunked_cpu,
                          head3_rows, bound_cpu, bad_input,   heads_cuda,
                          bound_cuda, NULL};
  return pl_check_suite("ce", 300, tests, NULL, NULL, CK_NOFORK, 0)
             ? 1
             : 0; /* CUDA cases: no fork after a context */
}
