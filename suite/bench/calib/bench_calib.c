/* bench_calib.c — `plateau bench calib`: the machine's ceilings in one run.
 *
 * Every other bench reports "% of the measured ceiling", so the ceilings are
 * measured here, the same way, on the same launch (`variant` is the test):
 *   h2d, d2h   pinned host <-> device copies, one direction        (per rank)
 *   bidir      both at once on two streams; bytes = 2·S              (per rank)
 *   d2d        device copy; bytes counted read + write = 2·S         (per rank)
 *   gemm       m = n = k = G; FLOPs 2·G³ (bf16 in/out, fp32 accumulate on
 *              CUDA; fp32 on the CPU backend)                        (per rank)
 *   mem_read   host memory (the pinned arena the optimizer's state lives in),
 *              every OpenMP thread over its contiguous range: a sum of M
 *              bytes of 64-bit words; bytes = M                      (per rank)
 *   mem_write  the same with non-temporal 16-byte stores; bytes = M
 *   mem_copy   loads and non-temporal stores; bytes counted read + write = 2·M
 *              (the CPU AdamW update streams 14 bytes read and 14 written a
 *              parameter through this memory: its floor is 28·Θ / copy rate)
 *   allreduce  S bytes of f32, sum;     busbw = algbw · 2(n−1)/n    (all ranks)
 *   alltoall   S bytes per rank, equal counts through pl_alltoallv;
 *                                       busbw = algbw · (n−1)/n
 *   sendrecv   ring hop r -> r+1, S bytes each way; busbw = algbw
 * algbw = bytes / time (nccl-tests' definitions).  The per-rank tests run on
 * every rank at once (each on its own GPU), as the optimizer and the offload
 * use the links; --solo runs them on rank 0 alone (one GPU's ceiling).
 *
 * Every transfer is verified: inputs are counter-RNG draws (never zeros),
 * outputs poisoned before the run, and after timing each received buffer is
 * compared bit for bit with the draws it must hold (all-reduce: with their
 * sum, reduction length n).  The GEMM is compared with a double-precision
 * reference on 256 sampled entries (reduction length G); the host-memory
 * passes with the sum, value or copy they must have produced.  On the CPU
 * backend the "host link" is memcpy between the two arenas and the note says
 * so.  The host-memory tests are in the cuda preset and on request
 * (--tests mem_read,mem_write,mem_copy), one point each of --mem-size bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "calib.h"

static const char *const test_names[] = {
    "h2d",       "d2h",      "bidir",     "d2d",      "gemm",     "mem_read",
    "mem_write", "mem_copy", "allreduce", "alltoall", "sendrecv", NULL};
/* per test: nccl-tests' bus factor (n: ranks; 0 = 1), the note on CUDA and
 * on the CPU */
static const struct {
  int bus;
  const char *cuda, *cpu;
} tdef[T_COUNT] = {
    {0, "pinned host", "cpu backend: memcpy between arenas"},
    {0, "pinned host", "cpu backend: memcpy between arenas"},
    {0, "pinned host, two streams; bytes each way, bw counts both",
     "cpu backend: memcpy, streams serialize; bw counts both"},
    {0, "bw counts read+write", "cpu backend: memcpy; bw counts read+write"},
    {0, "fp32 accumulate", "cpu backend: BLAS"},
    {0, "host memory (pinned), OpenMP threads", "host memory, OpenMP threads"},
    {0, "host memory (pinned), non-temporal stores",
     "host memory, non-temporal stores"},
    {0, "host memory (pinned), non-temporal stores; bw counts read+write",
     "host memory, non-temporal stores; bw counts read+write"},
    {2, "busbw = algbw*2(n-1)/n", "busbw = algbw*2(n-1)/n"},
    {1, "pl_alltoallv equal counts; busbw = algbw*(n-1)/n",
     "pl_alltoallv equal counts; busbw = algbw*(n-1)/n"},
    {0, "ring hop; busbw = algbw", "ring hop; busbw = algbw"},
};
static const char *const gemm_dtypes[] = {"bf16", "f32", NULL};

