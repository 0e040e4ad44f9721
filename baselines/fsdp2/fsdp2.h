/* fsdp2.h — the FSDP2-equivalent baseline: the model of the composed step
 * (model/model.h, the same parameters, initialization and token stream, so
 * the single-rank reference of engine/train applies) trained the way
 * torchtitan trains it, and the knob settings a torchtitan user would try
 * ("FSDP2-best" is the fastest of them that fits).  Above the engine
 * (libplateau_baselines.a); `plateau bench train --system fsdp2` drives it.
 *
 * What it does like torchtitan (PyTorch 2.x FSDP2, context_parallel,
 * expert parallelism):
 *   FSDP2      fully_shard per decoder layer, on the embedding, on [final
 *              norm, head] and (EP > 1) on each layer's experts; parameters
 *              sharded as fp32 over the data-parallel ranks (dense units:
 *              all W ranks, torchtitan's dp_shard_cp mesh; experts: the
 *              W / EP ranks holding the same expert shard, its
 *              dp_shard_mod_ep mesh), cast to bf16 and all-gathered before
 *              use with the next unit prefetched (backward: the previous),
 *              freed after use (the last layer and [norm, head] stay
 *              gathered from forward into backward: reshard_after_forward
 *              False, as torchtitan sets them), gathered again for backward
 *              (also the embedding, whose backward does not read it: FSDP2's
 *              pre-backward unshards every unit), the unsharded gradient
 *              reduce-scattered in fp32 (MixedPrecisionPolicy(param_dtype=
 *              bf16, reduce_dtype=fp32), torchtitan's default) into the fp32
 *              gradient shard, every micro-batch (accumulating);
 *   AC         per layer: full (every layer checkpointed: its input kept,
 *              its forward recomputed at the start of its backward),
 *              selective (torchtitan's layer-selective mode: layer l is
 *              checkpointed iff (l + 1) % ac_freq == 0, ac_freq 2 — every
 *              other layer; the others keep their activations), or none;
 *   EP         experts sharded over EP consecutive ranks, the standard
 *              all-to-all dispatch (ops/moe.h's ep variant: every route to
 *              its expert's native rank), dropless;
 *   CP         ring attention over CP consecutive ranks with the
 *              load-balanced split (ring_attn.h), each CP group one
 *              sequence, W / CP sequences per micro-batch;
 *   loss       dense cross-entropy on the full logits (baselines/dense_ce:
 *              bf16 logits upcast to f32, as torchtitan's loss);
 *   AdamW      on the GPU (fp32 shards, gradients and m, v on the device:
 *              FSDP2 with torch.optim.AdamW), or offloaded (CPUOffloadPolicy:
 *              shards, gradients and m, v in pinned host memory, the update
 *              by the SIMD CPU AdamW of backend/adamw_kernels.h); global
 * gradient- norm clipping (torchtitan's max_norm 1.0 by default). What differs,
 * and why:
 *   - the unsharded gradient is fp32 from the start (the engine's kernels
 *     accumulate weight gradients in fp32): 4 bytes per parameter of the
 *     unit in backward where autograd holds 2 (bf16), and 4 instead of
 *     2 + 4 at the reduce-scatter (train/zero3.h, fp32_master);
 *   - the routed experts keep nothing H wide from forward to backward in a
 *     layer without checkpointing: the backward dispatches again and
 *     recomputes the gate/up projections (ops/moe.h), where autograd keeps
 *     the dispatched rows and the experts' intermediates — less memory and
 *     more time than PyTorch in AC selective / none, the same in AC full;
 *   - the loss is dense cross-entropy without tensor parallelism (no
 *     loss_parallel: torchtitan uses it only with TP, which is not a knob
 *     here);
 *   - the router's auxiliary-loss-free bias and its update are the composed
 *     step's (so both systems train the same model).
 *
 * The one-GPU proxy (W_v > W, as train/layout.h): each process plays one
 * rank of a W_v-rank run: dense units sharded 1/W_v (gathers tiled), EP the
 * virtual degree (E / EP experts of its shard, stored 1/(W_v / EP) and
 * gathered by tiling), the router choosing among the present ranks'
 * experts (E / EP · min(W, EP)); CP is a real group when it divides W,
 * else virtual (train/layout.h's virtual groups: each rank member 0 of its
 * own CP group, W·CP dividing W_v; ring attention's K/V all-gathers and
 * gradient hops through the local stand-ins of plateau/comm.h, timed apart
 * in standin_ms / standin_side_ms).  Shapes, FLOPs and per-rank memory are
 * those of the W_v-rank run; its communication with absent ranks is not
 * measured.
 *
 * The rank view (rank_view, W = 1 < W_v; train/layout.h's rank view): the
 * proxy keeps the EP group to the ranks present, so its router chooses
 * among fewer experts than a real rank's and its dispatch receives from no
 * one; the rank view makes the EP group virtual too (a virtual group of ep
 * members, this rank member 0: the router over all E experts, E / EP of
 * them here, the dispatch over ep members, ops/moe_plan.c counting what the
 * absent members send as they route alike), so one process holds exactly
 * what rank 0 of the W_v-rank run holds under routing every rank shares
 * (the dry device's balanced profile): the planner's dry measurement of a
 * run it cannot start (test_mpi_fsdp2_rank.c checks it against real ranks).
 *
 * Memory by allocator tag (b = bytes of the model dtype; s_u = ⌈n_u / G_u⌉
 * the shard of unit u of n_u parameters over its virtual group G_u: W_v for
 * the embedding (V·H), each layer's dense unit (its norms, W_qkv, W_o, the
 * router H·E_r, the shared expert or dense FFN H·3I_s) and [final norm, head]
 * (H + H·V), W_v / EP for a layer's experts (E / EP · 3·H·I); units padded to
 * 64 elements per parameter).  N = S / CP tokens per rank.
 * Persistent (for the trainer's life):
 *   "weights"  Σ s_u·4 (fp32 shards) on the device, or in pinned host memory
 *              with the CPU optimizer; plus the router biases (E_r·4 per MoE
 *              layer, device)
 *   "grads"    Σ s_u·4, same arena as the shards
 *   "optim"    Σ s_u·8 (m, v), same arena; with the GPU optimizer also the
 *              norm's chunk partials, 8·(⌈max_u s_u / 32768⌉ + 1) on the device
 *   "tokens"   4 device buffers of N int32/f32 (tokens, targets, dloss, NLL)
 * Transient in a step (device):
 *   "fsdp_ag", "zero3", "zero3_grads"  a unit's gather buffer, gathered
 *              parameters and unsharded gradient (train/zero3.h,
 *              fp32_master).  Gathered
 *              at once: the layer in use (dense + experts) and the next one
 *              prefetched; at the head the last layer and [norm, head]; in
 *              backward the layer in use and the previous one; the embedding
 *              with layer 0
 *   "boundary" each layer's input x_l (N·H·b) from its forward to its
 *              backward, and the last layer's output until the head: at the
 *              end of the forward (L + 1)·N·H·b
 *   "saved"    the activations a layer without checkpointing keeps
 *              (fsdp2_layer.h), from its forward to its backward
 *   "activations", "router", "routing", "dispatch", "expert", "attention",
 *   "cp_kv", "cp_ring"  one layer's forward or backward (fsdp2_layer.h,
 *              ring_attn.h, ops/moe.h); the head's final norm output and its
 *              gradient ("activations", N·H·b each) and bf16 weight gradient
 *              (H·V·b, "zero3_grads")
 *   "grads_act" the gradient flowing down the layers (N·H·b, two at a time)
 *   "logits", "ce_state"  the dense cross-entropy (baselines/dense_ce.h:
 *              N·V·2 + 3·N·V·4 at its peak)
 * With the CPU optimizer the pinned host arena holds the shards, gradients
 * and moments: 16·Σ s_u bytes.
 *
 * Out of memory: every allocation is tracked; a failed one returns PL_ENOMEM
 * from create or step with a message, the step's transients are freed, and
 * the trainer can be destroyed (the bench records an `oom` row).  With
 * several ranks an OOM on one leaves the others in a collective until the
 * communicator's watchdog aborts the job. */
