/* stream_adamw.c — OffloadStreamAdamW (DESIGN §1.4) and its hybrid.
 *
 * Schedule of one step (Θ = the rank's params, β = bucket, s = slots):
 *
 *   caller stream S ──ev_start──▶ H2D, CMP, D2H, HYB streams
 *   norm (clipping on): chunk partials of every gradient on CMP, copied to
 *        the host, one host wait, summed in the fixed order, ranks summed in
 *        rank order -> gscale.  This is the only host wait, before any update.
 *   GPU buckets b = 0 .. ns−ncpu−1 (ns: the streamed buckets), slot j = b mod
 * s: H2D: wait ev_d2h[j] (slot free) ; master, m, v (+ gradient when it lives
 *          on the host) host -> slot j ; record ev_h2d[j]
 *     CMP: wait ev_h2d[j] ; fused AdamW + bf16 refresh per segment (a bucket
 *          may span tensors; one launch per tensor piece) ; record ev_cmp[j]
 *     D2H: wait ev_cmp[j] ; master, m, v slot j -> host ; record ev_d2h[j]
 *   resident buckets ns .. nb−1 (the last nb − ns, optimizer-state
 *     residency): on their own stream RES, beside the streamed ones: the
 *     same fused AdamW + bf16 refresh per segment on their device-resident
 *     master, m and v; nothing crosses the link, so they run under the
 *     link-bound pipeline of the streamed buckets;
 *   CPU buckets ns−ncpu .. ns−1 (hybrid), on a host thread, concurrently:
 *     every CPU bucket's gradient device -> host at once, first (HYB stream,
 *     an event per bucket: 2 bytes a parameter, ahead of the GPU buckets'
 *     12-byte master/m/v copies on the same direction of the link, so the
 *     CPU never waits behind them), then bucket by bucket the SIMD AdamW in
 *     place on the pinned master/m/v writing bf16 weights (over their own
 *     bf16 gradients in the host buffer; f32 or host gradients: a weights
 *     buffer), and the weights host -> device (HYB_UP stream).
 *   S waits for the last event of each of the six streams.
 *
 * Link bytes per param: GPU bucket 12 each way (+2 or 4 H2D if gradients are
 * on the host); CPU bucket 2 each way (gradient down, bf16 weight up);
 * resident bucket none.
 * Device memory: s·β·(12 [+ gradient bytes]) <= s·β·16 (tag optim_staging),
 * plus 12 bytes per resident parameter (tag optim_resident).
 * Pinned host memory of the hybrid (tag optim_hybrid): the CPU share's
 * gradients, cap·β·gsz (cap: the CPU buckets a fixed share gives, every
 * bucket with share auto), plus cap·β·2 of weights with f32 or host
 * gradients.
 *
 * The hybrid's share when auto: share_init at the first step, then after
 * every step r_cpu / (r_cpu + r_gpu), each rate the parameters that engine
 * updated over its own time in that step (the CPU thread's wall time; the
 * GPU path from its first copy up to its last copy down), both measured
 * while the other engine ran: the split at which both finish together.  The
 * first steps converge it (a bench's warm-ups).
 * On the CPU backend every stream runs in issue order, so the same schedule
 * runs serialized (and the hybrid thread really runs concurrently). */
#include "ops/stream_adamw.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/adamw_kernels.h"
#include "core/internal.h"
#include "ops/adamw_internal.h"

typedef struct seg {
  int param;   /* tensor index                          */
  size_t off;  /* element offset inside the tensor      */
  size_t len;  /* elements                              */
  size_t boff; /* element offset inside the bucket     */
} seg;

typedef struct bucket {
  size_t lo, n; /* flat range [lo, lo + n)               */
  size_t seg0, nseg;
} bucket;

struct pl_stream_adamw {
  pl_dev *dev;
  pl_adamw_hparams hp;
  pl_stream_adamw_cfg cfg;
  int nparams;
  pl_adamw_param *params;
  size_t total, gsz;
  bucket *bk;
  size_t nb;
  seg *segs;
  size_t nsegs;
  /* device staging */
  size_t slot_elems, slot_bytes;
  int nslots;
  char **slot;
  pl_stream *h2d, *cmp, *d2h, *hyb, *hyb_up, *res;
  pl_event **ev_h2d, **ev_cmp, **ev_d2h;
  int *slot_used;
  pl_event *ev_start, *ev_end[6], *ev_gpu0, *ev_gpu1;
  /* host state: elements [0, res_lo); device state: [res_lo, total) */
  float *p, *m, *v;
  int own_state;
  size_t res_lo, ns; /* first resident element; streamed buckets */
  float *dp, *dm, *dv;
  /* norm */
  size_t npart;
  double *dpart, *hpart;
  /* hybrid host buffers: cap CPU buckets of gradients (and weights) */
  int hybrid;
  size_t cap;
  void *hg;
  pl_bf16 *hw;      /* NULL: the weights go over the bf16 gradients */
  pl_event **ev_bg; /* cap: a CPU bucket's gradients are on the host */
  pl_event *ev_up;  /* the CPU share's last weights are on the device */
  int simd_path;
  /* per step */
  int64_t t;
  pl_adamw_scalars k;
  double share, rate_gpu, rate_cpu;
  int timing_pending;
  pl_stream_adamw_last last;
};

