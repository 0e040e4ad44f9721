/* adamw_testlib.h — test harness shared by the AdamW tests (CPU and CUDA):
 * build a rank's parameters on a device, run OffloadStreamAdamW (or another
 * optimizer given as a tl_opt, such as the classic offload baseline of
 * baselines/) for several steps beside the plain-C reference on the same
 * random state and gradients, and compare every bit (master, m, v, and the
 * bf16 working weights read back from the device).  Included by test files
 * only (static functions). */
#ifndef PLATEAU_OPS_ADAMW_TESTLIB_H
#define PLATEAU_OPS_ADAMW_TESTLIB_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/adamw.h"
#include "ops/stream_adamw.h"
#include "plateau/host_device.h"
#include "plateau/plateau.h"

#define TL_MAXT 16

struct tl_case;
/* An optimizer under test other than OffloadStreamAdamW: create it over the
 * case's parameters (host state allocated by it), step it on s, read its flat
 * host state and its last step's clip factor, destroy it. */
typedef struct tl_opt {
  pl_status (*create)(pl_dev *dev, const pl_adamw_hparams *hp,
                      const struct tl_case *c, const pl_adamw_param *prm,
                      pl_comm *comm, void **out);
  pl_adamw_state (*state)(void *o);
  pl_status (*step)(void *o, pl_stream *s);
  float (*gscale)(const void *o);
  void (*destroy)(void *o);
} tl_opt;

typedef struct tl_case {
  const char *name;
  int nt;
  size_t numel[TL_MAXT];
  size_t bucket;
  int slots;
  double max_norm; /* > 0 clip */
  double wd;
  pl_dtype gdt;
  int grad_on_host;
  double share; /* hybrid share; < 0 auto */
  int steps;
  const tl_opt *opt; /* NULL: OffloadStreamAdamW; else this optimizer */
  int simd;          /* pl_simd_path for hybrid / another optimizer */
} tl_case;

/* Multi-rank runs: the optimizer clips with the global norm over tl_comm; the
 * reference regenerates every rank's gradients (rank r uses seed + 7919·r)
 * and adds the ranks' sums in rank order, independently of the helper. */
static pl_comm *tl_comm = NULL;

typedef struct tl_result {
  int ok;
  char msg[512];
  size_t staging_peak, staging_bytes;
  int clipped_steps;
  size_t gpu_buckets, cpu_buckets, nbuckets; /* split of the last step */
  double next_share;
} tl_result;

/* Bitwise comparison of n floats; on mismatch fills msg with the first bad
 * index and max abs/rel error, returns 0. */
__attribute__((unused)) static int tl_cmp_f32(const char *what,
                                              const float *got,
                                              const float *want, size_t n,
                                              char *msg, size_t len) {
  size_t bad = 0, first = (size_t)-1;
  double maxabs = 0, maxrel = 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(&got[i], &want[i], 4) != 0) {
      if (first == (size_t)-1)
        first = i;
      bad++;
      double a = fabs((double)got[i] - (double)want[i]);
      double r = a / (fabs((double)want[i]) + 1e-30);
      if (a > maxabs)
        maxabs = a;
      if (r > maxrel)
        maxrel = r;
    }
  }
  if (!bad)
    return 1;
  snprintf(msg, len,
           "%s: %zu/%zu differ; first bad index %zu (got %.9g want %.9g); "
           "max abs %.3g rel %.3g",
           what, bad, n, first, got[first], want[first], maxabs, maxrel);
  return 0;
}

__attribute__((unused)) static int tl_cmp_bf16(const char *what,
                                               const pl_bf16 *got,
                                               const pl_bf16 *want, size_t n,
                                               char *msg, size_t len) {
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      size_t bad = 0;
      for (size_t j = i; j < n; j++)
        bad += got[j] != want[j];
      snprintf(msg, len,
               "%s: %zu/%zu differ; first bad index %zu (got 0x%04x "
               "want 0x%04x)",
               what, bad, n, i, got[i], want[i]);
      return 0;
    }
  return 1;
}

/* Initial state of flat element i (never zero; v > 0). */
__attribute__((unused)) static void tl_init(uint64_t seed, size_t i, float *p,
                                            float *m, float *v) {
  *p = pl_rng_normal(seed, 3 * i, 0.0f, 0.5f);
  *m = pl_rng_normal(seed, 3 * i + 1, 0.0f, 1e-2f);
  *v = pl_rng_uniform(seed, 3 * i + 2, 1e-6f, 1e-3f);
}

