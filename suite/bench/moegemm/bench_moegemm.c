/* bench_moegemm.c — `plateau bench moegemm`: the MoE layer's grouped expert
 * GEMM against a dense GEMM of equal FLOPs.
 *
 * The grouped GEMM is what ops/moe_expert.c issues per chunk: one GEMM per
 * group of rows of the receive buffer, each with its own expert's weight,
 * through pl__moe_gemm (cublasGemmEx on CUDA, the row-deterministic kernel on
 * the CPU).  Groups are uniform here: balanced routes of N tokens per rank
 * over K chunks give m = k*N / (E*K) rows per (source rank, expert) segment,
 * so a point is (GEMM kind, K, layout, lanes).  Kinds (`gemm`): "up"
 * (m x H)(H x I) as for the gate and up projections, "down" (m x I)(I x H),
 * and "wgrad" X^T dG (H x I, fp32 accumulate) as for the weight gradients.
 * The dense reference is one GEMM with G*m rows (wgrad: inner dimension G*m)
 * and one weight.  FLOPs 2*G*m*H*I for both; ratio = grouped / dense rate.
 * Per rank; a time is the slowest rank's.
 *
 * Layouts (`variant`): "segments" is the source-major grouping (G = E/Ep x Ep
 * groups of m rows, what ops/moe_expert.c issues with --source-major or when a
 * chunk is too large to permute); "expert_major" what it issues by default
 * since the receive buffer is permuted by (expert, source): G = E/Ep groups
 * of Ep*m rows, the same FLOPs in Ep times fewer, larger GEMMs.
 *
 * Lanes: 0 issues the groups one after another on one stream (the layer with
 * lanes = 0); L > 0 spreads them round-robin over the stream and L more (the
 * layer's cfg.lanes), so small GEMMs share the GPU.  Every group is one
 * cublasGemmEx (`gemm_api` loop, as the layer issues them; cuBLAS's
 * grouped-batched call has no bf16-in, fp32-out kernel for the weight
 * gradient, doc/performance/moe.md).
 *
 * For wgrad, acc_gbs is the traffic of the fp32 accumulators (read and
 * written once per group: 8 bytes per element of G x H x I) over the grouped
 * time: the GEMM of a chunk with few rows per expert is bound by it, not by
 * the FLOPs.
 *
 * Ep (--ep, default the launch's ranks): the expert-parallel degree whose
 * per-rank shape is measured, so one GPU measures the GEMMs a rank of an
 * Ep-rank layer issues: E/Ep local experts, each with rows from Ep sources. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moegemm.h"

static const char *const kind_names[] = {"up", "down", "wgrad", NULL};
static const char *const layout_names[] = {"segments", "expert_major", NULL};

static const pl_opt moegemm_opts[] = {
    {"tokens", 0, PL_OPT_SIZE, NULL, "tokens per rank N", 1, 1e9, NULL},
    {"hidden", 0, PL_OPT_SIZE, NULL, "hidden size H", 1, 1e6, NULL},
    {"ffn", 0, PL_OPT_SIZE, NULL, "expert FFN width I", 1, 1e6, NULL},
    {"experts", 0, PL_OPT_INT, NULL, "experts E (a multiple of the ranks)", 1,
     1e6, NULL},
    {"topk", 0, PL_OPT_INT, NULL, "routes per token k", 1, 64, NULL},
    {"chunks", 0, PL_OPT_SIZE_LIST, "1,10", "chunk counts K (1: llep)", 1, 4096,
     NULL},
    {"kinds", 0, PL_OPT_ENUM_LIST, "up,down,wgrad", "GEMM kinds", 0, 0,
     kind_names},
    {"lanes", 0, PL_OPT_SIZE_LIST, "0",
     "extra streams the groups are spread over (0: one stream)", 0,
     PL_MOE_MAX_LANES, NULL},
    {"ep", 0, PL_OPT_INT, "0",
     "expert-parallel degree of the measured per-rank shape (0: the "
     "launch's ranks)",
     0, 1e6, NULL},
    {"layouts", 0, PL_OPT_ENUM_LIST, "segments,expert_major",
     "groups per (source, expert) segment, or per expert with all sources' "
     "rows (the layer's default)",
     0, 0, layout_names},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

/* The dispatch bench's shapes. */
static const pl_preset moegemm_presets[] = {
    {"small", "tokens=512 hidden=128 ffn=64 experts=32 topk=4"},
    {"65k", "tokens=65536 hidden=7168 ffn=2048 experts=128 topk=8"},
    {"32k", "tokens=32768 hidden=4096 ffn=4096 experts=128 topk=4"},
    {NULL, NULL},
};

