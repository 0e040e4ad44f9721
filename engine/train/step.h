/* step.h — the training step of the end-to-end model (model/model.h) in the
 * MoP rank layout (train/layout.h): a trainer holds the rank's shards and
 * runs many steps, returning the loss of each.
 *
 * One step, for each of its micro-batches (a sequence per D-group):
 *   embedding   gather the embedding unit (ZeRO-3), x_0 = E[tok]
 *   layers      the checkpoint runner (train/ckpt.h) over the L decoder
 *               layers, each gathering its unit (the next one prefetched on
 *               the comm stream), computing, freeing it; SCO moves the
 *               selected boundaries to pinned host memory within the budget;
 *   head        final RMSNorm (its weight lives in the last layer's unit)
 *               and the vocabulary head (train/head.h: ring | fused | a
 *               baseline) with dloss = 1/T, T = the step's targets over all
 *               ranks and micro-batches, so the gradients are those of the
 *               mean NLL of the whole batch;
 *   backward    the runner's backward: each layer's unit gathered again, its
 *               activations recomputed from the boundary, its full f32 gradient
 *               reduce-scattered into the shard (accumulated over
 *               micro-batches); experts' gradients stay local (LLEP helpers'
 *               return through pl_moe_backward); the embedding's gradient
 *               last.
 * then the optimizer (train/optim.h: stream | hybrid | a baseline) with
 * global gradient-norm clipping over all ranks on the host fp32 state of the
 * rank's shard, the bf16 working weights rewritten; the router biases
 * updated from the step's global expert loads (DeepSeek-V3's aux-loss-free
 * rule; never part of the gradient).
 *
 * Units: the embedding; one per decoder layer (its two norms, W_qkv, W_o,
 * the router, the shared expert or dense FFN; the last also holds the final
 * norm); the head (over the P-group's replica ranks when the head is
 * vocabulary-parallel, else over all ranks).  Parameters inside a unit start
 * at multiples of 64 elements.
 *
 * Every operator is switchable alone: dispatch (ep | llep | pipelined_llep),
 * the head, the optimizer, the SCO budget (0 | bytes | all), the MoE routing
 * context kept or recomputed.
 *
 * f32 mode (the exactness tests): weights, activations and the head in f32;
 * the optimizers write bf16 working weights (a shadow, tag "optim_shadow"),
 * and after each update the f32 weights are copied from the fp32 master.
 *
 * Time breakdown (profile on; events, milliseconds of the step): attention
 * (the layers' time outside their FFN slot: norms, QKV/O, RoPE, attention,
 * Ulysses, forward and the backward's recompute), moe (the FFN slot: router,
 * dispatch, experts, shared expert or dense FFN), head (final norm and the
 * vocabulary head), optimizer — all on the compute stream; zero3 (the comm
 * stream's gathers and reduce-scatters), expert_units (with expert groups
 * smaller than the world, train/epgroups.h: the expert units' gathers and
 * reduce-scatters on their own comm stream) and sco (the copy streams'
 * offloads and restores), which run beside the compute; other = the step's
 * wall time minus the compute-stream parts (embedding, loss bookkeeping,
 * host waits, and whatever comm or copy time was not hidden); recompute,
 * of attention's time, the backward's recompute of the layers' attention
 * half (norm, QKV, RoPE, attention forward, O projection; what kept
 * activations remove).
 *
 * Virtual groups (train/layout.h): their stand-ins' time is apart —
 * standin_ms those on the compute stream (Ulysses; Ring-DTP without
 * overlap), taken out of the part they ran in (attention, head) and out of
 * other, so the parts are compute; standin_side_ms those on side streams
 * (Ring-DTP's hops), which ran beside the compute as the real transfers
 * would.  time_ms is the wall time, stand-ins included.
 *
 * Headroom knobs (exact, each switchable alone): optimizer-state residency
 * (oo.resident_*: train/optim.h) keeps the last buckets' fp32 master, m and
 * v in device memory, updated there by the stream's own fused kernel; kept
 * activations (keep) spare the backward the attention forward or the whole
 * attention half's recompute.  Both give bit-identical losses, gradients
 * and weights. */
#ifndef PLATEAU_TRAIN_STEP_H
#define PLATEAU_TRAIN_STEP_H

#include <stdbool.h>

#include "model/attention.h"
#include "model/model.h"
#include "ops/moe.h"
#include "ops/sco.h"
#include "plateau/plateau.h"
#include "train/data.h"
#include "train/head.h"
#include "train/layout.h"
#include "train/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kept activations (model/layer.h pl_layer_keep) over the decoder layers:
 * ATTN every layer's attention output and log-sum-exp, ALL every layer's
 * attention half, BYTES a device budget filled in the order of time saved
 * per byte — the attention of layer 0, 1, ... first (the recompute of
 * attention costs the most per byte), then whole layers 0, 1, ...
 * (pl_step_keep_layers).  {BYTES, 0}: nothing kept (the default). */
