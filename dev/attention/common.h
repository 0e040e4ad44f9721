/* common.h — what the attention dev programs share (the role of llm.c's
 * dev/cuda/common.h): error checks, options, inputs drawn with the engine's
 * RNG on the GPU, the CPU reference through the engine's CPU kernels, the
 * comparison with a dtype-scaled tolerance (max abs, normwise, first bad
 * index), event timing, and the version table every program prints, runs,
 * validates and only then times.  Header-only; compiled by nvcc with the
 * engine's include paths, linked against libplateau (make dev). */
#ifndef PLATEAU_DEV_ATTENTION_COMMON_H
#define PLATEAU_DEV_ATTENTION_COMMON_H

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/attention_common.cuh"
#include "model/attention.h"
#include "model/attention_testutil.h"
#include "plateau/plateau.h"

/* A failed CUDA or engine call ends the program (exit 3: runtime error). */
#define cudaCheck(x)                                                           \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,               \
              cudaGetErrorString(e_));                                         \
      exit(3);                                                                 \
    }                                                                          \
  } while (0)
#define plCheck(x)                                                             \
  do {                                                                         \
    pl_status s_ = (x);                                                        \
    if (s_ != PL_OK) {                                                         \
      fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #x,           \
              pl_strerror(s_), pl_last_error());                               \
      exit(3);                                                                 \
    }                                                                          \
  } while (0)

/* One kernel version: number, name, what it does, why it is not the engine's
 * (or that it is); run launches it on the stream for shape sh over the
 * buffers. */
struct dev_bufs {
  void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse;
  void *ws; /* pl_attn_bwd_workspace_bytes(sh, CUDA) */
};
typedef pl_status (*dev_run_fn)(pl_stream *s, const pl_attn_shape *sh,
                                dev_bufs *b);
struct dev_version {
  int num;
  const char *name, *what, *status;
  dev_run_fn run;
  int probe; /* wrong results by design: timed, not validated */
  int slow;  /* timed once, without warm-up (the SIMPLE reference) */
};

/* PL_EUNSUPPORTED unless the build has sm_90a device code (the wgmma
 * kernels); asks the engine, which probes once */
static inline pl_status dev_need_wgmma(pl_stream *s, const pl_attn_shape *sh) {
  pl_attn_shape k = *sh;
  k.kernels.fwd = PL_ATTN_FWD_WGMMA;
  if (strcmp(pl_attn_fwd_kernel(s, &k), "wgmma/ovtma"))
    return pl_set_error(PL_EUNSUPPORTED,
                        "the wgmma kernels need device code for sm_90a");
  return PL_OK;
}

struct dev_opts {
  int version;            /* 0: all                                    */
  int64_t seq, check_seq; /* timed S; validated S                       */
  int nq, nkv, iters, warmup;
  int list; /* print the version table and stop */
};

/* a size with an optional K M (1000s) or Ki Mi (1024s) suffix, > 0 */
static inline int64_t dev_parse_size(const char *s, const char *what) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  long long m = 1;
  if (end && !strcmp(end, "K"))
    m = 1000;
  else if (end && !strcmp(end, "Ki"))
    m = 1024;
  else if (end && !strcmp(end, "M"))
    m = 1000000;
  else if (end && !strcmp(end, "Mi"))
    m = 1 << 20;
  else if (!end || *end)
    m = 0;
  if (errno || m == 0 || v <= 0 || v > (1LL << 30) / m) {
    fprintf(stderr, "%s=%s: want a positive size (suffixes K Ki M Mi)\n", what,
            s);
    exit(2);
  }
  return v * m;
}

/* an integer in [lo, hi] */
static inline int dev_parse_int(const char *s, const char *what, int lo,
                                int hi) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || !end || *end || v < lo || v > hi) {
    fprintf(stderr, "%s=%s: want an integer in [%d, %d]\n", what, s, lo, hi);
    exit(2);
  }
  return (int)v;
}

static inline dev_opts dev_parse(int argc, char **argv, const char *prog) {
  dev_opts o = {0, 16384, 1031, 64, 8, 10, 2, 0};
  static const struct option lo[] = {{"version", required_argument, 0, 'v'},
                                     {"seq", required_argument, 0, 'S'},
                                     {"check-seq", required_argument, 0, 'c'},
                                     {"heads", required_argument, 0, 'H'},
                                     {"kv-heads", required_argument, 0, 'K'},
                                     {"iters", required_argument, 0, 'n'},
                                     {"warmup", required_argument, 0, 'w'},
                                     {"list", no_argument, 0, 'l'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "v:n:w:lh", lo, NULL)) != -1) {
    switch (c) {
    case 'l':
      o.list = 1;
      break;
    case 'v':
      o.version = dev_parse_int(optarg, "--version", 1, 99);
      break;
    case 'S':
      o.seq = dev_parse_size(optarg, "--seq");
      break;
    case 'c':
      o.check_seq = dev_parse_size(optarg, "--check-seq");
      break;
    case 'H':
      o.nq = dev_parse_int(optarg, "--heads", 1, 65535);
      break;
    case 'K':
      o.nkv = dev_parse_int(optarg, "--kv-heads", 1, 65535);
      break;
    case 'n':
      o.iters = dev_parse_int(optarg, "--iters", 1, 100000);
      break;
    case 'w':
      o.warmup = dev_parse_int(optarg, "--warmup", 0, 100000);
      break;
    default:
      printf("usage: %s [-v N] [--seq S] [--check-seq S] [--heads n_q] "
             "[--kv-heads n_kv]\n"
             "          [-n iters] [-w warmups] [-l|--list]\n"
             "Runs the CPU reference, then every version (or version N): "
             "validates it at\n"
             "S = check-seq (B = 1, 8 q / 2 kv heads, d = 128), then times it "
             "at S = seq\n"
             "(B = 1, n_q / n_kv heads, d = 128; default 16384, 64 / 8).\n",
             prog);
      exit(c == 'h' ? 0 : 2);
    }
  }
  if (o.nq % o.nkv) {
    fprintf(stderr, "--heads %d: must be a multiple of --kv-heads %d\n", o.nq,
            o.nkv);
    exit(2);
  }
  return o;
}

