/* moe.c — the MoE layer object (ops/moe.h): variant names, the default
 * configuration, the dispatch bound, and create / destroy with the layer's
 * comm stream, compute lanes and events.  The work of a forward and backward
 * is in the files ops/moe_internal.h lists: the routing plan (moe_plan.c), the
 * expert compute (moe_expert.c) and the chunk pipeline (moe_pipeline.c).
 * Backend-neutral: kernels are picked by the stream's backend where they are
 * launched (DESIGN.md §1.1). */
#include "ops/moe.h"

#include <stdlib.h>
#include <string.h>

#include "ops/moe_internal.h"

/* ---- configuration ------------------------------------------------------- */

#define PL__MOE_DESC(id, name, short_name, plans, chunks)                      \
  {id, name, short_name, plans, chunks},
const pl_moe_variant_desc pl_moe_variants[PL_MOE_VARIANT_COUNT] = {
    PL_MOE_VARIANTS(PL__MOE_DESC, )};
#define PL__MOE_NAME_ITEM(id, name, short_name, plans, chunks) name,
#define PL__MOE_SHORT_ITEM(id, name, short_name, plans, chunks) short_name,
const char *const pl_moe_variant_names[PL_MOE_VARIANT_COUNT + 1] = {
    PL_MOE_VARIANTS(PL__MOE_NAME_ITEM, ) NULL};
const char *const pl_moe_variant_short_names[PL_MOE_VARIANT_COUNT + 1] = {
    PL_MOE_VARIANTS(PL__MOE_SHORT_ITEM, ) NULL};

const pl_moe_variant_desc *pl_moe_variant_desc_of(pl_moe_variant v) {
  PL_ASSERT((unsigned)v < PL_MOE_VARIANT_COUNT);
  return &pl_moe_variants[v];
}

pl_status pl_moe_variant_chunking(pl_moe_variant v, int64_t N_max, int64_t c,
                                  int K_max, int *K, int64_t *c_eff) {
  if (pl_moe_variant_desc_of(v)->chunks)
    return pl_llep_chunking(N_max, c, K_max, K, c_eff);
  *K = 1;
  *c_eff = N_max;
  return PL_OK;
}

const char *pl_moe_variant_name(pl_moe_variant v) {
  return (unsigned)v < PL_MOE_VARIANT_COUNT ? pl_moe_variant_names[v] : "?";
}

const char *pl_moe_variant_short_name(pl_moe_variant v) {
  return (unsigned)v < PL_MOE_VARIANT_COUNT ? pl_moe_variant_short_names[v]
                                            : "?";
}

pl_status pl_moe_variant_parse(const char *s, pl_moe_variant *out) {
  for (int v = 0; s && v < PL_MOE_VARIANT_COUNT; v++)
    if (!strcmp(s, pl_moe_variant_names[v]) ||
        !strcmp(s, pl_moe_variant_short_names[v])) {
      *out = (pl_moe_variant)v;
      return PL_OK;
    }
  /* "allowed ep, llep, pipelined_llep (or pllep)": the names, then the
   * short names that differ from them */
  char alt[256] = "";
  for (int v = 0; v < PL_MOE_VARIANT_COUNT; v++)
    if (strcmp(pl_moe_variant_names[v], pl_moe_variant_short_names[v]))
      snprintf(alt + strlen(alt), sizeof alt - strlen(alt), "%s%s",
               alt[0] ? ", " : " (or ", pl_moe_variant_short_names[v]);
  return pl_set_error(PL_EINVAL, "variant '%s': allowed %s%s%s", s ? s : "",
                      PL_MOE_NAMES_JOINED(", "), alt, alt[0] ? ")" : "");
}

pl_moe_cfg pl_moe_cfg_default(void) {
  pl_moe_cfg c;
  memset(&c, 0, sizeof c);
  c.dt = PL_F32;
  c.variant = PL_MOE_PIPELINED;
  c.knobs = pl_llep_knobs_default();
  c.c = INT64_MAX;
  c.K_max = 64;
  c.contiguous = false;
  c.overlap = true;
  c.lanes = 2; /* small per-expert GEMMs of a chunk fill the GPU together
                  (results are the same for any lanes; the measured gain is
                  in doc/performance/moe.md) */
  return c;
}

size_t pl_moe_dispatch_bound(const pl_moe_cfg *cfg, int Ep, int64_t c_eff) {
  return 2u * (size_t)Ep * (size_t)cfg->k * (size_t)c_eff * (size_t)cfg->H *
         pl_dtype_size(cfg->dt);
}