typedef enum pl_keep_mode {
  PL_KEEP_BYTES = 0,
  PL_KEEP_ATTN = 1,
  PL_KEEP_ALL = 2
} pl_keep_mode;
typedef struct pl_keep_budget {
  pl_keep_mode mode;
  uint64_t bytes; /* BYTES: the device budget */
} pl_keep_budget;

typedef struct pl_step_cfg {
  pl_dtype dt; /* f32 | bf16                                */
  /* MoE layer (pl_moe_cfg) */
  pl_moe_variant dispatch; /* ep | llep | pipelined_llep                */
  int64_t moe_c;           /* per-source token cap (pipelined; 0: N)    */
  int moe_K_max;           /* Eq. 1 chunk ceiling                       */
  int moe_lanes;           /* extra expert-GEMM streams                 */
  pl_llep_knobs knobs;
  bool moe_recompute; /* recompute the routing context in backward
                         instead of keeping it (model/moe_ffn.h)   */
  /* head */
  const pl_head_ops *head; /* NULL: pl_head_ring                        */
  int64_t head_block;      /* vocabulary block (0: default)             */
  /* optimizer */
  const pl_optim_ops *optim; /* NULL: pl_optim_stream                     */
  pl_adamw_hparams hp;
  pl_optim_opts oo;
  /* SCO */
  pl_sco_budget sco;
  pl_sco_release sco_release;
  /* kept activations; keep_verify: every kept activation compared with its
   * recompute, bit for bit (tests) */
  pl_keep_budget keep;
  bool keep_verify;
  int micro;     /* micro-batches per step (>= 1)             */
  bool profile;  /* the time breakdown                        */
  uint64_t seed; /* weights                                   */
  pl_attn_kernels attn;
} pl_step_cfg;

/* bf16, pipelined_llep with c = 8192 (K = ⌈N/c⌉ chunks, at most 64), lanes 2,
 * the paper's LLEP knobs, ring head, stream optimizer (β 100M, s 2,
 * lr 1e-3, wd 0.01, clip 1.0, no state resident), SCO budget 0, nothing
 * kept, one micro-batch, seed 1. */
pl_step_cfg pl_step_cfg_default(void);

/* The layers' keep levels of kb at N tokens per rank (D: the Ulysses
 * group): layers [0, *n_all) keep ALL, [*n_all, *n_attn) keep ATTN, the
 * rest nothing (*n_all <= *n_attn <= L). */
void pl_step_keep_layers(const pl_model_cfg *m, int64_t N, int D, pl_dtype dt,
                         pl_keep_budget kb, int *n_attn, int *n_all);
/* A layer's kept bytes at N tokens per rank: its attention output and LSE
 * (*attn), and its whole attention half (*all, *attn included). */
void pl_step_kept_layer(const pl_model_cfg *m, int64_t N, int D, pl_dtype dt,
                        size_t *attn, size_t *all);
/* Device bytes the layers keep at that plan (the budget actually used). */
size_t pl_step_keep_bytes(const pl_model_cfg *m, int64_t N, int D, pl_dtype dt,
                          int n_attn, int n_all);

typedef enum pl_part {
  PL_PART_ATTENTION,
  PL_PART_MOE,
  PL_PART_HEAD,
  PL_PART_OPTIM,
  PL_PART_ZERO3,
  PL_PART_SCO,
  PL_PART_OTHER,
  PL_PART_RECOMPUTE,    /* of attention: the backward's recompute of the
                           attention half (what kept activations remove)   */
  PL_PART_EXPERT_UNITS, /* expert groups (Ep < W_v): the expert units'
                           gathers and reduce-scatters (their comm
                           stream, beside the compute; 0 otherwise)     */
  PL_PART_COUNT
} pl_part;
/* "attention" "moe" "head" "optimizer" "zero3" "sco" "other" "recompute"
 * "expert_units" */
const char *pl_part_name(int part);

typedef struct pl_step_result {
  int64_t step;   /* 1-based                                          */
  double loss;    /* mean NLL over the step's T targets, all ranks    */
  int64_t tokens; /* T                                                */
  double time_ms; /* wall time of the step on this rank               */
  double part_ms[PL_PART_COUNT]; /* profile on                               */
  float gscale; /* the clip factor the optimizer applied            */
  /* memory of the step (this rank; reset at the step's start) */
  pl_mem_stats dev;  /* tracked device arena: peak, live set at the peak,
                        each tag's peak                                  */
  pl_mem_stats host; /* tracked pinned host arena                        */
  /* what the bounds of the step are */
  size_t dispatch_bound; /* max over MoE layers of 2·Ep·k·c_eff·H·b (forward
                            stats); 0 without MoE layers                     */
  int moe_K;             /* chunks of the last MoE layer's forward          */
  int64_t moe_c_eff;     /* its chunk capacity c_eff (Eq. 1)                */
  int moe_spilled;       /* LLEP pieces spilled to helpers, over the MoE
                            layers' forwards of the last micro-batch          */
  double moe_imbalance;  /* max over those of max/mean native rank load     */
  int sco_layers;        /* |S|                                              */
  /* virtual groups' stand-ins (profile on; 0 without virtual groups) */
  double standin_ms;      /* on the compute stream: within time_ms          */
  double standin_side_ms; /* on side streams, beside the compute            */
} pl_step_result;

