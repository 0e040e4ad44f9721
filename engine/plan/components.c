/* components.c — the component benches' peaks from the same replays as the
 * step's (plan_internal.h): one MoE layer forward + backward, one Ring-DTP
 * forward + backward, the checkpoint runner's boundaries under SCO, the
 * optimizer's staging.  The benches (dispatch, vocab, sco, adam) can judge
 * their measured tag peaks against these; test_mpi_plan_ops.c runs the
 * operators and compares. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

static size_t tag_peak(const pl__sym_track *t, const char *tag) {
  for (int i = 0; i < t->n; i++)
    if (!strcmp(t->tag[i], tag))
      return t->tpeak[i];
  return 0;
}

pl_status pl_plan_moe_layer(const pl_moe_cfg *mc, int Ep, int64_t N,
                            bool keep_ctx, bool worst, pl_plan_moe_peaks *out) {
  memset(out, 0, sizeof *out);
  if (Ep < 1 || N < 0 || mc->k < 1 || mc->E < 1 || mc->E % Ep)
    return pl_set_error(PL_EINVAL,
                        "plan: moe layer Ep=%d N=%lld E=%d k=%d: need Ep >= 1 "
                        "dividing E, N >= 0, k >= 1",
                        Ep, (long long)N, mc->E, mc->k);
  pl__moe_replay p;
  PL_TRY(pl__moe_replay_make(mc, Ep, N, 1.0, worst, &p));
  pl__sym_track t;
  pl__sym_init(&t);
  pl__sym_buf ctx;
  pl__moe_replay_forward(&t, &p, &ctx);
  if (!keep_ctx) { /* the backward on a context made again */
    pl__sym_free(&t, &ctx);
    pl__moe_replay_forward(&t, &p, &ctx);
  }
  pl__moe_replay_backward(&t, &p);
  pl__sym_free(&t, &ctx);
  out->dispatch = tag_peak(&t, "dispatch");
  out->expert = tag_peak(&t, "expert");
  out->routing = tag_peak(&t, "routing");
  out->op_peak = t.peak;
  out->K = p.K;
  out->c_eff = p.c_eff;
  pl__moe_replay_free(&p);
  return PL_OK;
}

pl_status pl_plan_head(pl_dtype dt, int64_t n, int64_t h, int64_t v, int P,
                       int r, int64_t block, pl_plan_head_peaks *out) {
  memset(out, 0, sizeof *out);
  if ((dt != PL_F32 && dt != PL_BF16) || n < 0 || h < 1 || v < 1 || P < 1 ||
      r < 0 || r >= P || block < 0)
    return pl_set_error(PL_EINVAL,
                        "plan: head dt=%s n=%lld h=%lld v=%lld P=%d r=%d "
                        "block=%lld: need f32|bf16, n >= 0, h, v, P >= 1, "
                        "0 <= r < P, block >= 0",
                        pl_dtype_name(dt), (long long)n, (long long)h,
                        (long long)v, P, r, (long long)block);
  pl__head_replay hd;
  pl__head_replay_make(dt, n, h, v, P, block, &hd);
  pl__sym_track t;
  pl__sym_init(&t);
  pl__sym_buf aux = {0};
  pl__head_replay_run(&t, &hd, &aux);
  out->logits = tag_peak(&t, "logits");
  out->ring = tag_peak(&t, "ring");
  out->grads = tag_peak(&t, "grads");
  out->ce_state = tag_peak(&t, "ce_state") + 8; /* + the group statistics */
  out->op_peak = t.peak;
  out->moves_weights = hd.move_w;
  return PL_OK;
}

void pl_plan_sco_boundaries(int L, int64_t N, int64_t H, pl_dtype dt,
                            int selected, size_t *dev_peak, size_t *host) {
  if (selected > L)
    selected = L;
  if (selected < 0)
    selected = 0;
  const size_t nhb = (size_t)N * (size_t)H * pl_dtype_size(dt);
  pl__sym_track t;
  pl__sym_init(&t);
  pl__sym_buf *h = calloc((size_t)L + 1, sizeof *h);
  PL_ASSERT(h);
  h[0] = pl__sym_alloc(&t, "boundary", PL_TERM_RESIDENT, nhb);
  for (int l = 0; l < L; l++) {
    h[l + 1] = pl__sym_alloc(&t, l + 1 < L ? "boundary" : "output",
                             PL_TERM_RESIDENT, nhb);
    if (l < selected)
      pl__sym_free(&t, &h[l]);
  }
  pl__sym_free(&t, &h[L]);
  int restoring = -1;
  for (int l = L - 1; l >= 0; l--) {
    if (l < selected) {
      if (restoring != l)
        h[l] = pl__sym_alloc(&t, "boundary", PL_TERM_RESTORED, nhb);
      restoring = -1;
    }
    if (l > 0 && l - 1 < selected) {
      h[l - 1] = pl__sym_alloc(&t, "boundary", PL_TERM_RESTORED, nhb);
      restoring = l - 1;
    }
    pl__sym_free(&t, &h[l]);
  }
  *dev_peak = tag_peak(&t, "boundary");
  free(h);
  *host = (size_t)selected * nhb;
}

size_t pl_plan_optim_staging(size_t theta, size_t beta, int slots,
                             size_t host_grad_bytes) {
  if (!theta || !beta || slots < 1)
    return 0;
  const size_t nb = (theta + beta - 1) / beta;
  const size_t ns = (size_t)slots < nb ? (size_t)slots : nb;
  return ns * (beta < theta ? beta : theta) * (12 + host_grad_bytes);
}