#ifndef PLATEAU_BASELINES_FSDP2_FSDP2_H
#define PLATEAU_BASELINES_FSDP2_FSDP2_H

#include <stdbool.h>

#include "model/attention.h"
#include "model/model.h"
#include "ops/adamw.h"
#include "plan/plan.h"
#include "plateau/plateau.h"
#include "train/data.h"
#include "train/step.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_fsdp2_ac {
  PL_FSDP2_AC_FULL = 0,      /* every layer checkpointed                  */
  PL_FSDP2_AC_SELECTIVE = 1, /* every ac_freq-th layer checkpointed        */
  PL_FSDP2_AC_NONE = 2,      /* no checkpointing                           */
} pl_fsdp2_ac;

typedef enum pl_fsdp2_optim {
  PL_FSDP2_OPTIM_GPU = 0, /* states on the device                     */
  PL_FSDP2_OPTIM_CPU = 1, /* CPUOffloadPolicy: states and update on the host */
} pl_fsdp2_optim;

/* "full" "selective" "none" (the planner's table, pl_plan_ac_names);
 * "gpu" "cpu" (pl_fsdp2_optim_names, by the enum, NULL-terminated). */
extern const char *const pl_fsdp2_optim_names[];
const char *pl_fsdp2_ac_name(pl_fsdp2_ac ac);
const char *pl_fsdp2_optim_name(pl_fsdp2_optim o);
pl_status pl_fsdp2_ac_parse(const char *s, pl_fsdp2_ac *out);
pl_status pl_fsdp2_optim_parse(const char *s, pl_fsdp2_optim *out);