typedef struct pl_trainer pl_trainer;

/* Collective over world: the layout's groups, the units, expert shards,
 * router biases, the MoE layers, the head, SCO (its budget checked on every
 * rank), the host fp32 state (initialized from the weights) and the
 * optimizer.  S: the sequence length (N = S / D tokens per rank). */
pl_status pl_trainer_create(pl_dev *dev, pl_comm *world, const pl_model_cfg *m,
                            const pl_layout_cfg *lc, int64_t S,
                            const pl_step_cfg *sc, pl_trainer **out);
void pl_trainer_destroy(pl_trainer *t);
const pl_layout_plan *pl_trainer_plan(const pl_trainer *t);
/* The rank's layout: its groups' communicators (their byte counts, a
 * virtual group's stand-ins: plateau/comm.h). */
const pl_layout *pl_trainer_layout(const pl_trainer *t);

/* Token ids this rank reads per step: micro · (N + 1) (each micro-batch's N
 * inputs and, shifted by one, its N targets). */
int64_t pl_trainer_tokens_per_rank(const pl_trainer *t);

/* One training step (collective).  tokens: host int32, micro·(N+1) values in
 * [0, V); PL_CE_IGNORE_INDEX (a target not counted) only at the last
 * position of a micro-batch, the one token that is a target and no input.
 * Another id is PL_EINVAL naming its micro-batch and position (on every
 * rank: "another rank passed an invalid token").  res may be NULL. */
pl_status pl_trainer_step(pl_trainer *t, const int32_t *tokens,
                          pl_step_result *res);
/* Its two halves: loss and gradients (no update, no bias change), then the
 * optimizer and the bias update.  step = forward_backward + update. */
pl_status pl_trainer_forward_backward(pl_trainer *t, const int32_t *tokens,
                                      pl_step_result *res);
pl_status pl_trainer_update(pl_trainer *t, pl_step_result *res);

/* steps steps from step index first (its data: pl_data_batch of the
 * trainer's plan), the loss of each into losses[steps] (may be NULL) and
 * the results into res[steps] (may be NULL). */
pl_status pl_trainer_run(pl_trainer *t, pl_data *data, int64_t first, int steps,
                         double *losses, pl_step_result *res);

/* What any trainer's step and run share (the FSDP2 baseline's too):
 * pl_step_result_other sets a profiled step's part_ms[PL_PART_OTHER], its
 * wall time minus the compute-stream parts (attention through optimizer)
 * and the stand-ins; pl_step_run is the loop of pl_trainer_run over a
 * trainer's batch (its tokens_per_rank tokens of step index `step`) and
 * step. */
void pl_step_result_other(pl_step_result *r);
typedef pl_status (*pl_step_batch_fn)(const void *trainer, pl_data *data,
                                      int64_t step, int32_t *tok);
typedef pl_status (*pl_step_fn)(void *trainer, const int32_t *tok,
                                pl_step_result *r);
pl_status pl_step_run(void *trainer, int64_t tokens_per_rank,
                      pl_step_batch_fn batch, pl_step_fn step, pl_data *data,
                      int64_t first, int steps, double *losses,
                      pl_step_result *res);

/* ---- parameters (tests, checkpoints) --------------------------------------
 */

typedef struct pl_param_info {
  char name[40];      /* "embed", "layer3.qkv", "layer3.experts.wg", ...  */
  int64_t rows, cols; /* the full tensor, row-major                        */
} pl_param_info;

int pl_trainer_nparams(const pl_trainer *t);
pl_status pl_trainer_param_info(const pl_trainer *t, int i, pl_param_info *out);
/* The full tensor of parameter i as f32 on the host of every rank: its
 * weights, or its gradient after the last forward_backward.  Collective over
 * world.  A real run only (W_v = W): PL_EUNSUPPORTED in a proxy. */
pl_status pl_trainer_gather(pl_trainer *t, int i, bool grad, float *out);
/* Set the full tensor of parameter i (weights and the fp32 master) from
 * every rank's identical host copy.  Not collective. */
pl_status pl_trainer_set(pl_trainer *t, int i, const float *in);
/* The router bias of decoder layer l (E_route values, host copy), or NULL
 * for a dense layer. */
const float *pl_trainer_router_bias(const pl_trainer *t, int l);
/* Set it (every rank the same values; a checkpoint, or a skewed routing in
 * tests).  PL_EINVAL for a dense layer. */
pl_status pl_trainer_set_router_bias(pl_trainer *t, int l, const float *bias);

#ifdef __cplusplus
}
#endif
#endif
