/* fsdp2_params.c — the FSDP2 baseline's parameters (fsdp2.h): the units
 * and the parameter table in the composed step's order, names, seeds and
 * distributions (so its weights are the composed step's bit for bit), the
 * initialization of this rank's shards, and the gather and set of full
 * tensors the tests use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp2_internal.h"

/* ---- parameters -----------------------------------------------------------
 */

static uint64_t param_seed(const pl_fsdp2 *t, int i) {
  /* the composed step's (engine/train/step.c): its weights, bit for bit */
  return t->c.seed * 0x9e3779b97f4a7c15ull +
         (uint64_t)i * 0x632be59bd9b4e019ull + 17;
}

static void add_param(pl_fsdp2 *t, const char *name, int64_t rows, int64_t cols,
                      int unit, size_t off, size_t extent, uint64_t first,
                      int expert, pl_dist dist, float a, float b) {
  param *p = &t->pr[t->npr++];
  memset(p, 0, sizeof *p);
  snprintf(p->info.name, sizeof p->info.name, "%s", name);
  p->info.rows = rows, p->info.cols = cols;
  p->unit = unit, p->off = off, p->extent = extent, p->first = first;
  p->expert = expert, p->dist = dist, p->a = a, p->b = b;
}

/* The units and the parameter table: the composed step's parameters in its
 * order (their seeds are their indices) and initial distributions. */
pl_status pl__fsdp2_param_table(pl_fsdp2 *t, size_t *numel) {
  const pl_model_cfg *m = &t->m;
  const int64_t H = m->H, L = m->L;
  const float res = 1.0f / sqrtf(2.0f * (float)L);
  t->pr = calloc((size_t)(3 + 12 * L), sizeof(param));
  if (!t->pr)
    return pl_set_error(PL_ENOMEM, "fsdp2: host");
  numel[t->u_emb] = (size_t)(m->V * H);
  add_param(t, "embed", m->V, H, t->u_emb, 0, numel[t->u_emb], 0, 0,
            PL_DIST_NORMAL, 0, 1.0f);
  const int64_t qkv = (int64_t)(m->n_q + 2 * m->n_kv) * m->d,
                nq = (int64_t)m->n_q * m->d;
  static const char *const nms[P_N] = {"attn_norm", "qkv", "o",   "ffn_norm",
                                       "router",    "up",  "down"};
  int xu = L + 2;
  char nm[40];
  for (int l = 0; l < L; l++) {
    flayer *x = &t->fl[l];
    x->moe = pl_model_layer_is_moe(m, l);
    x->unit = 1 + l;
    x->xunit = x->moe ? xu++ : -1;
    x->I_s = x->moe ? (m->n_shared ? m->I_shared : 0) : m->I_dense;
    const int64_t I = x->I_s;
    const int64_t rows[P_N] = {1, H, nq, 1, H, H, I};
    const int64_t cols[P_N] = {H, qkv, H, H, t->E_r, 2 * I, H};
    const int present[P_N] = {1, 1, 1, 1, x->moe, I > 0, I > 0};
    const pl_dist dist[P_N] = {PL_DIST_UNIFORM, PL_DIST_NORMAL, PL_DIST_NORMAL,
                               PL_DIST_UNIFORM, PL_DIST_NORMAL, PL_DIST_NORMAL,
                               PL_DIST_NORMAL};
    const float da[P_N] = {0.9f, 0, 0, 0.9f, 0, 0, 0};
    const float db[P_N] = {1.1f,
                           1.0f / sqrtf((float)H),
                           res / sqrtf((float)nq),
                           1.1f,
                           1.0f / sqrtf((float)H),
                           1.0f / sqrtf((float)H),
                           I > 0 ? res / sqrtf((float)I) : 0};
    size_t o = 0;
    for (int p = 0; p < P_N; p++) {
      x->off[p] = SIZE_MAX;
      if (!present[p])
        continue;
      x->off[p] = o;
      const size_t n = (size_t)(rows[p] * cols[p]);
      snprintf(nm, sizeof nm, "layer%d.%s", l, nms[p]);
      add_param(t, nm, rows[p], cols[p], x->unit, o, n, 0, 0, dist[p], da[p],
                db[p]);
      o = pl__fsdp2_align(o + n);
    }
    numel[x->unit] = o;
    /* the final norm lives in [norm, head] but keeps its place in the
     * composed step's order (after the last layer's dense parameters) */
    if (l == L - 1)
      add_param(t, "final_norm", 1, H, t->u_head, 0, (size_t)H, 0, 0,
                PL_DIST_UNIFORM, 0.9f, 1.1f);
    if (x->moe) {
      const size_t ne = (size_t)t->El * (size_t)(H * m->I);
      static const char *const w3[3] = {"wg", "wu", "wd"};
      for (int j = 0; j < 3; j++) {
        snprintf(nm, sizeof nm, "layer%d.experts.%s", l, w3[j]);
        const float sd =
            j < 2 ? 1.0f / sqrtf((float)H) : res / sqrtf((float)m->I);
        add_param(t, nm, (int64_t)m->E * (j < 2 ? H : m->I), j < 2 ? m->I : H,
                  x->xunit, (size_t)j * pl__fsdp2_align(ne), ne,
                  (uint64_t)t->ep_idx * ne, 1, PL_DIST_NORMAL, 0, sd);
      }
      numel[x->xunit] = 3 * pl__fsdp2_align(ne);
    }
  }
  const size_t ho = pl__fsdp2_align((size_t)H);
  add_param(t, "head", H, m->V, t->u_head, ho, (size_t)(H * m->V), 0, 0,
            PL_DIST_NORMAL, 0, 1.0f / sqrtf((float)H));
  numel[t->u_head] = ho + (size_t)(H * m->V);
  return PL_OK;
}