pl_stream_adamw_cfg pl_stream_adamw_cfg_default(void) {
  pl_stream_adamw_cfg c;
  memset(&c, 0, sizeof c);
  c.bucket = 100000000;
  c.slots = 2;
  c.grad_dtype = PL_BF16;
  c.grad_on_host = false;
  c.share = 0.0;
  c.share_init = 0.25;
  c.simd_path = 0;
  c.cpu_threads = 0;
  c.comm = NULL;
  return c;
}

pl_status pl_adamw_global_sumsq(pl_comm *c, double local, double *out) {
  if (!c || pl_comm_size(c) == 1) {
    *out = local;
    return PL_OK;
  }
  int n = pl_comm_size(c);
  int64_t mine, *all = malloc(sizeof(int64_t) * (size_t)n);
  if (!all)
    return pl_set_error(PL_ENOMEM, "adamw: norm gather buffer");
  memcpy(&mine, &local, sizeof mine);
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, pl_host_allgather_i64(c, &mine, 1, all));
  double s = 0.0;
  for (int r = 0; r < n; r++) {
    double x;
    memcpy(&x, &all[r], sizeof x);
    s = s + x;
  }
  *out = s;
done:
  free(all);
  return st;
}

static void destroy_events(pl_event **e, int n) {
  if (!e)
    return;
  for (int i = 0; i < n; i++)
    pl_event_destroy(e[i]);
  free(e);
}

void pl_stream_adamw_destroy(pl_stream_adamw *o) {
  if (!o)
    return;
  pl_dev_sync(o->dev);
  if (o->slot)
    for (int j = 0; j < o->nslots; j++)
      pl_free(o->dev, o->slot[j]);
  free(o->slot);
  destroy_events(o->ev_h2d, o->nslots);
  destroy_events(o->ev_cmp, o->nslots);
  destroy_events(o->ev_d2h, o->nslots);
  free(o->slot_used);
  pl_event_destroy(o->ev_start);
  for (int i = 0; i < 6; i++)
    pl_event_destroy(o->ev_end[i]);
  pl_event_destroy(o->ev_gpu0);
  pl_event_destroy(o->ev_gpu1);
  pl_free(o->dev, o->hg);
  pl_free(o->dev, o->hw);
  destroy_events(o->ev_bg, (int)o->cap);
  pl_event_destroy(o->ev_up);
  if (o->h2d)
    pl_stream_destroy(o->h2d);
  if (o->cmp)
    pl_stream_destroy(o->cmp);
  if (o->d2h)
    pl_stream_destroy(o->d2h);
  if (o->hyb)
    pl_stream_destroy(o->hyb);
  if (o->hyb_up)
    pl_stream_destroy(o->hyb_up);
  if (o->res)
    pl_stream_destroy(o->res);
  if (o->own_state) {
    pl_free(o->dev, o->p);
    pl_free(o->dev, o->m);
    pl_free(o->dev, o->v);
    pl_free(o->dev, o->dp);
    pl_free(o->dev, o->dm);
    pl_free(o->dev, o->dv);
  }
  pl_free(o->dev, o->dpart);
  pl_free(o->dev, o->hpart);
  free(o->bk);
  free(o->segs);
  free(o->params);
  free(o);
}

/* Buckets from the parameter order: bucket b = flat [b·β, min((b+1)·β, Θ)),
 * cut into per-tensor segments. */