typedef struct pl_fsdp2_cfg {
  int cp;        /* context-parallel degree: real groups of cp consecutive
                    ranks (divides W), or virtual ones (W·cp divides W_v) */
  int ep;        /* expert-parallel degree (of the virtual world; divides
                    W_v and E)                                           */
  int W_v;       /* virtual world (0: W, a real run)                     */
  int rank_view; /* 1: with W = 1 < W_v, play rank 0 of the W_v-rank run
                    whole — the EP group virtual too (the router over all
                    E experts, the dispatch over ep members): a real rank's
                    memory, as the planner measures it; 0: a proxy's
                    experts are those of the ranks present (the local
                    routing a GPU proxy times)                           */
  pl_fsdp2_ac ac;
  int ac_freq; /* selective: layer l checkpointed iff (l+1) % ac_freq == 0
                  (0: 2)                                                   */
  pl_fsdp2_optim optim;
  int micro;   /* micro-batches per step: sequences per CP group      */
  pl_dtype dt; /* bf16 (the GPU runs) | f32 (the exactness tests)     */
  pl_adamw_hparams hp;
  int cpu_threads; /* CPU optimizer threads (<= 0: OpenMP's default)      */
  int moe_lanes;   /* extra expert-GEMM streams of the MoE layer          */
  pl_attn_kernels attn;
  bool profile;  /* the time breakdown (pl_step_result.part_ms)         */
  uint64_t seed; /* weights: the composed step's seed gives its weights */
} pl_fsdp2_cfg;

/* cp 1, ep 1, AC full, GPU optimizer, one micro-batch, bf16, the composed
 * step's AdamW (lr 1e-3, wd 0.01, clip 1.0), lanes 2, seed 1. */
pl_fsdp2_cfg pl_fsdp2_cfg_default(void);

/* The configuration's short name, e.g. "cp2/ep4/ac=full/opt=gpu/mb1". */
void pl_fsdp2_cfg_name(const pl_fsdp2_cfg *c, char *buf, size_t len);

/* PL_EINVAL naming the value unless: cp >= 1 divides W (or W·cp divides W_v:
 * a virtual group); the router sees at least k present experts
 * (E/ep·min(W, ep) >= k; E with rank_view); ep >= 1 divides W_v
 * (and E, with MoE layers) and W and ep divide one another; W_v is a
 * multiple of W; rank_view with W_v > W only on W = 1; S >= 1, and S divisible
 * by 2·cp when cp > 1 (the load-balanced split: uneven splits are refused);
 * micro >= 1; the AC mode, optimizer, dtype, hyper-parameters and model are
 * valid.  No device, no MPI: the bench and the tuner check a point before
 * launching it. */