static pl_status grouped(void *st) {
  return pl__moegemm_run(&((moegemm *)st)->j);
}

static pl_status init(pl_bench_ctx *c, void *st) {
  moegemm *m = st;
  pl_args *a = c->args;
  m->N = (int64_t)pl_args_size(a, "tokens");
  m->H = (int64_t)pl_args_size(a, "hidden");
  m->I = (int64_t)pl_args_size(a, "ffn");
  m->E = (int)pl_args_int(a, "experts");
  m->k = (int)pl_args_int(a, "topk");
  if (m->k > m->E)
    return pl_set_error(PL_EINVAL,
                        "--topk=%d is more than --experts=%d (a token goes to "
                        "k distinct experts)",
                        m->k, m->E);
  m->ep = (int)pl_args_int(a, "ep");
  if (m->ep == 0)
    m->ep = c->size;
  if (m->ep % c->size != 0)
    return pl_set_error(PL_EINVAL,
                        "--ep=%d is not a multiple of the %d ranks (each "
                        "rank measures one rank's shape of it)",
                        m->ep, c->size);
  if (m->E % m->ep != 0)
    return pl_set_error(PL_EINVAL,
                        "--experts=%d is not a multiple of the "
                        "expert-parallel degree %d (--ep, or the ranks)",
                        m->E, m->ep);
  m->nK = pl_args_size_list(a, "chunks", m->Ks, PL_OPT_LIST_MAX);
  m->nk = pl_args_enum_list(a, "kinds", m->kinds, 3);
  m->nl = pl_args_enum_list(a, "layouts", m->lays, 2);
  m->nL = pl_args_size_list(a, "lanes", m->Ls, PL_OPT_LIST_MAX);
  m->Gseg = (m->E / m->ep) * m->ep; /* (source, local expert) segments */
  m->mmax = (int64_t)m->k * m->N / m->E;
  if (m->mmax < 1)
    m->mmax = 1;
  /* K outermost, then lanes, layout, kind */
  m->pts = calloc((size_t)(m->nK * m->nL * m->nl * m->nk) + 1, sizeof *m->pts);
  if (!m->pts)
    return pl_set_error(PL_ENOMEM, "moegemm: point table");
  int np = 0;
  for (int K = 0; K < m->nK; K++)
    for (int L = 0; L < m->nL; L++)
      for (int la = 0; la < m->nl; la++)
        for (int ki = 0; ki < m->nk; ki++)
          m->pts[np++] = (mg_pt){K, L, la, ki};
  c->npoints = np;
  return PL_OK;
}

static pl_status point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  moegemm *m = st;
  gjob *j = &m->j;
  const mg_pt *q = &m->pts[p];
  int kk = q->kind, li = q->lay, lai = q->lanes;
  m->K = (int64_t)m->Ks[q->K];
  int64_t mseg = m->mmax / m->K > 0 ? m->mmax / m->K : 1;
  bool em = m->lays[li] == 1;
  j->G = em ? m->E / m->ep : m->Gseg;
  j->m = em ? mseg * m->ep : mseg;
  j->kind = m->kinds[kk];
  j->nl = (int)m->Ls[lai];
  j->dt = c->cuda ? PL_BF16 : PL_F32;
  snprintf(label, n, "%s %s K=%lld lanes=%d", kind_names[j->kind],
           layout_names[m->lays[li]], (long long)m->K, j->nl);
  pl_row_str(row, "gemm", kind_names[j->kind]);
  pl_row_str(row, "gemm_api", "loop");
  pl_row_str(row, "variant", layout_names[m->lays[li]]);
  pl_row_i64(row, "lanes", j->nl);
  pl_row_i64(row, "ranks", c->size);
  pl_row_i64(row, "ep", m->ep);
  pl_row_i64(row, "tokens", m->N);
  pl_row_i64(row, "hidden", m->H);
  pl_row_i64(row, "ffn", m->I);
  pl_row_i64(row, "experts", m->E);
  pl_row_i64(row, "topk", m->k);
  pl_row_i64(row, "K", m->K);
  pl_row_i64(row, "groups", j->G);
  pl_row_i64(row, "rows", j->m);
  pl_row_str(row, "dtype", pl_dtype_name(j->dt));
  return PL_OK;
}