static pl_status build_buckets(pl_stream_adamw *o) {
  size_t beta = o->cfg.bucket;
  o->nb = (o->total + beta - 1) / beta;
  o->bk = calloc(o->nb ? o->nb : 1, sizeof(bucket));
  /* segments <= buckets + tensors */
  o->segs = calloc(o->nb + (size_t)o->nparams + 1, sizeof(seg));
  if (!o->bk || !o->segs)
    return pl_set_error(PL_ENOMEM, "stream_adamw: bucket tables");
  int pi = 0;
  size_t poff = 0; /* offset inside tensor pi */
  for (size_t b = 0; b < o->nb; b++) {
    bucket *B = &o->bk[b];
    B->lo = b * beta;
    B->n = B->lo + beta < o->total ? beta : o->total - B->lo;
    B->seg0 = o->nsegs;
    size_t need = B->n, boff = 0;
    while (need > 0) {
      while (poff == o->params[pi].numel) {
        pi++;
        poff = 0;
      }
      size_t take = o->params[pi].numel - poff;
      if (take > need)
        take = need;
      seg *S = &o->segs[o->nsegs++];
      S->param = pi;
      S->off = poff;
      S->len = take;
      S->boff = boff;
      poff += take;
      boff += take;
      need -= take;
    }
    B->nseg = o->nsegs - B->seg0;
  }
  return PL_OK;
}

/* The most CPU buckets a step can have: share·nb rounded (at least 1), or
 * every bucket when auto. */
static size_t hybrid_cap(size_t nb, double share) {
  if (share < 0)
    return nb;
  double x = share * (double)nb + 0.5;
  return x < 1 ? 1 : (size_t)x < nb ? (size_t)x : nb;
}

size_t pl_stream_adamw_resident_elems(size_t theta, size_t beta, bool all,
                                      uint64_t bytes) {
  if (theta == 0 || beta == 0)
    return 0;
  if (all || bytes / 12 >= theta)
    return theta;
  const size_t nb = (theta + beta - 1) / beta;
  /* the buckets that must stay streamed: theta − β·k <= bytes / 12 */
  const size_t k = (theta - (size_t)(bytes / 12) + beta - 1) / beta;
  return k >= nb ? 0 : theta - beta * k;
}

size_t pl_stream_adamw_hybrid_bytes(size_t theta,
                                    const pl_stream_adamw_cfg *cfg) {
  theta = cfg->resident < theta ? theta - cfg->resident : 0;
  if (cfg->share == 0 || theta == 0 || cfg->bucket == 0)
    return 0;
  size_t nb = (theta + cfg->bucket - 1) / cfg->bucket;
  size_t elems =
      hybrid_cap(nb, cfg->share) * (cfg->bucket < theta ? cfg->bucket : theta);
  size_t gsz = pl_dtype_size(cfg->grad_dtype);
  return elems * ((cfg->grad_on_host ? 0 : gsz) +
                  (cfg->grad_on_host || cfg->grad_dtype != PL_BF16 ? 2 : 0));
}

/* The state: borrowed (checked) or allocated — the streamed elements
 * [0, res_lo) pinned on the host, the resident ones on the device — and the
 * split: res_lo a bucket boundary, ns the streamed buckets. */
static pl_status setup_state(pl_stream_adamw *o) {
  const pl_stream_adamw_cfg *cfg = &o->cfg;
  const size_t total = o->total, R = cfg->resident;
  if (R > total || ((total - R) % cfg->bucket && R > 0 && total - R > 0))
    return pl_set_error(PL_EINVAL,
                        "stream_adamw: resident=%zu of %zu params: must be at "
                        "most all, in whole buckets of beta=%zu from the end",
                        R, total, cfg->bucket);
  if (R > 0 && cfg->grad_on_host)
    return pl_set_error(PL_EINVAL,
                        "stream_adamw: resident=%zu with the "
                        "gradients in host memory: resident buckets update "
                        "on the device from device gradients",
                        R);
  o->res_lo = total - R;
  o->ns = (o->res_lo + cfg->bucket - 1) / cfg->bucket;
  if (cfg->state) {
    const pl_adamw_state *b = cfg->state;
    if (b->numel != total || b->resident != R ||
        (R < total && (!b->p || !b->m || !b->v)) ||
        (R > 0 && (!b->dp || !b->dm || !b->dv)))
      return pl_set_error(PL_EINVAL,
                          "stream_adamw: borrowed state of %zu "
                          "params (%zu resident): must hold all %zu (%zu "
                          "resident)",
                          b->numel, b->resident, total, R);
    o->p = b->p, o->m = b->m, o->v = b->v;
    o->dp = b->dp, o->dm = b->dm, o->dv = b->dv;
    return PL_OK;
  }
  o->own_state = 1;
  const size_t h = o->res_lo * 4, d = R * 4;
  float **hs[3] = {&o->p, &o->m, &o->v}, **ds[3] = {&o->dp, &o->dm, &o->dv};
  for (int i = 0; i < 3; i++) {
    if (h)
      PL_TRY(pl_alloc(o->dev, PL_ARENA_HOST, h, "optim", (void **)hs[i]));
    if (d)
      PL_TRY(pl_alloc(o->dev, PL_ARENA_DEVICE, d, "optim_resident",
                      (void **)ds[i]));
  }
  return PL_OK;
}