static const pl_opt calib_opts[] = {
    {"sizes", 0, PL_OPT_SIZE_LIST, NULL,
     "transfer sizes per point, list or range lo:hi:xF", 4, 68719476736.0,
     NULL},
    {"gemm-size", 0, PL_OPT_SIZE, NULL, "GEMM m = n = k", 1, 65536, NULL},
    {"gemm-dtype", 0, PL_OPT_ENUM, NULL, "GEMM input/output dtype", 0, 0,
     gemm_dtypes},
    {"mem-size", 0, PL_OPT_SIZE, NULL,
     "bytes of a host-memory test buffer (mem_read, mem_write, mem_copy)", 4096,
     1e13, NULL},
    {"tests", 0, PL_OPT_ENUM_LIST,
     "h2d,d2h,bidir,d2d,gemm,allreduce,alltoall,sendrecv",
     "which ceilings to measure", 0, 0, test_names},
    {"solo", 0, PL_OPT_FLAG, NULL,
     "run the per-rank tests (h2d d2h bidir d2d gemm) on rank 0 alone, the "
     "others idle: one GPU's ceiling instead of all GPUs at once",
     0, 0, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

static const pl_preset calib_presets[] = {
    {"cuda", "sizes=64Ki:256Mi:x4 gemm-size=8192 gemm-dtype=bf16 "
             "mem-size=2Gi tests=h2d,d2h,bidir,d2d,gemm,mem_read,mem_write,"
             "mem_copy,allreduce,alltoall,sendrecv"},
    {"cpu", "sizes=4Ki:16Mi:x4 gemm-size=512 gemm-dtype=f32 mem-size=64Mi"},
    {NULL, NULL},
};

static bool per_rank(int t) {
  return t <= T_MCOPY;
}

/* one point (not one per transfer size) */
static bool single(int t) {
  return t == T_GEMM || (t >= T_MREAD && t <= T_MCOPY);
}

static pl_status init(pl_bench_ctx *x, void *st) {
  calib *c = st;
  c->nsizes = pl_args_size_list(x->args, "sizes", c->sizes, PL_OPT_LIST_MAX);
  c->G = (int64_t)pl_args_size(x->args, "gemm-size");
  c->gdt = pl_args_enum(x->args, "gemm-dtype") == 0 ? PL_BF16 : PL_F32;
  c->msize = (size_t)pl_args_size(x->args, "mem-size") / 64 * 64;
  c->ntests = pl_args_enum_list(x->args, "tests", c->tests, T_COUNT);
  c->solo = pl_args_flag(x->args, "solo");
  c->seed = x->seed;
  c->comm = x->comm;
  c->rank = x->rank;
  c->n = x->size;
  c->s = x->stream;
  x->npoints = 0; /* tests in their table order, sizes within */
  bool want[T_COUNT] = {false};
  for (int i = 0; i < c->ntests; i++)
    want[c->tests[i]] = true;
  c->ntests = 0;
  for (int t = 0; t < T_COUNT; t++)
    if (want[t]) {
      c->tests[c->ntests++] = t;
      x->npoints += single(t) ? 1 : c->nsizes;
    }
  return PL_OK;
}

/* Point p: the test, and the size index within it. */
static int point_test(const calib *c, int p, size_t *S) {
  for (int i = 0; i < c->ntests; i++) {
    int t = c->tests[i], n = single(t) ? 1 : c->nsizes;
    if (p < n) {
      *S = t == T_GEMM ? 0 : single(t) ? c->msize : (size_t)c->sizes[p];
      return t;
    }
    p -= n;
  }
  PL_ASSERT(!"point out of range");
  return -1;
}

static pl_status point(pl_bench_ctx *x, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  calib *c = st;
  size_t S = 0;
  c->test = point_test(c, p, &S);
  c->idle = c->solo && per_rank(c->test) && x->rank != 0;
  c->ne = S / 4;
  bool alone = c->solo && per_rank(c->test);
  pl_row_str(row, "variant", test_names[c->test]);
  pl_row_i64(row, "ranks", alone ? 1 : x->size);
  if (c->test == T_GEMM) {
    snprintf(label, n, "gemm %s %lld^3", pl_dtype_name(c->gdt),
             (long long)c->G);
    pl_row_str(row, "dtype", pl_dtype_name(c->gdt));
    pl_row_i64(row, "mnk", c->G);
    pl_row_i64(
        row, "bytes",
        (int64_t)(3 * (size_t)c->G * (size_t)c->G * pl_dtype_size(c->gdt)));
    return PL_OK;
  }
  snprintf(label, n, "%s %zu bytes", test_names[c->test], S);
  pl_row_str(row, "dtype",
             c->test >= T_MREAD && c->test <= T_MCOPY ? "-" : "f32");
  pl_row_i64(row, "bytes", (int64_t)(c->ne * 4));
  if (c->test == T_ALLTOALL && c->ne < (size_t)x->size)
    return pl_set_error(PL_EINFEASIBLE, "fewer than one f32 per peer");
  if (c->test == T_ALLTOALL)
    c->ne /= (size_t)x->size; /* per peer */
  return PL_OK;
}

static pl_status run(void *st) {
  return pl__calib_run(st);
}

static pl_status setup(pl_bench_ctx *x, void *st, int p) {
  return pl__calib_setup(x, st);
}

static pl_status check(pl_bench_ctx *x, void *st, int p, pl_check *chk) {
  return pl__calib_check(x, st, chk);
}

static pl_status finish(pl_bench_ctx *x, void *st, int p, pl_row *row,
                        pl_work *w) {
  calib *c = st;
  const int t = c->test, n = x->size;
  if (t == T_GEMM) {
    w->flops = 2.0 * (double)c->G * c->G * c->G;
  } else {
    const double sec = x->meas->t.median * 1e-3;
    const size_t ne = t == T_ALLTOALL ? c->ne * (size_t)n : c->ne;
    w->bytes =
        (double)ne * 4 * (t == T_BIDIR || t == T_D2D || t == T_MCOPY ? 2 : 1);
    const double f = tdef[t].bus == 2   ? 2.0 * (n - 1) / n
                     : tdef[t].bus == 1 ? (double)(n - 1) / n
                                        : 1.0;
    pl_row_i64(row, "bytes", (int64_t)(ne * 4));
    pl_row_f64(row, "busbw_gbs", w->bytes / sec / 1e9 * f);
  }
  pl_row_note(row, "%s", x->cuda ? tdef[t].cuda : tdef[t].cpu);
  if (t >= T_MREAD && t <= T_MCOPY)
    pl_row_note(row, "%d threads", omp_get_max_threads());
  if (per_rank(t))
    pl_row_note(row, "%s",
                c->solo ? "rank 0 alone"
                : n > 1 ? "per rank, all ranks at once"
                        : "one rank");
  return PL_OK;
}

static void teardown(pl_bench_ctx *x, void *st, int p) {
  pl__calib_teardown(x, st);
}

static void fini(pl_bench_ctx *x, void *st) {
  pl__calib_fini(st);
}

const pl_bench pl_bench_calib = {
    .name = "calib",
    .summary = "the machine's ceilings: host link each way and both, device "
               "copy, GEMM rate, host memory read / write / copy, all-reduce "
               "/ all-to-all / send-recv bandwidth",
    .opts = calib_opts,
    .presets = calib_presets,
    .preset_cpu = "cpu",
    .preset_cuda = "cuda",
    .columns = "variant\tbytes\tranks\tdtype\tmnk\ttime_ms\ttime_p10_ms\t"
               "time_p90_ms\talgbw_gbs\tbusbw_gbs\ttflops\tmax_err",
    .rate = "algbw_gbs",
    .state = sizeof(calib),
    .init = init,
    .point = point,
    .setup = setup,
    .run = run,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