/* Gradient of step t, flat element i; the scale changes by step so that the
 * clipping is active on some steps and not on others. */
__attribute__((unused)) static float tl_grad(uint64_t seed, int t, size_t i) {
  float scale = (t % 2) ? 0.05f : 0.002f;
  return pl_rng_normal(seed + 1000u + (uint64_t)t, i, 0.0f, scale);
}

/* The flat state as host arrays (fp[i], fm[i], fv[i] for every element):
 * the host part copied, the device-resident part read back. */
__attribute__((unused)) static pl_status tl_state_get(pl_stream *s,
                                                      const pl_adamw_state *S,
                                                      float *fp, float *fm,
                                                      float *fv) {
  const size_t lo = S->numel - S->resident;
  if (lo) { /* all resident: no host part (S->p may be NULL) */
    memcpy(fp, S->p, lo * 4);
    memcpy(fm, S->m, lo * 4);
    memcpy(fv, S->v, lo * 4);
  }
  if (S->resident) {
    PL_TRY(pl_memcpy_async(s, fp + lo, S->dp, S->resident * 4));
    PL_TRY(pl_memcpy_async(s, fm + lo, S->dm, S->resident * 4));
    PL_TRY(pl_memcpy_async(s, fv + lo, S->dv, S->resident * 4));
  }
  return pl_stream_sync(s);
}

/* The other way: host arrays into the state (host part, device part). */
__attribute__((unused)) static pl_status
tl_state_put(pl_stream *s, const pl_adamw_state *S, const float *fp,
             const float *fm, const float *fv) {
  const size_t lo = S->numel - S->resident;
  if (lo) { /* all resident: no host part (S->p may be NULL) */
    memcpy(S->p, fp, lo * 4);
    memcpy(S->m, fm, lo * 4);
    memcpy(S->v, fv, lo * 4);
  }
  if (S->resident) {
    PL_TRY(pl_memcpy_async(s, S->dp, fp + lo, S->resident * 4));
    PL_TRY(pl_memcpy_async(s, S->dm, fm + lo, S->resident * 4));
    PL_TRY(pl_memcpy_async(s, S->dv, fv + lo, S->resident * 4));
  }
  return pl_stream_sync(s);
}

/* The gradients of step t for seed (tl_grad), total of them, into dst in
 * dtype gdt. */
__attribute__((unused)) static void tl_grads(void *dst, uint64_t seed, int t,
                                             size_t total, pl_dtype gdt) {
  for (size_t i = 0; i < total; i++) {
    float g = tl_grad(seed, t, i);
    if (gdt == PL_BF16)
      ((pl_bf16 *)dst)[i] = pl_f32_to_bf16(g);
    else
      ((float *)dst)[i] = g;
  }
}

/* The sum of squares of step t's gradients over all nranks ranks (rank r's
 * seed: seed0 + 7919 r), as the reference's global norm needs it. */
__attribute__((unused)) static double
tl_global_sumsq(const tl_case *c, uint64_t seed0, int t, size_t total,
                const size_t *off, int nranks) {
  const size_t gsz = pl_dtype_size(c->gdt);
  void *og = malloc(total * gsz + 4);
  const void *ogp[TL_MAXT];
  PL_ASSERT(og);
  for (int i = 0; i < c->nt; i++)
    ogp[i] = (char *)og + off[i] * gsz;
  double global = 0.0;
  for (int r = 0; r < nranks; r++) {
    tl_grads(og, seed0 + 7919u * (uint64_t)r, t, total, c->gdt);
    global = global + pl_adamw_ref_sumsq(c->nt, c->numel, ogp, c->gdt);
  }
  free(og);
  return global;
}

/* The optimizer of case c over prm: the case's own (c->opt) or
 * OffloadStreamAdamW with the case's knobs and `resident`; its state into
 * *S (and the stream's staging bytes into R). */