/* The arguments of pl_stream_adamw_create, refused with a message naming
 * the value; *total: the parameters in all. */
static pl_status check_args(const pl_adamw_hparams *hp,
                            const pl_stream_adamw_cfg *cfg, int nparams,
                            const pl_adamw_param *params, size_t *total) {
  PL_TRY(pl_adamw_hparams_check(hp));
  if (!cfg)
    return pl_set_error(PL_EINVAL, "stream_adamw: cfg is NULL");
  if (cfg->bucket < 1)
    return pl_set_error(PL_EINVAL, "stream_adamw: bucket=%zu: must be >= 1",
                        cfg->bucket);
  if (cfg->slots < 1 || cfg->slots > 64)
    return pl_set_error(PL_EINVAL, "stream_adamw: slots=%d: must be in 1..64",
                        cfg->slots);
  if (cfg->grad_dtype != PL_F32 && cfg->grad_dtype != PL_BF16)
    return pl_set_error(PL_EINVAL,
                        "stream_adamw: gradient dtype %s: must be "
                        "f32 or bf16",
                        pl_dtype_name(cfg->grad_dtype));
  if (!(cfg->share <= 1.0) ||
      (cfg->share < 0 && !(cfg->share_init >= 0 && cfg->share_init <= 1)))
    return pl_set_error(PL_EINVAL,
                        "stream_adamw: share=%g (init %g): must "
                        "be in [0, 1], or < 0 (auto) with init in [0, 1]",
                        cfg->share, cfg->share_init);
  if (nparams < 1 || !params)
    return pl_set_error(PL_EINVAL, "stream_adamw: nparams=%d: must be >= 1",
                        nparams);
  *total = 0;
  for (int i = 0; i < nparams; i++) {
    if (params[i].numel > 0 && (!params[i].weight || !params[i].grad))
      return pl_set_error(PL_EINVAL,
                          "stream_adamw: param %d: NULL weight or "
                          "gradient",
                          i);
    *total += params[i].numel;
  }
  if (*total == 0)
    return pl_set_error(PL_EINVAL, "stream_adamw: 0 parameters in total");
  return PL_OK;
}

/* The device staging: min(s, ns) slots of min(β, Θ − resident) params, with
 * their events, and the optimizer's streams and events. */
static pl_status make_staging(pl_stream_adamw *o) {
  pl_dev *dev = o->dev;
  const pl_stream_adamw_cfg *cfg = &o->cfg;
  o->slot_elems = cfg->bucket < o->res_lo ? cfg->bucket : o->res_lo;
  o->nslots = (size_t)cfg->slots < o->ns ? cfg->slots : (int)o->ns;
  o->slot_bytes = o->slot_elems * (12 + (cfg->grad_on_host ? o->gsz : 0));
  o->slot = calloc((size_t)o->nslots + 1, sizeof(char *));
  o->ev_h2d = calloc((size_t)o->nslots + 1, sizeof(pl_event *));
  o->ev_cmp = calloc((size_t)o->nslots + 1, sizeof(pl_event *));
  o->ev_d2h = calloc((size_t)o->nslots + 1, sizeof(pl_event *));
  o->slot_used = calloc((size_t)o->nslots + 1, sizeof(int));
  if (!o->slot || !o->ev_h2d || !o->ev_cmp || !o->ev_d2h || !o->slot_used)
    return pl_set_error(PL_ENOMEM, "stream_adamw: slot tables");
  for (int j = 0; j < o->nslots; j++) {
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, o->slot_bytes, "optim_staging",
                    (void **)&o->slot[j]));
    PL_TRY(pl_event_create(dev, &o->ev_h2d[j]));
    PL_TRY(pl_event_create(dev, &o->ev_cmp[j]));
    PL_TRY(pl_event_create(dev, &o->ev_d2h[j]));
  }
  PL_TRY(pl_stream_create(dev, &o->h2d));
  PL_TRY(pl_stream_create(dev, &o->cmp));
  PL_TRY(pl_stream_create(dev, &o->d2h));
  PL_TRY(pl_stream_create(dev, &o->hyb));
  PL_TRY(pl_stream_create(dev, &o->hyb_up));
  PL_TRY(pl_stream_create(dev, &o->res));
  PL_TRY(pl_event_create(dev, &o->ev_start));
  PL_TRY(pl_event_create(dev, &o->ev_gpu0));
  PL_TRY(pl_event_create(dev, &o->ev_gpu1));
  for (int i = 0; i < 6; i++)
    PL_TRY(pl_event_create(dev, &o->ev_end[i]));
  return PL_OK;
}

