/* dense_ce.h — the paper's vocabulary baseline: logits N×V materialized, then
 * the PyTorch sequence log_softmax → nll → backward, on one device.
 *
 * It allocates what PyTorch's dense `cross_entropy(x @ w, t)` allocates (fp32:
 * logits, log-probabilities, the dense NLL gradient and the logits' gradient,
 * each N×V f32; bf16: the bf16 logits upcast to f32 first, as the peer script
 * does with `.float()`), in the same order and with the same lifetimes, so its
 * tracked peak is X + W + 3·N·V·4 bytes: 42.40 / 79.46 GiB at H = 7168,
 * V = 200,000, N = 16,384 / 32,768 in fp32, 0.06 GiB under the 42.46 / 79.52
 * GiB of the paper's Table 2 and PyTorch's peak (doc/performance/README.md),
 * which also hold the caching allocator's rounding and cuBLAS workspace. */
#ifndef PLATEAU_BASELINES_DENSE_CE_H
#define PLATEAU_BASELINES_DENSE_CE_H

#include "ops/ce.h"

/* Forward (+ backward when pb->dx, pb->dw are set) on stream s; pb->w is the
 * full h×v weight.  Every N×V tensor is tagged "logits". */
pl_status pl_dense_ce(pl_stream *s, const pl_ce_problem *pb);

/* Bytes of the N×V tensors alive at the peak (3 of N×V f32). */
static inline size_t pl_dense_ce_logits_peak(int64_t n, int64_t v) {
  return (size_t)3 * (size_t)n * (size_t)v * 4;
}

#endif
