/* cfg.c — a plan's configurations: the systems' and activation
 * checkpointing's names, the defaults of each system (pl_plan_cfg_plateau,
 * pl_plan_cfg_fsdp2), tokens per rank and per step, and the one-line
 * description every plan prints (pl_plan_cfg_str). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

const char *const pl_plan_system_names[] = {PL_PLAN_NAME_PLATEAU,
                                            PL_PLAN_NAME_FSDP2, NULL};

const char *pl_plan_system_name(pl_plan_system s) {
  return pl_plan_system_names[s == PL_PLAN_FSDP2 ? PL_PLAN_FSDP2
                                                 : PL_PLAN_PLATEAU];
}

const char *const pl_plan_ac_names[] = {"full", "selective", "none", NULL};

const char *pl_plan_ac_name(pl_plan_ac a) {
  return (unsigned)a <= PL_PLAN_AC_NONE ? pl_plan_ac_names[a] : "?";
}

pl_plan_free pl_plan_free_every(void) {
  return (pl_plan_free){.D = true,
                        .P = true,
                        .c = true,
                        .beta = true,
                        .sco = true,
                        .optim = true,
                        .cp = true,
                        .ep = true,
                        .ac = true,
                        .offload = true,
                        .resident = true,
                        .keep = true};
}

pl_plan_cfg pl_plan_cfg_plateau(int W, int64_t S) {
  pl_plan_cfg c;
  memset(&c, 0, sizeof c);
  c.system = PL_PLAN_PLATEAU;
  c.W = W, c.S = S;
  c.lc = (pl_layout_cfg){1, 1, 0, 0, 0};
  c.sc = pl_step_cfg_default();
  c.sc.head = &pl_head_fused;
  c.imb = 1;
  c.cp = 1, c.ep = W, c.ac = PL_PLAN_AC_FULL;
  return c;
}

int pl__plan_largest_ep(const pl_model_cfg *m, int W) {
  if (m->E <= 0)
    return 1;
  for (int e = W; e >= 1; e--)
    if (W % e == 0 && m->E % e == 0)
      return e;
  return 1;
}

pl_plan_cfg pl_plan_cfg_fsdp2(const pl_model_cfg *m, int W, int64_t S) {
  pl_plan_cfg c = pl_plan_cfg_plateau(W, S);
  c.system = PL_PLAN_FSDP2;
  c.ep = pl__plan_largest_ep(m, W);
  return c;
}

int64_t pl_plan_tokens_per_rank(const pl_plan_cfg *c) {
  if (c->system == PL_PLAN_FSDP2)
    return c->cp > 0 ? c->S / c->cp : 0;
  return c->lc.D > 0 ? c->S / c->lc.D : c->S;
}

int64_t pl_plan_tokens_per_step(const pl_plan_cfg *c) {
  return (int64_t)c->sc.micro * c->W * pl_plan_tokens_per_rank(c);
}

static void human(double v, char *buf, size_t n) {
  if (v >= 1e9 && fmod(v, 1e9) == 0)
    snprintf(buf, n, "%gG", v / 1e9);
  else if (v >= 1e6 && fmod(v, 1e6) == 0)
    snprintf(buf, n, "%gM", v / 1e6);
  else if (v >= GIB)
    snprintf(buf, n, "%.1fGiB", v / GIB);
  else if (v >= 1024 * 1024)
    snprintf(buf, n, "%.1fMiB", v / (1024 * 1024));
  else
    snprintf(buf, n, "%.0f", v);
}

/* Bytes in the binary unit that keeps them >= 1: the configuration line's
 * device and host budgets share one unit family (a count, β, stays
 * decimal: human). */
static void human_bytes(double v, char *buf, size_t n) {
  if (v == 0)
    snprintf(buf, n, "0");
  else if (v >= GIB)
    snprintf(buf, n, "%.1fGiB", v / GIB);
  else if (v >= 1024 * 1024)
    snprintf(buf, n, "%.1fMiB", v / (1024 * 1024));
  else if (v >= 1024)
    snprintf(buf, n, "%.1fKiB", v / 1024);
  else
    snprintf(buf, n, "%.0fB", v);
}

void pl_plan_cfg_str(const pl_plan_cfg *c, char *buf, size_t n) {
  if (c->system == PL_PLAN_FSDP2) {
    snprintf(buf, n, "cp=%d ep=%d dp=%d ac=%s offload=%s micro=%d", c->cp,
             c->ep, c->cp ? c->W / c->cp : 0, pl_plan_ac_name(c->ac),
             c->offload ? "on" : "off", c->sc.micro);
    return;
  }
  const pl_step_cfg *s = &c->sc;
  char beta[24], sco[24], cc[24];
  human((double)(s->oo.bucket ? s->oo.bucket : 100000000), beta, sizeof beta);
  if (s->sco.all)
    snprintf(sco, sizeof sco, "all");
  else
    human_bytes((double)s->sco.bytes, sco, sizeof sco);
  if (s->moe_c)
    snprintf(cc, sizeof cc, "%lld", (long long)s->moe_c);
  else
    snprintf(cc, sizeof cc, "N");
  const pl_head_ops *h = s->head ? s->head : &pl_head_ring;
  const pl_optim_ops *o = s->optim ? s->optim : &pl_optim_stream;
  char hr[80] = "", res[24], keep[24];
  if (s->oo.resident_all || s->oo.resident_bytes || s->keep.bytes ||
      s->keep.mode != PL_KEEP_BYTES) {
    if (s->oo.resident_all)
      snprintf(res, sizeof res, "all");
    else
      human_bytes((double)s->oo.resident_bytes, res, sizeof res);
    if (s->keep.mode != PL_KEEP_BYTES)
      snprintf(keep, sizeof keep, "%s",
               s->keep.mode == PL_KEEP_ATTN ? "attn" : "all");
    else
      human_bytes((double)s->keep.bytes, keep, sizeof keep);
    snprintf(hr, sizeof hr, " resident=%s keep=%s", res, keep);
  }
  snprintf(buf, n,
           "D=%d P=%d Ep=%d c=%s beta=%s s=%d sco=%s head=%s optim=%s "
           "dispatch=%s micro=%d%s%s",
           c->lc.D, c->lc.P, c->lc.Ep ? c->lc.Ep : c->W, cc, beta,
           s->oo.slots ? s->oo.slots : 2, sco, h->name, o->name,
           pl_moe_variant_name(s->dispatch), c->sc.micro, hr,
           c->lc.W_v > c->W ? " (proxy)" : "");
}