/* The hybrid's host buffers and events (cap slots the CPU may update). */
static pl_status make_hybrid(pl_stream_adamw *o) {
  pl_dev *dev = o->dev;
  const pl_stream_adamw_cfg *cfg = &o->cfg;
  o->cap = hybrid_cap(o->ns, cfg->share);
  size_t elems = o->cap * o->slot_elems;
  const int wbuf = cfg->grad_on_host || cfg->grad_dtype != PL_BF16;
  o->ev_bg = calloc(o->cap, sizeof(pl_event *));
  if (!o->ev_bg)
    return pl_set_error(PL_ENOMEM, "stream_adamw: hybrid events");
  if (!cfg->grad_on_host)
    PL_TRY(
        pl_alloc(dev, PL_ARENA_HOST, elems * o->gsz, "optim_hybrid", &o->hg));
  if (wbuf)
    PL_TRY(pl_alloc(dev, PL_ARENA_HOST, elems * 2, "optim_hybrid",
                    (void **)&o->hw));
  PL_TRY(pl_event_create(dev, &o->ev_up));
  for (size_t i = 0; i < o->cap; i++)
    PL_TRY(pl_event_create(dev, &o->ev_bg[i]));
  return PL_OK;
}

pl_status pl_stream_adamw_create(pl_dev *dev, const pl_adamw_hparams *hp,
                                 const pl_stream_adamw_cfg *cfg, int nparams,
                                 const pl_adamw_param *params,
                                 pl_stream_adamw **out) {
  *out = NULL;
  size_t total = 0;
  PL_TRY(check_args(hp, cfg, nparams, params, &total));
  int simd = 0;
  if (cfg->share != 0) {
    pl_simd_path rp;
    PL_TRY(pl_simd_path_resolve((pl_simd_path)cfg->simd_path, &rp));
    simd = (int)rp;
  }

  pl_stream_adamw *o = calloc(1, sizeof *o);
  if (!o)
    return pl_set_error(PL_ENOMEM, "stream_adamw: host struct");
  o->dev = dev;
  o->hp = *hp;
  o->cfg = *cfg;
  o->nparams = nparams;
  o->total = total;
  o->gsz = pl_dtype_size(cfg->grad_dtype);
  o->simd_path = simd;
  o->hybrid = cfg->share != 0 && cfg->resident < total;
  o->share = cfg->share < 0 ? cfg->share_init : cfg->share;
  o->params = malloc(sizeof(pl_adamw_param) * (size_t)nparams);
  pl_status st = PL_OK;
  if (!o->params) {
    st = pl_set_error(PL_ENOMEM, "stream_adamw: param table");
    goto fail;
  }
  memcpy(o->params, params, sizeof(pl_adamw_param) * (size_t)nparams);
  PL_TRY_GOTO(st, fail, build_buckets(o));
  PL_TRY_GOTO(st, fail, setup_state(o));
  /* norm partials */
  for (int i = 0; i < nparams; i++)
    o->npart += pl_adamw_norm_nchunks(params[i].numel);
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, o->npart * 8, "optim_norm",
                       (void **)&o->dpart));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_HOST, o->npart * 8, "optim_norm",
                       (void **)&o->hpart));
  PL_TRY_GOTO(st, fail, make_staging(o));
  if (o->hybrid)
    PL_TRY_GOTO(st, fail, make_hybrid(o));
  /* device allocations are ordered on the default stream: make them
   * complete before other streams use them */
  PL_TRY_GOTO(st, fail, pl_stream_sync(pl_dev_stream(dev)));
  *out = o;
  return PL_OK;
fail:
  pl_stream_adamw_destroy(o);
  return st;
}

pl_adamw_state pl_stream_adamw_state(pl_stream_adamw *o) {
  pl_adamw_state s = {o->p,  o->m,  o->v,  o->total,
                      o->dp, o->dm, o->dv, o->total - o->res_lo};
  return s;
}
size_t pl_stream_adamw_nbuckets(const pl_stream_adamw *o) {
  return o->nb;
}
size_t pl_stream_adamw_staging_bytes(const pl_stream_adamw *o) {
  return (size_t)o->nslots * o->slot_bytes;
}

/* ---- the norm ------------------------------------------------------------ */