__attribute__((unused)) static pl_status
tl_create_opt(pl_dev *dev, const tl_case *c, const pl_adamw_hparams *hp,
              pl_adamw_param *prm, size_t resident, pl_stream_adamw **so,
              void **co, pl_adamw_state *S, tl_result *R) {
  if (c->opt) {
    PL_TRY(c->opt->create(dev, hp, c, prm, tl_comm, co));
    *S = c->opt->state(*co);
    return PL_OK;
  }
  pl_stream_adamw_cfg cfg = pl_stream_adamw_cfg_default();
  cfg.bucket = c->bucket;
  cfg.slots = c->slots;
  cfg.grad_dtype = c->gdt;
  cfg.grad_on_host = c->grad_on_host;
  cfg.share = c->share;
  cfg.share_init = 0.5;
  cfg.simd_path = c->simd;
  cfg.comm = tl_comm;
  cfg.resident = resident;
  PL_TRY(pl_stream_adamw_create(dev, hp, &cfg, c->nt, prm, so));
  *S = pl_stream_adamw_state(*so);
  R->staging_bytes = pl_stream_adamw_staging_bytes(*so);
  return PL_OK;
}

/* The gradient scale the optimizer applied at its last step; for
 * OffloadStreamAdamW also its buckets on each side and the next share,
 * into R. */
__attribute__((unused)) static float
tl_last_step(const tl_case *c, void *co, pl_stream_adamw *so, tl_result *R) {
  if (c->opt)
    return c->opt->gscale(co);
  pl_stream_adamw_last L;
  pl_stream_adamw_last_get(so, &L);
  R->gpu_buckets = L.gpu_buckets;
  R->cpu_buckets = L.cpu_buckets;
  R->next_share = L.next_share;
  R->nbuckets = pl_stream_adamw_nbuckets(so);
  return L.gscale;
}

/* The reference state after a step: master weights, m, v and the bf16
 * weights the update wrote. */
typedef struct {
  const float *p, *m, *v;
  const pl_bf16 *w;
} tl_ref;

/* After step t: the optimizer's bf16 weights and state (read back into gw,
 * fp, fm, fv) against the reference, bit for bit; R->ok cleared with the
 * first difference in R->msg. */
__attribute__((unused)) static pl_status
tl_check_step(pl_stream *s, const tl_case *c, const pl_adamw_param *prm,
              const size_t *off, size_t total, const pl_adamw_state *S,
              const tl_ref *ref, pl_bf16 *gw, float *fp, float *fm, float *fv,
              int t, tl_result *R) {
  for (int i = 0; i < c->nt; i++)
    if (c->numel[i])
      PL_TRY(pl_memcpy_async(s, gw + off[i], prm[i].weight, c->numel[i] * 2));
  PL_TRY(pl_stream_sync(s));
  PL_TRY(tl_state_get(s, S, fp, fm, fv));
  char m[400];
  if (!tl_cmp_f32("master", fp, ref->p, total, m, sizeof m) ||
      !tl_cmp_f32("m", fm, ref->m, total, m, sizeof m) ||
      !tl_cmp_f32("v", fv, ref->v, total, m, sizeof m) ||
      !tl_cmp_bf16("bf16 weights", gw, ref->w, total, m, sizeof m)) {
    snprintf(R->msg, sizeof R->msg, "step %d: %s", t, m);
    R->ok = 0;
  }
  return PL_OK;
}

/* tl_run with the last `resident` parameters' state kept on the device
 * (OffloadStreamAdamW only; whole buckets). */
__attribute__((unused)) static pl_status
tl_run_resident(pl_dev *dev, const tl_case *c, uint64_t seed, size_t resident,
                tl_result *R);

__attribute__((unused)) static pl_status tl_run(pl_dev *dev, const tl_case *c,
                                                uint64_t seed, tl_result *R) {
  return tl_run_resident(dev, c, seed, 0, R);
}

