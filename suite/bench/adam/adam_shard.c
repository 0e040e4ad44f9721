/* adam_shard.c — a rank's parameter shard for `plateau bench adam`, the
 * host link and host memory measured in the same run, the floor of a step
 * from both, and the sampled reference replay of the bench's check
 * (adam_shard.h). */
#include "adam_shard.h"
#include "bench/calib/calib.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/adamw.h"
#include "plateau/host_device.h"

#define SCRATCH ((size_t)64 << 20) /* elements of the set-up scratch */

void pl__adam_shard_free(pl_adam_shard *S) {
  if (S->prm)
    for (int i = 0; i < S->nt; i++) {
      pl_free(S->dev, S->prm[i].weight);
      pl_free(S->dev, S->prm[i].grad);
    }
  pl_free(S->dev, S->st.p);
  pl_free(S->dev, S->st.m);
  pl_free(S->dev, S->st.v);
  free(S->prm);
  free(S->off);
}

/* Uneven tensor sizes: weights 1 + (7i mod 5), the last takes the rest. */
pl_status pl__adam_shard_alloc(pl_adam_shard *S, pl_stream *s) {
  S->prm = calloc((size_t)S->nt, sizeof *S->prm);
  S->off = calloc((size_t)S->nt, sizeof *S->off);
  if (!S->prm || !S->off)
    return pl_set_error(PL_ENOMEM, "adam: tables");
  double wsum = 0;
  for (int i = 0; i < S->nt; i++)
    wsum += 1 + (7 * i) % 5;
  size_t done = 0, gsz = pl_dtype_size(S->gdt);
  for (int i = 0; i < S->nt; i++) {
    size_t n = i == S->nt - 1
                   ? S->total - done
                   : (size_t)((double)S->total * (1 + (7 * i) % 5) / wsum);
    if (done + n > S->total)
      n = S->total - done;
    S->off[i] = done;
    S->prm[i].numel = n;
    done += n;
    PL_TRY(pl_alloc(S->dev, PL_ARENA_DEVICE, n * 2, "weights",
                    (void **)&S->prm[i].weight));
    PL_TRY(pl_alloc(S->dev, S->grad_host ? PL_ARENA_HOST : PL_ARENA_DEVICE,
                    n * gsz, "grads", &S->prm[i].grad));
    if (n)
      PL_TRY(pl_rng_fill(s, S->prm[i].grad, S->gdt, n, S->seed, S->off[i],
                         PL_DIST_NORMAL, 0.0f, S->gstd));
  }
  size_t n = S->total;
  PL_TRY(pl_alloc(S->dev, PL_ARENA_HOST, n * 4, "optim", (void **)&S->st.p));
  PL_TRY(pl_alloc(S->dev, PL_ARENA_HOST, n * 4, "optim", (void **)&S->st.m));
  PL_TRY(pl_alloc(S->dev, PL_ARENA_HOST, n * 4, "optim", (void **)&S->st.v));
  S->st.numel = n;
  /* initial state drawn on the device in chunks and copied to the pinned
   * host arrays (fast on both backends); never zero, v > 0 */
  size_t chunk = n < SCRATCH ? n : SCRATCH;
  float *scr = NULL;
  uint64_t sd = S->seed + 17;
  /* the scratch shrinks under a device arena limit; without any, the host
   * draws the same values itself */
  while (pl_alloc(S->dev, PL_ARENA_DEVICE, chunk * 4, "bench_scratch",
                  (void **)&scr) != PL_OK) {
    scr = NULL;
    if (chunk < 65536)
      break;
    chunk /= 2;
  }
  pl_clear_error();
  if (!scr) {
    float *p = S->st.p, *m = S->st.m, *v = S->st.v;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
      p[i] = pl_rng_normal(sd, i, 0.0f, 0.02f);
      m[i] = pl_rng_normal(sd + 1, i, 0.0f, 1e-4f);
      v[i] = pl_rng_uniform(sd + 2, i, 1e-9f, 1e-8f);
    }
    return pl_stream_sync(s);
  }
  pl_status st = PL_OK;
  for (int a = 0; a < 3; a++) {
    float *dst = a == 0 ? S->st.p : a == 1 ? S->st.m : S->st.v;
    for (size_t off = 0; off < n; off += chunk) {
      size_t len = off + chunk < n ? chunk : n - off;
      PL_TRY_GOTO(st, done,
                  a == 2 ? pl_rng_fill(s, scr, PL_F32, len, sd + 2, off,
                                       PL_DIST_UNIFORM, 1e-9f, 1e-8f)
                         : pl_rng_fill(s, scr, PL_F32, len, sd + (uint64_t)a,
                                       off, PL_DIST_NORMAL, 0.0f,
                                       a == 0 ? 0.02f : 1e-4f));
      PL_TRY_GOTO(st, done, pl_memcpy_async(s, dst + off, scr, len * 4));
    }
  }
  st = pl_stream_sync(s);