static pl_status clip_scale(pl_stream_adamw *o, pl_stream *s, float *gscale,
                            double *sumsq) {
  *gscale = 1.0f;
  *sumsq = 0.0;
  /* dry device: no gradients to measure (and no allocation depends on it) */
  if (!(o->hp.max_grad_norm > 0) || pl__dev_dry(o->dev))
    return PL_OK;
  size_t c = 0;
  if (o->cfg.grad_on_host) {
    /* Gradients in pinned host memory, produced in order on s. */
    PL_TRY(pl_stream_sync(s));
    for (int i = 0; i < o->nparams; i++) {
      pl_adamw_ref_sumsq_partials(o->params[i].grad, o->cfg.grad_dtype,
                                  o->params[i].numel, o->hpart + c);
      c += pl_adamw_norm_nchunks(o->params[i].numel);
    }
  } else {
    for (int i = 0; i < o->nparams; i++) {
      PL_TRY(pl__adamw_sumsq(o->cmp, o->params[i].grad, o->cfg.grad_dtype,
                             o->params[i].numel, o->dpart + c));
      c += pl_adamw_norm_nchunks(o->params[i].numel);
    }
    PL_TRY(pl_memcpy_async(o->cmp, o->hpart, o->dpart, c * 8));
    PL_TRY(pl_stream_sync(o->cmp));
  }
  double ss = pl_adamw_sum_partials(o->hpart, c);
  PL_TRY(pl_adamw_global_sumsq(o->cfg.comm, ss, &ss));
  *sumsq = ss;
  *gscale = pl_adamw_clip_scale(&o->hp, ss);
  return PL_OK;
}

/* ---- the CPU share (hybrid)
 * -------------------------------------------------- */

typedef struct cpu_job {
  pl_stream_adamw *o;
  size_t b0, b1; /* buckets [b0, b1) */
  pl_status st;
  char err[256];
  double ms;
} cpu_job;

/* Gradient pieces of CPU bucket b (the i-th) device -> its host buffer (on
 * HYB), then its event. */
static pl_status cpu_fetch(pl_stream_adamw *o, size_t b, size_t i) {
  bucket *B = &o->bk[b];
  char *dst = (char *)o->hg + i * o->slot_elems * o->gsz;
  for (size_t q = 0; q < B->nseg; q++) {
    seg *S = &o->segs[B->seg0 + q];
    PL_TRY(pl_memcpy_async(o->hyb, dst + S->boff * o->gsz,
                           (const char *)o->params[S->param].grad +
                               S->off * o->gsz,
                           S->len * o->gsz));
  }
  return pl_event_record(o->ev_bg[i], o->hyb);
}

static pl_status cpu_run(cpu_job *J) {
  pl_stream_adamw *o = J->o;
  PL_TRY(pl__adamw_bind_thread(o->dev));
  const int on_host = o->cfg.grad_on_host;
  /* every CPU bucket's gradients down first, in bucket order */
  if (!on_host)
    for (size_t b = J->b0; b < J->b1; b++)
      PL_TRY(cpu_fetch(o, b, b - J->b0));
  for (size_t b = J->b0; b < J->b1; b++) {
    const size_t i = b - J->b0;
    bucket *B = &o->bk[b];
    /* the weights: into their own buffer, or over the bucket's bf16
     * gradients (each element read before it is written) */
    pl_bf16 *w = o->hw
                     ? o->hw + i * o->slot_elems
                     : (pl_bf16 *)((char *)o->hg + i * o->slot_elems * o->gsz);
    if (pl__dev_dry(o->dev)) {
      /* dry device: the host state is tracked, not backed */
    } else if (on_host) {
      for (size_t q = 0; q < B->nseg; q++) {
        seg *S = &o->segs[B->seg0 + q];
        size_t f = B->lo + S->boff;
        PL_TRY(pl__cpu_adamw_simd(
            (pl_simd_path)o->simd_path, o->cfg.cpu_threads, o->p + f, o->m + f,
            o->v + f, (const char *)o->params[S->param].grad + S->off * o->gsz,
            o->cfg.grad_dtype, w + S->boff, S->len, &o->k));
      }
    } else {
      PL_TRY(pl_event_sync(o->ev_bg[i]));
      PL_TRY(
          pl__cpu_adamw_simd((pl_simd_path)o->simd_path, o->cfg.cpu_threads,
                             o->p + B->lo, o->m + B->lo, o->v + B->lo,
                             (const char *)o->hg + i * o->slot_elems * o->gsz,
                             o->cfg.grad_dtype, w, B->n, &o->k));
    }
    for (size_t q = 0; q < B->nseg; q++) {
      seg *S = &o->segs[B->seg0 + q];
      PL_TRY(pl_memcpy_async(o->hyb_up, o->params[S->param].weight + S->off,
                             w + S->boff, S->len * 2));
    }
  }
  PL_TRY(pl_event_record(o->ev_up, o->hyb_up));
  return pl_event_sync(o->ev_up);
}

static void *cpu_thread(void *arg) {
  cpu_job *J = arg;
  uint64_t t0 = pl_now_ns();
  J->st = cpu_run(J);
  if (J->st != PL_OK)
    snprintf(J->err, sizeof J->err, "%s", pl_last_error());
  J->ms = (double)(pl_now_ns() - t0) * 1e-6;
  return NULL;
}