pl_status pl_moe_create(pl_comm *ep, const pl_moe_cfg *cfg, pl_moe **out) {
  *out = NULL;
  int Ep = pl_comm_size(ep);
  if (cfg->H < 1 || cfg->I < 1)
    return pl_set_error(PL_EINVAL, "moe: H=%lld, I=%lld: both must be >= 1",
                        (long long)cfg->H, (long long)cfg->I);
  /* k may exceed E: a token's routes may repeat an expert (each route is
   * dispatched, computed and combined alone) — a proxy's router slots
   * (model/moe_ffn.h) */
  if (cfg->k < 1 || cfg->k > 1024)
    return pl_set_error(PL_EINVAL, "moe: k=%d: must be in [1, 1024]", cfg->k);
  if (cfg->E < 1 || cfg->E % Ep != 0)
    return pl_set_error(PL_EINVAL,
                        "moe: E=%d experts is not a multiple of Ep=%d ranks "
                        "(each rank must own E/Ep experts)",
                        cfg->E, Ep);
  if (cfg->dt != PL_F32 && cfg->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "moe: dtype %s: allowed f32, bf16",
                        pl_dtype_name(cfg->dt));
  if ((unsigned)cfg->variant >= PL_MOE_VARIANT_COUNT)
    return pl_set_error(PL_EINVAL, "moe: variant %d: allowed 0..%d",
                        (int)cfg->variant, PL_MOE_VARIANT_COUNT - 1);
  if (pl_moe_variant_desc_of(cfg->variant)->chunks &&
      (cfg->c < 1 || cfg->K_max < 1))
    return pl_set_error(PL_EINVAL, "moe: c=%lld, K_max=%d: both must be >= 1",
                        (long long)cfg->c, cfg->K_max);
  if ((int64_t)cfg->E * cfg->H * cfg->I > ((int64_t)1 << 40))
    return pl_set_error(PL_EINVAL, "moe: E*H*I too large");
  if (cfg->comm_blocks < 0 || cfg->comm_blocks > 65535)
    return pl_set_error(PL_EINVAL,
                        "moe: comm_blocks=%d: must be in [0, "
                        "65535] (0: uncapped)",
                        cfg->comm_blocks);
  if (cfg->lanes < 0 || cfg->lanes > PL_MOE_MAX_LANES)
    return pl_set_error(PL_EINVAL, "moe: lanes=%d: must be in [0, %d]",
                        cfg->lanes, PL_MOE_MAX_LANES);
  pl_moe *m = calloc(1, sizeof *m);
  if (!m)
    return pl_set_error(PL_ENOMEM, "moe: host allocation");
  m->cfg = *cfg;
  m->comm = ep;
  m->dev = pl_comm_dev(ep);
  m->rank = pl_comm_rank(ep);
  m->Ep = Ep;
  m->El = cfg->E / Ep;
  m->cs = pl_dev_stream(m->dev);
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, fail, pl_stream_create(m->dev, &m->ms));
  pl_stream_set_grid_cap(m->ms, cfg->comm_blocks);
  PL_TRY_GOTO(st, fail, pl_event_create(m->dev, &m->evf));
  PL_TRY_GOTO(st, fail, pl_event_create(m->dev, &m->evp));
  PL_TRY_GOTO(st, fail, pl_event_create(m->dev, &m->evq));
  for (int l = 0; l < cfg->lanes; l++) {
    PL_TRY_GOTO(st, fail, pl_stream_create(m->dev, &m->ln[l]));
    PL_TRY_GOTO(st, fail, pl_event_create(m->dev, &m->evj[l]));
    m->nl++;
  }
  *out = m;
  return PL_OK;
fail:
  pl_moe_destroy(m);
  return st;
}

void pl_moe_destroy(pl_moe *m) {
  if (!m)
    return;
  for (int l = 0; l < PL_MOE_MAX_LANES; l++) {
    if (m->ln[l])
      pl_stream_destroy(m->ln[l]);
    if (m->evj[l])
      pl_event_destroy(m->evj[l]);
  }
  if (m->evf)
    pl_event_destroy(m->evf);
  if (m->evp)
    pl_event_destroy(m->evp);
  if (m->evq)
    pl_event_destroy(m->evq);
  if (m->ms)
    pl_stream_destroy(m->ms);
  free(m);
}

const pl_moe_cfg *pl_moe_get_cfg(const pl_moe *m) {
  return &m->cfg;
}
pl_comm *pl_moe_comm(const pl_moe *m) {
  return m->comm;
}