done:
  pl_free(S->dev, scr);
  return st;
}

/* Gradient element i (flat) as the device holds it. */
static inline float shard_grad(const pl_adam_shard *S, size_t i) {
  float g = pl_rng_normal(S->seed, i, 0.0f, S->gstd);
  return S->gdt == PL_BF16 ? pl_bf16_to_f32(pl_f32_to_bf16(g)) : g;
}

/* This rank's fixed-order sum of squares, computed on the host by the
 * reference from the gradients copied back from the device, piece by piece
 * (pieces are whole norm chunks, so the chunk partials are unchanged). */
pl_status pl__adam_shard_sumsq(const pl_adam_shard *S, pl_stream *s,
                               double *out) {
  size_t gsz = pl_dtype_size(S->gdt);
  size_t piece = (size_t)(SCRATCH / PL_ADAMW_NORM_CHUNK) * PL_ADAMW_NORM_CHUNK;
  void *buf = NULL;
  double *part = NULL;
  PL_TRY(pl_alloc(S->dev, PL_ARENA_HOST, piece * gsz, "bench_scratch", &buf));
  part = malloc((piece / PL_ADAMW_NORM_CHUNK + 1) * sizeof(double));
  PL_ASSERT(part);
  double total = 0;
  pl_status st = PL_OK;
  for (int t = 0; t < S->nt; t++) {
    size_t n = S->prm[t].numel;
    for (size_t off = 0; off < n; off += piece) {
      size_t len = off + piece < n ? piece : n - off;
      PL_TRY_GOTO(st, done,
                  pl_memcpy_async(s, buf,
                                  (const char *)S->prm[t].grad + off * gsz,
                                  len * gsz));
      PL_TRY_GOTO(st, done, pl_stream_sync(s));
      size_t nc = pl_adamw_norm_nchunks(len);
      pl_adamw_ref_sumsq_partials(buf, S->gdt, len, part);
      for (size_t c = 0; c < nc; c++)
        total = total + part[c];
    }
  }
done:
  free(part);
  pl_free(S->dev, buf);
  *out = total;
  return st;
}

typedef struct link_job {
  pl_stream *s, *s2;
  pl_event *e0, *e1;
  void *dst, *src, *dst2, *src2;
  size_t bytes;
  int both;
} link_job;

static pl_status link_fn(void *arg) {
  link_job *j = arg;
  if (!j->both)
    return pl_memcpy_async(j->s, j->dst, j->src, j->bytes);
  PL_TRY(pl_event_record(j->e0, j->s));
  PL_TRY(pl_stream_wait(j->s2, j->e0));
  PL_TRY(pl_memcpy_async(j->s, j->dst, j->src, j->bytes));
  PL_TRY(pl_memcpy_async(j->s2, j->dst2, j->src2, j->bytes));
  PL_TRY(pl_event_record(j->e1, j->s2));
  return pl_stream_wait(j->s, j->e1);
}

/* The link's buffers of bytes each: two pinned on the host, two on the
 * device. */
static pl_status link_bufs(pl_dev *dev, size_t bytes, void **h1, void **h2,
                           void **d1, void **d2) {
  PL_TRY(pl_alloc(dev, PL_ARENA_HOST, bytes, "calib", h1));
  PL_TRY(pl_alloc(dev, PL_ARENA_HOST, bytes, "calib", h2));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, bytes, "calib", d1));
  return pl_alloc(dev, PL_ARENA_DEVICE, bytes, "calib", d2);
}

/* Pinned H2D, D2H and both at once, every rank at the same time: GB/s per
 * rank (bidir counts both directions).  Collective: if any rank cannot
 * allocate the buffers (an arena limit), every rank halves the size and tries
 * again (down to 1 MiB); if it never fits, bw stays NaN and the floor columns
 * read nan. */