/* ---- the step
 * ------------------------------------------------------------------ */

/* The resident buckets: the fused update in place on their device master,
 * m and v, on RES (after the norm; beside the streamed buckets, whose
 * pipeline is bound by the host link, not by the device). */
static pl_status update_resident(pl_stream_adamw *o) {
  for (size_t b = o->ns; b < o->nb; b++) {
    const bucket *B = &o->bk[b];
    for (size_t q = 0; q < B->nseg; q++) {
      const seg *S = &o->segs[B->seg0 + q];
      const size_t f = B->lo + S->boff - o->res_lo;
      PL_TRY(pl__adamw_update(
          o->res, o->dp + f, o->dm + f, o->dv + f,
          (const char *)o->params[S->param].grad + S->off * o->gsz,
          o->cfg.grad_dtype, o->params[S->param].weight + S->off, S->len,
          &o->k));
    }
  }
  return PL_OK;
}

/* Rates of the previous step (its events are complete by now in practice; the
 * wait is outside the bucket loop) -> the next share when auto. */
static pl_status finish_timing(pl_stream_adamw *o) {
  if (!o->timing_pending)
    return PL_OK;
  o->timing_pending = 0;
  pl_stream_adamw_last *L = &o->last;
  if (L->gpu_buckets > 0) {
    PL_TRY(pl_event_sync(o->ev_gpu1));
    float ms = 0;
    PL_TRY(pl_event_elapsed_ms(o->ev_gpu0, o->ev_gpu1, &ms));
    L->gpu_ms = ms;
    size_t n = o->bk[L->gpu_buckets - 1].lo + o->bk[L->gpu_buckets - 1].n;
    if (ms > 0)
      o->rate_gpu = (double)n / ms;
  }
  if (L->cpu_buckets > 0 && L->cpu_ms > 0) {
    size_t n = o->res_lo - o->bk[o->ns - L->cpu_buckets].lo;
    o->rate_cpu = (double)n / L->cpu_ms;
  }
  if (o->cfg.share < 0 && o->rate_gpu > 0 && o->rate_cpu > 0)
    o->share = o->rate_cpu / (o->rate_cpu + o->rate_gpu);
  L->next_share = o->share;
  return PL_OK;
}

/* One streamed bucket b on the GPU: its state into slot b mod s (after the
 * slot's last copy out), the gradients too when they live on the host, the
 * update on CMP, the state back on D2H; events only, no host wait. */
static pl_status gpu_bucket(pl_stream_adamw *o, size_t b,
                            pl_stream_adamw_last *L) {
  const int on_host = o->cfg.grad_on_host;
  const size_t E = o->slot_elems;
  const int j = (int)(b % (size_t)o->nslots);
  const bucket *B = &o->bk[b];
  float *sp = (float *)o->slot[j], *sm = sp + E, *sv = sm + E;
  char *sg = (char *)(sv + E);
  if (o->slot_used[j])
    PL_TRY(pl_stream_wait(o->h2d, o->ev_d2h[j]));
  PL_TRY(pl_memcpy_async(o->h2d, sp, o->p + B->lo, B->n * 4));
  PL_TRY(pl_memcpy_async(o->h2d, sm, o->m + B->lo, B->n * 4));
  PL_TRY(pl_memcpy_async(o->h2d, sv, o->v + B->lo, B->n * 4));
  for (size_t q = 0; on_host && q < B->nseg; q++) {
    const seg *S = &o->segs[B->seg0 + q];
    PL_TRY(pl_memcpy_async(o->h2d, sg + S->boff * o->gsz,
                           (const char *)o->params[S->param].grad +
                               S->off * o->gsz,
                           S->len * o->gsz));
  }
  PL_TRY(pl_event_record(o->ev_h2d[j], o->h2d));
  PL_TRY(pl_stream_wait(o->cmp, o->ev_h2d[j]));
  for (size_t q = 0; q < B->nseg; q++) {
    const seg *S = &o->segs[B->seg0 + q];
    const void *g =
        on_host ? (const void *)(sg + S->boff * o->gsz)
                : (const void *)((const char *)o->params[S->param].grad +
                                 S->off * o->gsz);
    PL_TRY(pl__adamw_update(
        o->cmp, sp + S->boff, sm + S->boff, sv + S->boff, g, o->cfg.grad_dtype,
        o->params[S->param].weight + S->off, S->len, &o->k));
  }
  PL_TRY(pl_event_record(o->ev_cmp[j], o->cmp));
  PL_TRY(pl_stream_wait(o->d2h, o->ev_cmp[j]));
  PL_TRY(pl_memcpy_async(o->d2h, o->p + B->lo, sp, B->n * 4));
  PL_TRY(pl_memcpy_async(o->d2h, o->m + B->lo, sm, B->n * 4));
  PL_TRY(pl_memcpy_async(o->d2h, o->v + B->lo, sv, B->n * 4));
  PL_TRY(pl_event_record(o->ev_d2h[j], o->d2h));
  o->slot_used[j] = 1;
  L->h2d_bytes += B->n * (12 + (on_host ? o->gsz : 0));
  L->d2h_bytes += B->n * 12;
  return PL_OK;
}

