/* units.h — the layout of a decoder layer's ZeRO-3 unit, shared by the
 * trainer (train/step.c) and the description of its memory
 * (train/describe.c).  Internal to engine/train.
 *
 * A layer's unit holds, each at a multiple of PL__UNIT_ALIGN elements: the
 * attention norm (H), W_qkv (H×(n_q+2n_kv)·d), W_o (n_q·d×H), the FFN norm
 * (H), the router (H×E_route, MoE layers), the SwiGLU W_up (H×2I) and W_down
 * (I×H) of the shared expert (MoE, if any) or the dense FFN, and in the last
 * layer the final norm (H). */
#ifndef PLATEAU_TRAIN_UNITS_H
#define PLATEAU_TRAIN_UNITS_H

#include <stddef.h>

#include "model/model.h"

enum {
  PL__U_ATTN_NORM,
  PL__U_QKV,
  PL__U_O,
  PL__U_FFN_NORM,
  PL__U_ROUTER,
  PL__U_UP,
  PL__U_DOWN,
  PL__U_FINAL,
  PL__U_N
};

#define PL__UNIT_ALIGN 64
#define PL__UNIT_ABSENT ((size_t)-1)

/* The SwiGLU width of layer l's FFN slot: the shared expert's (MoE; 0
 * without one) or the dense FFN's. */
static inline int64_t pl__layer_swiglu_width(const pl_model_cfg *m, int l) {
  return pl_model_layer_is_moe(m, l) ? (m->n_shared ? m->I_shared : 0)
                                     : m->I_dense;
}

/* Offsets of layer l's parameters in its unit (PL__UNIT_ABSENT where it
 * has none) and the unit's size in elements. */
static inline size_t pl__layer_unit(const pl_model_cfg *m, int E_route, int l,
                                    size_t off[PL__U_N]) {
  const int64_t H = m->H, I = pl__layer_swiglu_width(m, l);
  const size_t n[PL__U_N] = {
      (size_t)H,
      (size_t)(H * (int64_t)(m->n_q + 2 * m->n_kv) * m->d),
      (size_t)((int64_t)m->n_q * m->d * H),
      (size_t)H,
      pl_model_layer_is_moe(m, l) ? (size_t)(H * E_route) : 0,
      (size_t)(H * 2 * I),
      (size_t)(I * H),
      l == m->L - 1 ? (size_t)H : 0};
  size_t o = 0;
  for (int i = 0; i < PL__U_N; i++) {
    off[i] = n[i] ? o : PL__UNIT_ABSENT;
    o = (o + n[i] + PL__UNIT_ALIGN - 1) / PL__UNIT_ALIGN * PL__UNIT_ALIGN;
  }
  return o;
}

#endif