static inline void dev_print_table(const dev_version *v, int n) {
  printf("# %3s  %-22s  %s\n", "#", "version", "what; status");
  for (int i = 0; i < n; i++)
    printf("# %3d  %-22s  %s;\n#      %-22s  %s\n", v[i].num, v[i].name,
           v[i].what, "", v[i].status);
}

static inline void *dev_alloc(pl_dev *d, size_t bytes) {
  void *p = NULL;
  plCheck(pl_alloc(d, PL_ARENA_DEVICE, bytes ? bytes : 16, "dev", &p));
  return p;
}

/* all buffers of shape sh on device d; inputs drawn (seeded: the same bits on
 * any device), outputs left as they are */
static inline dev_bufs dev_bufs_new(pl_dev *d, const pl_attn_shape *sh,
                                    uint64_t seed) {
  const size_t nqe = (size_t)(sh->batch * sh->seq * sh->n_q * sh->head_dim);
  const size_t nke = (size_t)(sh->batch * sh->seq * sh->n_kv * sh->head_dim);
  const size_t nr = (size_t)(sh->batch * sh->n_q * sh->seq),
               es = pl_dtype_size(sh->dtype);
  dev_bufs b;
  b.q = dev_alloc(d, nqe * es);
  b.k = dev_alloc(d, nke * es);
  b.v = dev_alloc(d, nke * es);
  b.o = dev_alloc(d, nqe * es);
  b.dout = dev_alloc(d, nqe * es);
  b.dq = dev_alloc(d, nqe * es);
  b.dk = dev_alloc(d, nke * es);
  b.dv = dev_alloc(d, nke * es);
  b.lse = (float *)dev_alloc(d, nr * 4);
  b.ws = dev_alloc(d, pl_attn_bwd_workspace_bytes(sh, pl_dev_backend(d)));
  pl_stream *s = pl_dev_stream(d);
  plCheck(
      pl_rng_fill(s, b.q, sh->dtype, nqe, seed, 0, PL_DIST_NORMAL, 0.f, 1.5f));
  plCheck(pl_rng_fill(s, b.k, sh->dtype, nke, seed + 1, 0, PL_DIST_NORMAL, 0.f,
                      1.5f));
  plCheck(pl_rng_fill(s, b.v, sh->dtype, nke, seed + 2, 0, PL_DIST_NORMAL, 0.f,
                      1.f));
  plCheck(pl_rng_fill(s, b.dout, sh->dtype, nqe, seed + 3, 0, PL_DIST_NORMAL,
                      0.f, 1.f));
  plCheck(pl_stream_sync(s));
  return b;
}

static inline void dev_bufs_free(pl_dev *d, dev_bufs *b) {
  void *ps[] = {b->q,  b->k,  b->v,  b->o,   b->dout,
                b->dq, b->dk, b->dv, b->lse, b->ws};
  for (void *p : ps)
    pl_free(d, p);
}

/* host copy of n elements of dtype dt at device pointer p (any device) */
static inline void *dev_to_host(pl_stream *s, const void *p, size_t bytes) {
  void *h = malloc(bytes ? bytes : 1);
  plCheck(pl_memcpy_async(s, h, p, bytes));
  plCheck(pl_stream_sync(s));
  return h;
}

/* got (device, bf16 or f32) against ref (host, same dtype): prints the
 * errors, returns 1 when within tol (normwise, attention_testutil.h) */
static inline int dev_validate(pl_stream *s, const char *what, const void *got,
                               const void *ref, pl_dtype dt, size_t n,
                               double tol) {
  void *h = dev_to_host(s, got, n * pl_dtype_size(dt));
  double *r = tu_to_f64(ref, dt, n);
  attn_err e = tu_compare(h, dt, r, n, tol);
  printf("#        %-4s max_abs %.3e normwise %.3e (tol %.1e)%s", what,
         e.max_abs, e.norm_err, tol, e.first_bad < 0 ? "\n" : "");
  if (e.first_bad >= 0)
    printf("  FIRST BAD INDEX %ld\n", e.first_bad);
  free(h);
  free(r);
  return e.first_bad < 0;
}

/* median milliseconds of iters runs of v (after warmup runs), by events */
static inline double dev_time_ms(pl_stream *s, const pl_attn_shape *sh,
                                 dev_bufs *b, const dev_version *v, int warmup,
                                 int iters) {
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  cudaEvent_t e0, e1;
  cudaCheck(cudaEventCreate(&e0));
  cudaCheck(cudaEventCreate(&e1));
  for (int i = 0; i < warmup; i++)
    plCheck(v->run(s, sh, b));
  std::vector<float> ms;
  for (int i = 0; i < iters; i++) {
    cudaCheck(cudaEventRecord(e0, st));
    plCheck(v->run(s, sh, b));
    cudaCheck(cudaEventRecord(e1, st));
    cudaCheck(cudaEventSynchronize(e1));
    float t = 0;
    cudaCheck(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaCheck(cudaEventDestroy(e0));
  cudaCheck(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

#endif