pl_status pl_stream_adamw_step(pl_stream_adamw *o, pl_stream *s) {
  if (!o || !s)
    return pl_set_error(PL_EINVAL, "stream_adamw_step: NULL");
  PL_TRY(finish_timing(o));
  pl_stream_adamw_last L;
  memset(&L, 0, sizeof L);

  PL_TRY(pl_event_record(o->ev_start, s));
  PL_TRY(pl_stream_wait(o->h2d, o->ev_start));
  PL_TRY(pl_stream_wait(o->cmp, o->ev_start));
  PL_TRY(pl_stream_wait(o->d2h, o->ev_start));
  PL_TRY(pl_stream_wait(o->hyb, o->ev_start));
  PL_TRY(pl_stream_wait(o->hyb_up, o->ev_start));
  PL_TRY(pl_stream_wait(o->res, o->ev_start));

  /* 1. clipping norm from all gradients, before any update */
  PL_TRY(clip_scale(o, s, &L.gscale, &L.sumsq));
  o->t++;
  o->k = pl_adamw_scalars_make(&o->hp, o->t, L.gscale);

  /* 2. split: GPU buckets first, the CPU share from the end of the streamed
   * ones; the resident buckets (after them) first on CMP, no copies */
  size_t ncpu = 0;
  if (o->hybrid) {
    double x = o->share * (double)o->ns + 0.5;
    ncpu = x < 0 ? 0 : (size_t)x;
    if (ncpu > o->cap)
      ncpu = o->cap;
  }
  size_t ngpu = o->ns - ncpu;
  L.share = o->ns ? (double)ncpu / (double)o->ns : 0;
  PL_TRY(update_resident(o));

  cpu_job job;
  memset(&job, 0, sizeof job);
  job.o = o;
  job.b0 = ngpu;
  job.b1 = o->ns;
  pthread_t th;
  int started = 0;
  if (ncpu > 0) {
    if (pthread_create(&th, NULL, cpu_thread, &job) != 0)
      return pl_set_error(PL_ERUNTIME, "stream_adamw: pthread_create failed");
    started = 1;
  }

  /* 3. the GPU buckets: three streams, events, no host wait */
  pl_status st = PL_OK;
  const int on_host = o->cfg.grad_on_host;
  if (ngpu > 0)
    st = pl_event_record(o->ev_gpu0, o->h2d);
  for (size_t b = 0; b < ngpu && st == PL_OK; b++)
    st = gpu_bucket(o, b, &L);
  if (st == PL_OK && ngpu > 0)
    st = pl_event_record(o->ev_gpu1, o->d2h);

  /* 4. join the CPU share */
  if (started) {
    pthread_join(th, NULL);
    if (st == PL_OK && job.st != PL_OK)
      st = pl_set_error(job.st, "%s", job.err);
    L.cpu_ms = job.ms;
    size_t n = o->res_lo - o->bk[ngpu].lo;
    L.h2d_bytes += n * 2;
    if (!on_host)
      L.d2h_bytes += n * o->gsz;
  }
  if (st != PL_OK)
    return st;

  /* 5. S waits for everything */
  pl_stream *all[6] = {o->h2d, o->cmp, o->d2h, o->hyb, o->hyb_up, o->res};
  for (int i = 0; i < 6; i++) {
    PL_TRY(pl_event_record(o->ev_end[i], all[i]));
    PL_TRY(pl_stream_wait(s, o->ev_end[i]));
  }
  L.t = o->t;
  L.gpu_buckets = ngpu;
  L.cpu_buckets = ncpu;
  L.resident_buckets = o->nb - o->ns;
  L.next_share = o->share;
  o->last = L;
  o->timing_pending = 1;
  return PL_OK;
}

void pl_stream_adamw_last_get(const pl_stream_adamw *o,
                              pl_stream_adamw_last *out) {
  pl_stream_adamw *m = (pl_stream_adamw *)o;
  (void)finish_timing(m);
  *out = o->last;
}

float pl_stream_adamw_gscale(const pl_stream_adamw *o) {
  return o->last.gscale;
}