pl_status pl__adam_link(pl_bench_ctx *ctx, size_t bytes, double bw[3]) {
  pl_dev *dev = ctx->dev;
  pl_stream *s = pl_dev_stream(dev), *s2 = NULL;
  void *h1 = NULL, *h2 = NULL, *d1 = NULL, *d2 = NULL;
  link_job j;
  memset(&j, 0, sizeof j);
  bw[0] = bw[1] = bw[2] = NAN;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, pl_stream_create(dev, &s2));
  PL_TRY_GOTO(st, done, pl_event_create(dev, &j.e0));
  PL_TRY_GOTO(st, done, pl_event_create(dev, &j.e1));
  for (; bytes >= ((size_t)1 << 20); bytes /= 2) {
    pl_status a = link_bufs(dev, bytes, &h1, &h2, &d1, &d2);
    if (a != PL_OK && a != PL_ENOMEM)
      PL_TRY_GOTO(st, done, a);
    int64_t bad = a != PL_OK;
    PL_TRY_GOTO(st, done,
                pl_host_allreduce_i64(ctx->comm, &bad, 1, PL_RED_MAX));
    if (!bad)
      break;
    pl_free(dev, h1);
    pl_free(dev, h2);
    pl_free(dev, d1);
    pl_free(dev, d2);
    h1 = h2 = d1 = d2 = NULL;
  }
  if (d2) {
    memset(h1, 0x3c, bytes);
    memset(h2, 0x3c, bytes);

    j.s = s;
    j.s2 = s2;
    j.bytes = bytes;
    for (int k = 0; k < 3; k++) {
      pl_stats t;
      j.both = k == 2;
      j.dst = k == 1 ? h1 : d1;
      j.src = k == 1 ? d1 : h1;
      j.dst2 = h2;
      j.src2 = d2;
      PL_TRY_GOTO(st, done, pl_bench_time_n(ctx, link_fn, &j, s, 1, 5, &t));
      bw[k] = (double)bytes * (k == 2 ? 2 : 1) / (t.median * 1e-3) / 1e9;
    }
  }
done:
  pl_dev_sync(dev);
  if (j.e0)
    pl_event_destroy(j.e0);
  if (j.e1)
    pl_event_destroy(j.e1);
  if (s2)
    pl_stream_destroy(s2);
  pl_free(dev, h1);
  pl_free(dev, h2);
  pl_free(dev, d1);
  pl_free(dev, d2);
  pl_clear_error();
  return st;
}

typedef struct mem_job {
  char *dst;
  const char *src;
  size_t bytes;
} mem_job;

/* the host-memory copy of bench calib's mem_copy (non-temporal stores, so
 * that the bytes counted, read + write, are the bytes moved) */
static pl_status mem_fn(void *arg) {
  mem_job *j = arg;
  pl__calib_mem_store((uint64_t *)(void *)j->dst,
                      (const uint64_t *)(const void *)j->src, j->bytes / 8);
  return PL_OK;
}

/* Two host buffers of bytes each. */
static pl_status host_pair(pl_dev *dev, size_t bytes, void **a, void **b) {
  PL_TRY(pl_alloc(dev, PL_ARENA_HOST, bytes, "calib", a));
  return pl_alloc(dev, PL_ARENA_HOST, bytes, "calib", b);
}

pl_status pl__adam_hostmem(pl_bench_ctx *ctx, size_t bytes, double *gbs) {
  pl_dev *dev = ctx->dev;
  void *a = NULL, *b = NULL;
  *gbs = NAN;
  bytes = bytes / 4096 * 4096;
  pl_status st = host_pair(dev, bytes, &a, &b);
  int64_t bad = st != PL_OK;
  if (st != PL_OK && st != PL_ENOMEM) /* not a size that does not fit */
    goto done;
  PL_TRY_GOTO(st, done, pl_host_allreduce_i64(ctx->comm, &bad, 1, PL_RED_MAX));
  if (!bad) {
    mem_job j = {b, a, bytes};
    memset(b, 0x5a, bytes); /* touched, so the copy measures no faults */
    (void)mem_fn(&(mem_job){a, b, bytes});
    pl_stats t;
    PL_TRY_GOTO(st, done,
                pl_bench_time_n(ctx, mem_fn, &j, pl_dev_stream(dev), 1, 5, &t));
    *gbs = 2.0 * (double)bytes / (t.median * 1e-3) / 1e9;
  }
done:
  pl_free(dev, a);
  pl_free(dev, b);
  pl_clear_error();
  return st;
}

const char *const pl__adam_mode_names[] = {"cpu", "stream", "hybrid", "update",
                                           NULL};