__attribute__((unused)) static pl_status
tl_run_resident(pl_dev *dev, const tl_case *c, uint64_t seed, size_t resident,
                tl_result *R) {
  memset(R, 0, sizeof *R);
  pl_stream *s = pl_dev_stream(dev);
  int nranks = tl_comm ? pl_comm_size(tl_comm) : 1;
  uint64_t seed0 = seed;
  if (tl_comm)
    seed = seed0 + 7919u * (uint64_t)pl_comm_rank(tl_comm);
  size_t total = 0, off[TL_MAXT];
  for (int i = 0; i < c->nt; i++) {
    off[i] = total;
    total += c->numel[i];
  }
  size_t gsz = pl_dtype_size(c->gdt);
  pl_adamw_param prm[TL_MAXT];
  /* reference copies, ordinary host memory */
  float *rp = malloc(total * 4), *rm = malloc(total * 4),
        *rv = malloc(total * 4);
  pl_bf16 *rw = malloc(total * 2 + 2), *gw = malloc(total * 2 + 2);
  void *hg = malloc(total * gsz + 4);
  float *fp = malloc(total * 4 + 4), *fm = malloc(total * 4 + 4),
        *fv = malloc(total * 4 + 4);
  PL_ASSERT(rp && rm && rv && rw && gw && hg && fp && fm && fv);
  pl_status st = PL_OK;
  for (int i = 0; i < c->nt; i++) {
    prm[i].numel = c->numel[i];
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, c->numel[i] * 2, "weights",
                    (void **)&prm[i].weight));
    PL_TRY(pl_alloc(dev, c->grad_on_host ? PL_ARENA_HOST : PL_ARENA_DEVICE,
                    c->numel[i] * gsz, "grads", &prm[i].grad));
  }
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  hp.weight_decay = c->wd;
  hp.max_grad_norm = c->max_norm;
  pl_stream_adamw *so = NULL;
  void *co = NULL;
  pl_adamw_state S;
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  PL_TRY(tl_create_opt(dev, c, &hp, prm, resident, &so, &co, &S, R));
  PL_ASSERT(S.numel == total && S.resident == resident);
  for (size_t i = 0; i < total; i++) {
    tl_init(seed, i, &rp[i], &rm[i], &rv[i]);
  }
  PL_TRY(tl_state_put(s, &S, rp, rm, rv));
  float *rpp[TL_MAXT], *rmp[TL_MAXT], *rvp[TL_MAXT];
  const void *rgp[TL_MAXT];
  pl_bf16 *rwp[TL_MAXT];
  for (int i = 0; i < c->nt; i++) {
    rpp[i] = rp + off[i];
    rmp[i] = rm + off[i];
    rvp[i] = rv + off[i];
    rgp[i] = (char *)hg + off[i] * gsz;
    rwp[i] = rw + off[i];
  }
  R->ok = 1;
  for (int t = 1; t <= c->steps && R->ok; t++) {
    tl_grads(hg, seed, t, total, c->gdt);
    for (int i = 0; i < c->nt; i++) {
      if (c->numel[i] == 0)
        continue;
      if ((st = pl_memcpy_async(s, prm[i].grad, rgp[i], c->numel[i] * gsz)) ||
          (st = pl_fill(s, prm[i].weight, PL_BF16, c->numel[i], NAN)))
        goto out;
    }
    st = c->opt ? c->opt->step(co, s) : pl_stream_adamw_step(so, s);
    if (st || (st = pl_stream_sync(s)))
      goto out;
    float gs_ref = 1.0f, gs_got = 1.0f;
    double global = 0.0;
    if (tl_comm)
      global = tl_global_sumsq(c, seed0, t, total, off, nranks);
    if ((st =
             pl_adamw_ref_step(&hp, t, c->nt, c->numel, rpp, rmp, rvp, rgp,
                               c->gdt, rwp, tl_comm ? &global : NULL, &gs_ref)))
      goto out;
    gs_got = tl_last_step(c, co, so, R);
    if (gs_ref < 1.0f)
      R->clipped_steps++;
    if (memcmp(&gs_ref, &gs_got, 4) != 0) {
      snprintf(R->msg, sizeof R->msg, "step %d: gscale %.9g, want %.9g", t,
               gs_got, gs_ref);
      R->ok = 0;
      break;
    }
    const tl_ref ref = {rp, rm, rv, rw};
    PL_TRY_GOTO(
        st, out,
        tl_check_step(s, c, prm, off, total, &S, &ref, gw, fp, fm, fv, t, R));
  }
  R->staging_peak = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "optim_staging");
out:
  pl_stream_adamw_destroy(so);
  if (co)
    c->opt->destroy(co);
  for (int i = 0; i < c->nt; i++) {
    pl_free(dev, prm[i].weight);
    pl_free(dev, prm[i].grad);
  }
  free(rp);
  free(rm);
  free(rv);
  free(rw);
  free(gw);
  free(hg);
  free(fp);
  free(fm);
  free(fv);
  return st;
}

#endif