static int64_t numel_of(const param *p) {
  return p->info.rows * p->info.cols;
}

/* The parameter's elements in this rank's shard: [lo, hi) of the unit. */
static void in_shard(pl_fsdp2 *t, const param *p, size_t *lo, size_t *hi,
                     float **w, size_t *soff) {
  size_t s, off;
  pl_zero3_shard(t->f, p->unit, (void **)w, NULL, &s, &off);
  *lo = p->off > off ? p->off : off;
  const size_t h0 = p->off + p->extent, h1 = off + s;
  *hi = h0 < h1 ? h0 : h1;
  *soff = off;
}

pl_status pl__fsdp2_init_weights(pl_fsdp2 *t) {
  pl_stream *s = pl_dev_stream(t->dev);
  const bool host = t->c.optim == PL_FSDP2_OPTIM_CPU;
  const size_t chunk = (size_t)1 << 24;
  float *tmp = NULL;
  if (host)
    PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE, chunk * 4, "init", (void **)&tmp));
  pl_status st = PL_OK;
  for (int i = 0; i < t->npr; i++) {
    const param *p = &t->pr[i];
    size_t lo, hi, soff;
    float *w;
    in_shard(t, p, &lo, &hi, &w, &soff);
    for (size_t e = lo; e < hi;) {
      const size_t n = hi - e < chunk ? hi - e : chunk;
      float *dst = host ? tmp : w + (e - soff);
      PL_TRY_GOTO(st, done,
                  pl_rng_fill(s, dst, PL_F32, n, param_seed(t, i),
                              p->first + (e - p->off), p->dist, p->a, p->b));
      if (host)
        PL_TRY_GOTO(st, done, pl_memcpy_async(s, w + (e - soff), tmp, n * 4));
      PL_TRY_GOTO(st, done, pl_stream_sync(s));
      e += n;
    }
  }
done:
  pl_free(t->dev, tmp);
  return st;
}

/* ---- parameters: gather and set (tests) -----------------------------------
 */

int pl_fsdp2_nparams(const pl_fsdp2 *t) {
  return t->npr;
}

pl_status pl_fsdp2_param_info(const pl_fsdp2 *t, int i, pl_param_info *out) {
  if (i < 0 || i >= t->npr)
    return pl_set_error(PL_EINVAL, "fsdp2: parameter %d of %d", i, t->npr);
  *out = t->pr[i].info;
  return PL_OK;
}