/* The buffers (once) and, per point, the weights: dt for up/down, fp32
 * gradients for wgrad. */
static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  moegemm *m = st;
  gjob *j = &m->j;
  const size_t G = (size_t)m->Gseg, HI = (size_t)m->H * (size_t)m->I;
  if (!m->ready) {
    pl_status s = pl__moegemm_make(c, m);
    if (s != PL_OK) {
      pl__moegemm_release(c, m);
      return s;
    }
    m->ready = 1;
  }
  j->dense = false;
  if (j->kind == 2)
    return pl_fill(j->s, j->W, PL_F32, G * HI, 0.0);
  return pl_rng_fill(j->s, j->W, j->dt, G * HI, c->seed + 3, 0, PL_DIST_NORMAL,
                     0, 1.0f / sqrtf((float)m->H));
}

/* The dense GEMM of equal FLOPs, timed the same way; the rates. */
static pl_status finish(pl_bench_ctx *c, void *st, int p, pl_row *row,
                        pl_work *w) {
  moegemm *m = st;
  gjob *j = &m->j;
  pl_stats td;
  j->dense = true;
  pl_status s = pl_bench_time(c, pl__moegemm_run, j, j->s, &td);
  j->dense = false;
  PL_TRY(s);
  const double tg = c->meas->t.median;
  w->flops = 2.0 * j->G * (double)j->m * m->H * m->I;
  if (j->kind == 2)
    w->bytes = 8.0 * j->G * (double)m->H * m->I;
  double rg = w->flops / (tg * 1e-3) / 1e12,
         rd = w->flops / (td.median * 1e-3) / 1e12;
  pl_row_f64(row, "dense_ms", td.median);
  pl_row_f64(row, "dense_tflops", rd);
  pl_row_f64(row, "ratio", rg / rd);
  pl_row_str(row, "kernel", "loop");
  pl_row_note(row, "%s",
              !c->cuda ? "the row-deterministic kernel, not cuBLAS"
              : j->nl  ? "cublasGemmEx per group, spread over "
                         "streams, vs one cublasGemmEx"
                       : "cublasGemmEx per group vs one "
                         "cublasGemmEx");
  return PL_OK;
}

static void fini(pl_bench_ctx *c, void *st) {
  pl__moegemm_release(c, st);
  free(((moegemm *)st)->pts);
}

const pl_bench pl_bench_moegemm = {
    .name = "moegemm",
    .summary = "MoE grouped expert GEMM (per segment, as the layer issues it) "
               "vs a dense GEMM of equal FLOPs",
    .opts = moegemm_opts,
    .presets = moegemm_presets,
    .preset_cpu = "small",
    .preset_cuda = "small",
    .columns = "gemm\tgemm_"
               "api\tvariant\tkernel\tlanes\tranks\tep\ttokens\thidden\tffn\t"
               "experts\ttopk\tK\tgroups\trows\tdtype\ttime_ms\ttime_p10_ms\t"
               "time_p90_ms\tdense_ms\ttflops\tdense_tflops\tratio\tacc_gbs",
    .rate = "acc_gbs",
    .state = sizeof(moegemm),
    .init = init,
    .point = point,
    .setup = setup,
    .run = grouped,
    .finish = finish,
    .fini = fini,
};