pl_status pl_fsdp2_check(const pl_model_cfg *m, const pl_fsdp2_cfg *c, int W,
                         int64_t S);

typedef struct pl_fsdp2 pl_fsdp2;

/* Collective over world.  S: the sequence length (N = S / cp per rank). */
pl_status pl_fsdp2_create(pl_dev *dev, pl_comm *world, const pl_model_cfg *m,
                          const pl_fsdp2_cfg *c, int64_t S, pl_fsdp2 **out);
void pl_fsdp2_destroy(pl_fsdp2 *t);

/* Tokens this rank reads per step: micro·(S + 1), the windows of its CP
 * group (every rank of a group passes the same windows; each takes its two
 * chunks).  Micro-batch mi of step t of CP group g is window
 * (t·micro + mi)·(W / cp) + g of the stream (train/data.h): the sequences
 * the composed step with D = cp reads. */
int64_t pl_fsdp2_tokens_per_rank(const pl_fsdp2 *t);
pl_status pl_fsdp2_batch(const pl_fsdp2 *t, pl_data *d, int64_t step,
                         int32_t *out);

/* One training step (collective): forward and backward of every
 * micro-batch, the optimizer, the router-bias update.  res (may be NULL):
 * the composed step's result (loss, tokens, time, part_ms with profile —
 * attention, moe, head, optimizer on the compute stream, zero3 the FSDP
 * comm stream, sco 0, other —, the tracked device and pinned host memory
 * with the live set at the peak; dispatch_bound 0: the standard dispatch
 * has none). */
pl_status pl_fsdp2_step(pl_fsdp2 *t, const int32_t *tokens,
                        pl_step_result *res);
pl_status pl_fsdp2_forward_backward(pl_fsdp2 *t, const int32_t *tokens,
                                    pl_step_result *res);
pl_status pl_fsdp2_update(pl_fsdp2 *t, pl_step_result *res);
/* steps steps from step index first (pl_fsdp2_batch), as pl_trainer_run. */
pl_status pl_fsdp2_run(pl_fsdp2 *t, pl_data *d, int64_t first, int steps,
                       double *losses, pl_step_result *res);

/* The parameters, in the composed step's order and names
 * (pl_trainer_param_info: "embed", "layer0.qkv", ..., "head"). */
int pl_fsdp2_nparams(const pl_fsdp2 *t);
pl_status pl_fsdp2_param_info(const pl_fsdp2 *t, int i, pl_param_info *out);
/* The full tensor of parameter i (fp32 weights or gradient after the last
 * forward_backward) on the host of every rank; collective over world.  A
 * real run only (PL_EUNSUPPORTED in a proxy). */
pl_status pl_fsdp2_gather(pl_fsdp2 *t, int i, bool grad, float *out);
/* Set the full tensor of parameter i from every rank's identical copy. */
pl_status pl_fsdp2_set(pl_fsdp2 *t, int i, const float *in);
const float *pl_fsdp2_router_bias(const pl_fsdp2 *t, int l);
pl_status pl_fsdp2_set_router_bias(pl_fsdp2 *t, int l, const float *bias);

/* ---- tuning ---------------------------------------------------------------
 * The knob settings a torchtitan user would try at W GPUs (W_v in a proxy)
 * and context S: every cp dividing W (in a proxy also every virtual cp,
 * W·cp dividing W_v) with S divisible by 2·cp (1 always),
 * every ep dividing W_v and E (ep dividing or divided by W; 1 for a dense
 * model) that torchtitan accepts with that cp (ep 1, or a multiple of cp:
 * its EP group is borrowed from dp_shard × cp, the CP ranks innermost — as
 * here, where both groups are consecutive ranks and the experts' FSDP group
 * is the ranks of the same EP index, its dp_shard_mod_ep), AC full and
 * selective (none when asked), the GPU and the CPU
 * optimizer, and each micro-batch count of micros (NULL: {1}).  Points that
 * pl_fsdp2_check refuses are not listed.  Writes at most cap points into
 * out (each the defaults of base with the knobs set) and returns how many
 * there are. */