const float *pl_fsdp2_router_bias(const pl_fsdp2 *t, int l) {
  return l >= 0 && l < t->m.L && t->fl[l].moe ? t->fl[l].hbias : NULL;
}

pl_status pl_fsdp2_set_router_bias(pl_fsdp2 *t, int l, const float *bias) {
  if (l < 0 || l >= t->m.L || !t->fl[l].moe)
    return pl_set_error(PL_EINVAL, "fsdp2: layer %d has no router", l);
  memcpy(t->fl[l].hbias, bias, (size_t)t->E_r * 4);
  pl_stream *s = pl_dev_stream(t->dev);
  PL_TRY(pl_memcpy_async(s, t->fl[l].bias, bias, (size_t)t->E_r * 4));
  return pl_stream_sync(s);
}

/* All-gather count floats of host or device memory src over c (NULL: this
 * rank alone) into host out (size·count). */
static pl_status gather_host(pl_fsdp2 *t, pl_comm *c, const float *src,
                             size_t count, float *out) {
  pl_stream *s = pl_dev_stream(t->dev);
  const int n = c ? pl_comm_size(c) : 1;
  void *a = NULL, *b = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_alloc(t->dev, PL_ARENA_DEVICE, count * 4 + 4, "gather", &a));
  PL_TRY_GOTO(st, done,
              pl_alloc(t->dev, PL_ARENA_DEVICE, (size_t)n * count * 4 + 4,
                       "gather", &b));
  PL_TRY_GOTO(st, done, pl_memcpy_async(s, a, src, count * 4));
  PL_TRY_GOTO(st, done,
              c ? pl_allgather(c, a, b, count, PL_F32, s)
                : pl_memcpy_async(s, b, a, count * 4));
  PL_TRY_GOTO(st, done, pl_memcpy_async(s, out, b, (size_t)n * count * 4));
  st = pl_stream_sync(s);
done:
  pl_free(t->dev, a);
  pl_free(t->dev, b);
  return st;
}

pl_status pl_fsdp2_gather(pl_fsdp2 *t, int i, bool grad, float *out) {
  if (i < 0 || i >= t->npr)
    return pl_set_error(PL_EINVAL, "fsdp2: parameter %d of %d", i, t->npr);
  if (t->Wv != t->W)
    return pl_set_error(PL_EUNSUPPORTED,
                        "fsdp2: gather in a proxy (W_v=%d, W=%d)", t->Wv, t->W);
  PL_TRY(pl_dev_sync(t->dev));
  const param *p = &t->pr[i];
  float *w, *g;
  size_t s;
  pl_zero3_shard(t->f, p->unit, (void **)&w, &g, &s, NULL);
  pl_comm *uc = pl_zero3_comm(t->f, p->unit);
  const int G = uc ? pl_comm_size(uc) : 1;
  float *unit = malloc((size_t)G * s * 4 + 4);
  if (!unit)
    return pl_set_error(PL_ENOMEM, "fsdp2: host");
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, gather_host(t, uc, grad ? g : w, s, unit));
  if (!p->expert)
    memcpy(out, unit + p->off, (size_t)numel_of(p) * 4);
  else /* this EP shard's experts, then the group's */
    st = gather_host(t, t->epc, unit + p->off, p->extent, out);
done:
  free(unit);
  return st;
}

pl_status pl_fsdp2_set(pl_fsdp2 *t, int i, const float *in) {
  if (i < 0 || i >= t->npr)
    return pl_set_error(PL_EINVAL, "fsdp2: parameter %d of %d", i, t->npr);
  const param *p = &t->pr[i];
  size_t lo, hi, soff;
  float *w;
  in_shard(t, p, &lo, &hi, &w, &soff);
  pl_stream *s = pl_dev_stream(t->dev);
  if (hi > lo)
    PL_TRY(pl_memcpy_async(s, w + (lo - soff), in + p->first + (lo - p->off),
                           (hi - lo) * 4));
  return pl_stream_sync(s);
}