double pl__adam_joint_floor(int mode, double theta, double gsz, int grad_host,
                            const double bw[3], double mem, double cpu_mem,
                            double *share) {
  /* bytes a parameter of each engine: link up, link down, host memory
   * (the DMA's: p, m, v read and written) */
  const double gpu_up = 12 + (grad_host ? gsz : 0), gpu_down = 12,
               gpu_mem = 24 + (grad_host ? gsz : 0);
  const bool no_link = mode == PL_ADAM_UPDATE;
  const double cpu_up = no_link ? 0 : 2,
               cpu_down = no_link || grad_host ? 0 : gsz;
  double best = INFINITY, best_s = 0;
  for (int k = 0; k <= 1000; k++) {
    double s = mode == PL_ADAM_STREAM   ? 0.0
               : mode == PL_ADAM_HYBRID ? k / 1000.0
                                        : 1.0;
    double up = (1 - s) * gpu_up + s * cpu_up;
    double down = (1 - s) * gpu_down + s * cpu_down;
    double mb = (1 - s) * gpu_mem + s * cpu_mem;
    double t = fmax(fmax(up / bw[0], down / bw[1]),
                    fmax((up + down) / bw[2], mb / mem));
    if (t < best) {
      best = t;
      best_s = s;
    }
    if (mode != PL_ADAM_HYBRID)
      break;
  }
  if (share)
    *share = best_s;
  return best * theta / 1e9;
}

void pl__adam_sample_pick(pl_adam_sample *X, const pl_adam_shard *S) {
  X->n = S->total < PL_ADAM_NSAMPLE ? (int)S->total : PL_ADAM_NSAMPLE;
  for (int k = 0; k < X->n; k++) {
    size_t i = (size_t)((double)S->total * k / X->n);
    if (k == X->n - 1)
      i = S->total - 1;
    X->idx[k] = i;
    int t = 0;
    while (t + 1 < S->nt && S->off[t + 1] <= i)
      t++;
    X->tensor[k] = t;
  }
}

void pl__adam_sample_snap(pl_adam_sample *X, const pl_adam_shard *S) {
  for (int k = 0; k < X->n; k++) {
    X->p[k] = S->st.p[X->idx[k]];
    X->m[k] = S->st.m[X->idx[k]];
    X->v[k] = S->st.v[X->idx[k]];
  }
}

pl_status pl__adam_sample_check(pl_adam_sample *X, const pl_adam_shard *S,
                                pl_stream *s, const pl_adamw_hparams *hp,
                                int steps, float gs_ref, pl_check *chk) {
  for (int k = 0; k < X->n; k++) {
    int t = X->tensor[k];
    PL_TRY(pl_memcpy_async(s, &X->w[k],
                           S->prm[t].weight + (X->idx[k] - S->off[t]), 2));
  }
  PL_TRY(pl_stream_sync(s));
  static float got[3][PL_ADAM_NSAMPLE], want[3][PL_ADAM_NSAMPLE];
  static pl_bf16 want_w[PL_ADAM_NSAMPLE];
  for (int k = 0; k < X->n; k++) {
    float p = X->p[k], m = X->m[k], v = X->v[k];
    float g = shard_grad(S, X->idx[k]);
    pl_bf16 w = 0;
    for (int st = 1; st <= steps; st++) {
      pl_adamw_scalars sc = pl_adamw_scalars_make(hp, st, gs_ref);
      pl_adamw_ref_update(&p, &m, &v, &g, PL_F32, &w, 1, &sc);
    }
    size_t i = X->idx[k];
    want[0][k] = p, want[1][k] = m, want[2][k] = v, want_w[k] = w;
    got[0][k] = S->st.p[i], got[1][k] = S->st.m[i], got[2][k] = S->st.v[i];
  }
  static const char *const what[3] = {"master", "m", "v"};
  for (int a = 0; a < 3; a++)
    pl_check_arrays(chk, what[a], got[a], PL_ELEM_F32, want[a], PL_ELEM_F32,
                    (size_t)X->n, PL_F32, PL_CHECK_EXACT);
  pl_check_arrays(chk, "bf16 weight", X->w, PL_ELEM_BF16, want_w, PL_ELEM_BF16,
                  (size_t)X->n, PL_BF16, PL_CHECK_EXACT);
  return PL_OK;
}

pl_status pl__adam_shard_make(pl_bench_ctx *c, pl_adam_shard *S,
                              const pl_adamw_hparams *hp, pl_adam_sample **X,
                              float *gs_ref) {
  PL_TRY(pl__adam_shard_alloc(S, c->stream));
  *X = calloc(1, sizeof **X);
  PL_ASSERT(*X != NULL);
  pl__adam_sample_pick(*X, S);
  PL_TRY(pl_alloc(c->dev, PL_ARENA_HOST, PL_ADAM_NSAMPLE * 2, "bench_scratch",
                  (void **)&(*X)->w));
  *gs_ref = 1.0f;
  if (hp->max_grad_norm <= 0)
    return PL_OK;
  double ss = 0;
  PL_TRY(pl__adam_shard_sumsq(S, c->stream, &ss));
  PL_TRY(pl_adamw_global_sumsq(c->comm, ss, &ss));
  *gs_ref = pl_adamw_clip_scale(hp, ss);
  return PL_OK;
}