int pl_fsdp2_tune_points(const pl_model_cfg *m, int W, int64_t S,
                         const pl_fsdp2_cfg *base, const int *micros,
                         int nmicro, bool with_ac_none, pl_fsdp2_cfg *out,
                         int cap);

/* ---- the planner -----------------------------------------------------------
 * The point (c at W real ranks and context S) as the planner's configuration
 * (plan/plan.h: system fsdp2, its cp, ep, AC mode and frequency, offload =
 * the CPU optimizer, one sequence per CP group per micro-batch, the
 * micro-batches, dtype, attention kernels and W_v): pl_plan_check gives its
 * device peak and pinned host bytes (this baseline's dry measurement,
 * pl_fsdp2_dry_memory, once pl_fsdp2_register_dry has registered it;
 * test_mpi_fsdp2_plan.c holds them within 5% of the real steps) and
 * pl_plan_time_predict its step (engine/plan/fsdp2_time.c). */
pl_plan_cfg pl_fsdp2_plan_cfg(const pl_model_cfg *m, const pl_fsdp2_cfg *c,
                              int W, int64_t S);

/* The planner's memory of FSDP2 configuration c, measured (fsdp2_dry.c): the
 * baseline built for c on a dry device (pl_plan_dry_device: mc's backend as its
 * flavour, mc's device memory, the balanced routes) — for W > 1 the rank view
 * of c's run's rank 0 (W = 1, W_v = the run's, rank_view) — and stepped once
 * (the baseline allocates its state when built: a second step measures the
 * same, field by field); *out filled as pl_plan_memory fills plateau's, from
 * that step (peak_phase: "a step on a dry device"; the terms' own peaks of
 * several tags and the unpinned host bytes as fsdp2_dry.c says; dev_worst: with
 * an EP group of several members, the device peak of the same built and stepped
 * again under the dry device's adversarial routes, else the peak); imb > 1
 * skews the routes toward the rank measured (pl_plan_dry_device_skewed over
 * the EP group).  The baseline's refusals prefixed "the dry device: ".  No MPI
 * (the baseline's world is a virtual group of one, plateau/comm.h): any thread
 * may measure, each its own configuration. */
pl_status pl_fsdp2_dry_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, pl_plan_mem *out);
/* The same measured at the last of steps (>= 1) steps, state after the
 * first (PL_EINVAL naming steps below 1). */
pl_status pl_fsdp2_dry_memory_steps(const pl_model_cfg *m, const pl_plan_cfg *c,
                                    const pl_plan_machine *mc, int steps,
                                    pl_plan_mem *out);
/* Registers pl_fsdp2_dry_memory as the planner's dry measurement of the
 * fsdp2 system (pl_plan_set_dry_measure); `plateau` calls it at its start. */
void pl_fsdp2_register_dry(void);

/* ---- the shared points with the PyTorch peer ------------------------------
 * analysis/peers/fsdp2_points.tsv lists the configurations this baseline and
 * analysis/peers/torch_fsdp2.py both run (one GPU; shapes, context, knobs).
 * pl_fsdp2_points_read parses such a file ('#' comments, a header naming the
 * columns, one point per line; columns found by name; each point's name
 * once) into *out (malloc'd, free with free()) and *n.  PL_EIO when it
 * cannot be read, PL_EINVAL when it is not a regular file (a FIFO is never
 * opened for a blocking read) or naming the line and column otherwise. */
typedef struct pl_fsdp2_point {
  char name[48];
  pl_model_cfg m;
  pl_fsdp2_cfg c; /* pl_fsdp2_cfg_default() with the point's knobs */
  int64_t seq;
  int warmup, steps;
} pl_fsdp2_point;

pl_status pl_fsdp2_points_read(const char *path, pl_fsdp2_point **out, int *n);

#ifdef __cplusplus
}
#endif
#endif
