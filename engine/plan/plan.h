/* plan.h — the planner: before launch, the per-rank memory and the step time
 * of a training configuration, for plateau's composed step (train/step.h)
 * and for the FSDP2-equivalent baseline (torchtitan's FSDP2 + activation
 * checkpointing + EP + CP + optional CPU offload), and the choice of the
 * configuration that maximizes predicted throughput among those that fit.
 * Pure functions: no device (a dry one stands in), no MPI.
 *
 * Memory (pl_plan_memory): measured, not modelled.  The configuration's
 * trainer is built on a dry device (backend/dry: every allocation tracked
 * with its tag, none backed, no kernel run) and stepped once; the peak, the
 * live set at the peak by tag, the phase of the peak and the states are the
 * tracker's (mem_dry.c).  A run of several ranks is built as the rank view
 * of its rank 0 (the widest vocabulary shard), every other group virtual.
 * The one assumption is the routing, set on the dry device: LLEP's balanced
 * profile (a rank receives as many routes as it sends), skewed by cfg
 * `imb` toward the rank measured (the router's imbalance; what the dispatch
 * makes of it is measured); dev_worst is a second step under adversarial
 * routes (every source sends all its routes to this rank), the bound the
 * chunked dispatch guarantees.  Each live byte is attributed to a term of
 * Eq. 6 (pl_plan_term) for the budget table.  Another system's trainer
 * (the FSDP2 baseline, baselines/fsdp2) is measured the same way by the
 * layer that owns it, through the hook it registers
 * (pl_plan_set_dry_measure).
 *
 * Time (pl_plan_time): FLOPs of every component (recomputation included) at
 * calibrated rates, communication at the calibrated bandwidths with stated
 * overlap (which comm hides behind which compute), the optimizer at the host
 * link / host memory / SIMD CPU rates; step time, tok/s/GPU, model TFLOP/s
 * per GPU (pl_model_flops_per_token's measure).  The machine
 * (pl_plan_machine) has documented defaults for an 8×H200 node and is read
 * from `plateau bench calib` result files and measured kernel-rate files.
 *
 * Feasibility (pl_plan_check): the one call the suite and jobs/submit make
 * before launching a point: fits, or infeasible with the binding term. */
#ifndef PLATEAU_PLAN_PLAN_H
#define PLATEAU_PLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/model.h"
#include "plateau/plateau.h"
#include "train/step.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the machine -------------------------------------------------------- */

/* Rates and capacities of one node kind.  Bandwidths in GB/s (1e9 B/s),
 * rates in TFLOP/s, memory in bytes.  pl_plan_machine_default() is one
 * 8×H200 node on 400 Gb/s InfiniBand per GPU (the values are listed in
 * doc/guide/planner.md, "The machine", and printed by `plateau plan
 * --machine`). */
typedef struct pl_plan_machine {
  pl_backend backend; /* the target device: cuda (projections) or cpu */
  int gpus_per_node;
  double hbm_bytes;    /* device memory per GPU a run may allocate      */
  double hbm_reserve;  /* of which held back (context, NCCL, the pool's
                          fragmentation)                               */
  double hbm_alloc;    /* the allocatable ceiling `plateau bench calib`
                          measured under a step's pattern (variant
                          alloc); 0: not measured.  The usable HBM is
                          the smaller of it and hbm_bytes − hbm_reserve */
  double fill_reserve; /* the headroom fill (pl_plan_free.resident, keep)
                          stops this far below the usable HBM: a peak
                          filled on purpose keeps a margin for the pool's
                          fragmentation, which the tracked peak omits   */
  double host_bytes;   /* host RAM per node                             */
  double host_reserve; /* of which held back (OS, processes, page cache)*/
  /* calibration (plateau bench calib) */
  double gemm_tflops; /* dense bf16 GEMM                               */
  double hbm_gbs;     /* device copy, read + write counted             */
  double h2d_gbs, d2h_gbs, bidir_gbs; /* pinned host link per GPU        */
  double nvl_gbs;       /* NVLink point-to-point per direction           */
  double nccl_gbs;      /* intra-node ring collectives, bus bandwidth    */
  double a2a_gbs;       /* intra-node all-to-all, bus bandwidth          */
  double ib_gbs;        /* inter-node per GPU per direction              */
  double ib_lat_us;     /* per message across nodes                      */
  double nvl_lat_us;    /* per message inside a node                     */
  double host_dram_gbs; /* host memory bandwidth per node                */
  /* kernel rates (measured result files override them) */
  double attn_fwd_tflops; /* the engine's attention forward, long context */
  double attn_bwd_tflops; /* the engine's attention backward              */
  double attn_half_seq;   /* context at which attention runs at half its
                             long-context rate (rate·S/(S+half))         */
  double attn_full_fwd_tflops; /* the full mask's forward, every score
                                  counted (ring attention's off-diagonal
                                  blocks), flat in the block length;
                                  either 0: the causal rates            */
  double attn_full_bwd_tflops; /* the full mask's backward; 0: causal's   */
  double expert_eff;          /* expert GEMMs / gemm_tflops                   */
  double dense_eff;           /* dense layer GEMMs / gemm_tflops              */
  double head_eff;            /* vocabulary head GEMMs / gemm_tflops          */
  double mem_passes;          /* elementwise passes over N·H·b per layer and
                                 step (norms, SwiGLU, RoPE, residuals, casts) */
  double optim_gparam_s;      /* streamed optimizer per GPU; 0: from the link */
  double cpu_adam_gparam_s;   /* SIMD CPU AdamW per node (all cores)          */
  double cpu_update_gparam_s; /* the SIMD update alone per node, no staging
                                 (bench adam's update rows): the FSDP2
                                 baseline's offloaded optimizer; 0: the
                                 rate of cpu_adam_gparam_s               */
  double step_overhead_ms;    /* per step: host waits, launches, small ops    */
  double layer_overhead_ms;   /* per layer and pass                           */
  double coll_us; /* per collective call: launch, host agreement, the wait
                     for the slowest rank                                  */
  /* the FSDP2 baseline's kernels (PyTorch) */
  double fsdp2_attn_tflops; /* SDPA fwd+bwd (cuDNN): PyTorch's FSDP2 only
                               (pl_plan_cfg.sdpa); our baseline's ring
                               attention runs at attn_(full_)fwd/bwd     */
  double fsdp2_expert_eff;  /* grouped expert GEMMs / gemm_tflops         */
  double fsdp2_cpu_adam_gparam_s; /* torch fused CPU AdamW per node         */
  bool attn_full_read; /* the full mask's rates came from a result file */
  char source[160];    /* "defaults" or the files read                 */
} pl_plan_machine;

/* One 8×H200 node, NVLink, 400 Gb/s InfiniBand per GPU, CUDA target. */
pl_plan_machine pl_plan_machine_default(void);
/* The device bytes a point may peak at: hbm_bytes − hbm_reserve, or the
 * measured allocatable ceiling hbm_alloc where it is smaller. */
double pl_plan_hbm_usable(const pl_plan_machine *mc);

/* Read a `plateau bench calib` result file (TSV: # metadata, a header,
 * rows; the test name in column `variant` or `test`): gemm (tflops), h2d,
 * d2h, bidir (algbw_gbs), d2d (algbw_gbs: HBM), allreduce / alltoall /
 * sendrecv (busbw_gbs), each the row of the largest size that is ok.  Only
 * what the file has is changed.  Also reads kernel-rate files of benches
 * attention (tflops of fwdbwd rows at the longest seq → attention rates),
 * adam (gparam_s of the stream / cpu variants) and moegemm (ratio →
 * expert_eff), recognized by their `# bench:` line.  PL_EINVAL naming the
 * file and line when it cannot be read. */
pl_status pl_plan_machine_load(pl_plan_machine *m, const char *path);
/* key=value (the field names above, e.g. "ib_gbs=25", "host_reserve=8Gi":
 * a number may end in K M G T or Ki Mi Gi Ti); PL_EINVAL naming the key and
 * the allowed keys. */
pl_status pl_plan_machine_set(pl_plan_machine *m, const char *kv);
void pl_plan_machine_print(const pl_plan_machine *m, FILE *f);

/* ---- a configuration ---------------------------------------------------- */

typedef enum pl_plan_system {
  PL_PLAN_PLATEAU = 0,
  PL_PLAN_FSDP2 = 1
} pl_plan_system;
/* The systems' names, the one table the planner, `plateau plan`'s
 * --system, the train bench's systems, its rows and the report read:
 * pl_plan_system_names by the enum, NULL-terminated. */
#define PL_PLAN_NAME_PLATEAU "plateau"
#define PL_PLAN_NAME_FSDP2 "fsdp2"
extern const char *const pl_plan_system_names[];
const char *pl_plan_system_name(pl_plan_system s); /* "plateau" "fsdp2" */

typedef enum pl_plan_ac {
  PL_PLAN_AC_FULL = 0,      /* every decoder layer recomputed             */
  PL_PLAN_AC_SELECTIVE = 1, /* every ac_freq-th layer checkpointed       */
  PL_PLAN_AC_NONE = 2
} pl_plan_ac;
/* "full" "selective" "none" by the enum, NULL-terminated: the one table of
 * AC names (the planner's, the FSDP2 baseline's pl_fsdp2_ac of the same
 * values, `plateau plan --ac` and `plateau bench train --ac`). */
extern const char *const pl_plan_ac_names[];
const char *pl_plan_ac_name(pl_plan_ac a);

typedef struct pl_plan_cfg {
  pl_plan_system system;
  int W;       /* ranks of the run (one GPU each)                       */
  int present; /* ranks present (0: all W): fewer where a one-GPU proxy
                  is planned as the W-rank run it plays; the search takes
                  only expert groups they play (train/epgroups.h: Ep
                  dividing them; FSDP2's ep dividing them or a multiple) */
  int64_t S;   /* sequence length                                       */
  /* plateau: the layout and the step (the trainer's own structs) */
  pl_layout_cfg lc; /* D, P, W_v (W_v > W: the one-GPU proxy)              */
  pl_step_cfg sc;   /* dtype, dispatch, c, K_max, head, optimizer, β, s, SCO,
                       micro-batches per step (sc.micro, both systems) */
  double imb;       /* received rows / balanced (>= 1; 0: 1)               */
  int64_t tokens_step; /* pl_plan_auto: keep this many tokens per step
                          (sc.micro follows the layout chosen; 0: one pass,
                          sc.micro as given)                              */
  /* fsdp2 */
  int cp, ep; /* context- and expert-parallel degrees (divide W; in a
                 proxy cp may be virtual: cp·W divides W_v)          */
  pl_plan_ac ac;
  int ac_freq;  /* selective: layer l checkpointed iff (l + 1) % ac_freq
                   == 0 (0: 2, the baseline's default)                */
  bool offload; /* FSDP2 CPUOffloadPolicy: fp32 params, grads and the
                   optimizer on the host, AdamW on the CPU             */
  bool sdpa;    /* time PyTorch's FSDP2 (attention at fsdp2_attn_tflops,
                   SDPA on chunks of S/CP: plan --table paper) instead of
                   this baseline (ring attention's blocks on our flash
                   kernels at attn_fwd/bwd_tflops)                     */
} pl_plan_cfg;

/* plateau's trainer defaults (pl_step_cfg_default, D = P = 1) at W, S. */
pl_plan_cfg pl_plan_cfg_plateau(int W, int64_t S);
/* FSDP2: cp = 1, ep = W (or the largest divisor of E), full AC, no
 * offload.  The baseline runs one sequence per CP group per micro-batch:
 * more tokens per step are more micro-batches (sc.micro). */
pl_plan_cfg pl_plan_cfg_fsdp2(const pl_model_cfg *m, int W, int64_t S);

/* Tokens per rank N and tokens per step of a configuration. */
int64_t pl_plan_tokens_per_rank(const pl_plan_cfg *c);
int64_t pl_plan_tokens_per_step(const pl_plan_cfg *c);

/* "D=2 P=8 c=8192 β=100M s=2 sco=3/7 stream ring pllep" (or FSDP2's knobs). */
void pl_plan_cfg_str(const pl_plan_cfg *c, char *buf, size_t n);

/* ---- memory ------------------------------------------------------------- */

/* The terms of the per-rank budget: Eq. 6's seven and the transients our
 * operators allocate beside them. */
typedef enum pl_plan_term {
  PL_TERM_WEIGHTS, /* bf16 weights of the rank's shards and experts       */
  PL_TERM_GRADS,   /* f32 gradients of them                               */
  PL_TERM_OPTIM, /* optimizer staging s·β·12 (<= s·β·16), norm partials */
  PL_TERM_ATTN,  /* attention workspace and Ulysses buffers             */
  PL_TERM_DISPATCH, /* dispatch buffers (<= 2·Ep·k·c_eff·H·b)              */
  PL_TERM_LOGITS,   /* logit strips, ring hop buffers, CE state            */
  PL_TERM_RESTORED, /* boundaries restored by SCO (<= 2·N·H·b)             */
  PL_TERM_RESIDENT, /* boundaries kept on the device ((L − |S|)·N·H·b)     */
  PL_TERM_UNITS,    /* gathered ZeRO-3 / FSDP units (two)                  */
  PL_TERM_UNIT_GRADS, /* unsharded unit gradients, reduce-scatter buffers    */
  PL_TERM_ACTS,       /* one layer's activations and their gradients        */
  PL_TERM_EXPERT,     /* expert intermediates, router, routing, LLEP weights */
  PL_TERM_OTHER,      /* tokens, small state                                 */
  PL_TERM_COUNT
} pl_plan_term;
const char *pl_plan_term_name(int t);    /* "weights", ... */
const char *pl_plan_term_formula(int t); /* "4Θ/W: bf16 ...", Eq. 6's form */
/* What each term holds in the FSDP2 baseline (the tags its measurement
 * books under each term). */
const char *pl_plan_fsdp2_term_formula(int t);

#define PL_PLAN_MAX_TAGS 32
#define PL_PLAN_BINS 32

typedef struct pl_plan_mem {
  /* device (the rank with the highest peak) */
  size_t dev_peak;     /* predicted tracked device peak of a step        */
  size_t dev_worst;    /* the same under adversarial routing (the bound the
                          pipelined dispatch guarantees; ep and llep: not
                          bounded, this is all routes to one rank)         */
  int peak_rank;       /* the rank (of a P-group) with the highest peak  */
  char peak_phase[48]; /* "backward layer 3 (moe ffn)", ...              */
  int n_tags;
  pl_tag_bytes at_peak[PL_PLAN_MAX_TAGS];  /* live set at the peak        */
  pl_tag_bytes tag_peak[PL_PLAN_MAX_TAGS]; /* each tag's own peak         */
  size_t term[PL_TERM_COUNT];              /* live set at the peak by term */
  size_t term_peak[PL_TERM_COUNT];         /* each term's own peak        */
  size_t state; /* persistent device bytes (before the step)      */
  /* layer_high[i]: the most device bytes live at once in the forward and
   * backward passes of the layers l with ⌊l·PL_PLAN_BINS/L⌋ = i, and
   * [PL_PLAN_BINS] in the head: what those phases hold beside the kept
   * activations of the layers below them (plateau; the search's pruning
   * reads it) */
  size_t layer_high[PL_PLAN_BINS + 1];
  /* the same under adversarial routing, measured with dev_worst (zeros
   * where dev_worst is not) */
  size_t layer_high_worst[PL_PLAN_BINS + 1];
  /* host */
  size_t host_pinned; /* tracked pinned host bytes per rank             */
  size_t host_optim;  /* of it: the optimizer's state (fp32 master, m, v;
                         FSDP2 with offload: + fp32 params and grads)    */
  size_t host_sco;    /* of it: SCO's pinned boundaries                 */
  size_t host_rank;   /* all host bytes of a rank's state (pinned + not)*/
  size_t host_node;   /* host bytes per node (gpus_per_node ranks)      */
  /* facts of the configuration */
  int64_t N; /* tokens per rank                                */
  int K;     /* MoE chunks (Eq. 1)                             */
  int64_t c_eff;
  int sco_layers;        /* |S|                                            */
  int64_t params_rank;   /* parameters the rank updates                    */
  size_t dispatch_bound; /* 2·Ep·k·c_eff·H·b (pipelined), 0 otherwise      */
} pl_plan_mem;

/* Bytes of a tag at the peak / its own peak (0 when absent). */
size_t pl_plan_mem_tag(const pl_plan_mem *m, const char *tag);
size_t pl_plan_mem_tag_peak(const pl_plan_mem *m, const char *tag);

/* c's memory, measured (pl_plan_memory_dry's measurement, dev_worst
 * included; another system's through its hook): rank <= 0 is rank 0, the
 * rank with the highest peak (ranks differ only in their vocabulary shard;
 * rank 0's is the widest); another rank PL_EUNSUPPORTED.  PL_EINVAL as
 * pl_layout_plan_make and pl_trainer_create refuse, naming the value. */
pl_status pl_plan_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_machine *mc, int rank, pl_plan_mem *out);
/* A dry device (backend/dry/dry.h) playing backend flavour (cpu or cuda)
 * with total_bytes of memory (what pl_dev_info reports; 0: none), whose MoE
 * routers route by LLEP's balanced profile of route_rank (seed 0): the
 * routing pl_plan_memory assumes (imb 1).  A trainer built on it and stepped
 * tracks the peaks its step has on that backend (dry_dev.c). */
pl_status pl_plan_dry_device(pl_backend flavour, size_t total_bytes,
                             int route_rank, pl_dev **out);
/* The configuration one process builds to measure c: c itself on one rank,
 * else the rank view of its run's rank 0 (W = 1, W_v = the run's ranks,
 * lc.rank_view: every group virtual, train/layout.h). */
pl_plan_cfg pl_plan_rank_view_cfg(const pl_plan_cfg *c);
/* The memory of configuration c measured: the trainer
 * built on a dry device (pl_plan_dry_device: mc's backend as the flavour,
 * mc's device memory, the balanced routes of rank 0, skewed by c's imb:
 * pl_plan_dry_device_skewed) and stepped once (the
 * trainer allocates its state when built, so its first step starts from
 * what every later one does: a second step measures the same, field by
 * field, test_mpi_plan_dry.c dry_one_step); the peaks and tags of that
 * step.  One process builds one rank: a
 * configuration of W > 1 ranks is built as the rank view of that run's
 * rank 0 (*built: W = 1, W_v = the run's, lc.rank_view: every group
 * virtual, the expert group too, train/layout.h), which holds what rank 0
 * of the real run holds under the balanced routes.  Another system (the
 * FSDP2 baseline) is measured by the function it registered
 * (pl_plan_set_dry_measure; PL_EUNSUPPORTED when none); a configuration the
 * trainer refuses is its error, prefixed "the dry device: ".  No MPI (the
 * step's world is a virtual group of one, plateau/comm.h): any thread may
 * measure, each its own configuration, before pl_init too.  with_worst: the
 * trainer built and
 * stepped again with adversarial routes (pl_plan_dry_device_routed), its device
 * peak mem.dev_worst. */
typedef struct pl_plan_dry_mem {
  /* the whole memory of the configuration built, measured: the peaks, tags,
   * terms (each allocation's PL_TERM_* from its tag and the step's phase
   * when it was made), the phase of the peak, the states, the host, the
   * step's facts; dev_worst the device peak of a second measurement under
   * adversarial routes (with_worst; 0 without) */
  pl_plan_mem mem;
  size_t dev_peak;  /* tracked device peak of the last step           */
  size_t host_peak; /* tracked pinned host peak of the last step      */
  int n_tags;
  struct {
    char tag[32];
    size_t at_peak; /* bytes in the live set at the device peak */
    size_t peak;    /* the tag's own peak                      */
  } tags[PL_PLAN_MAX_TAGS];
  int steps;
  double seconds; /* building and stepping, wall clock              */
} pl_plan_dry_mem;
pl_status pl_plan_memory_dry(const pl_model_cfg *m, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, bool with_worst,
                             pl_plan_cfg *built, pl_plan_dry_mem *out);
/* The routes of a planner's dry device: LLEP's balanced profile (what
 * pl_plan_memory assumes), or adversarial — every token's k routes to
 * experts 0..k-1, so the lowest rank (the one measured) receives every
 * source's routes (what pl_plan_memory's dev_worst assumes). */
typedef enum pl_plan_routes {
  PL_PLAN_ROUTES_BALANCED,
  PL_PLAN_ROUTES_ADVERSARIAL
} pl_plan_routes;
/* pl_plan_dry_device with the routes chosen. */
pl_status pl_plan_dry_device_routed(pl_backend flavour, size_t total_bytes,
                                    int route_rank, pl_plan_routes routes,
                                    pl_dev **out);
/* A planner's dry device whose routers skew toward the rank measured: that
 * rank (the lowest of an expert group of Ep ranks, experts [0, E/Ep))
 * receives imb times its balanced share of every source's routes (at most
 * Ep times: every route), the rest balanced over the others — a router's
 * imbalance, before any dispatch spreads it (`plan --imb`). */
pl_status pl_plan_dry_device_skewed(pl_backend flavour, size_t total_bytes,
                                    int Ep, double imb, pl_dev **out);
/* n tokens of id 0 for a step on a dry device (which computes nothing, so
 * no allocation depends on the tokens' values): the calling thread's
 * buffer, kept for its next call, valid until then (a fresh zeroed buffer
 * per measurement costs a page fault per 4 KiB read at millions of tokens).
 * NULL, with the error set, when the host has no memory. */
const int32_t *pl_plan_dry_tokens(int64_t n);
/* The fields of two memories that differ, as "field: A / B" lines (at most
 * max into lines, each of PL_PLAN_DIFF_LEN chars); returns how many differ.
 * Tags are compared by name (absent: 0 bytes; a tag of 0 bytes at the peak
 * and at its own peak is as absent), every other field as it is but the
 * search's layer_high. */
#define PL_PLAN_DIFF_LEN 112
int pl_plan_mem_diff(const pl_plan_mem *a, const pl_plan_mem *b,
                     char (*lines)[PL_PLAN_DIFF_LEN], int max);
/* The memory of configuration c of a system whose trainer lives above the
 * planner, measured on a dry device by that trainer's layer (mem_hook.c):
 * the layer registers fn for system s at the program's start (FSDP2:
 * pl_fsdp2_register_dry, baselines/fsdp2/fsdp2.h; fn NULL: none).
 * pl_plan_dry_measure calls the one registered for c->system, which builds
 * c's rank view when W > 1 (as pl_plan_memory_dry) and fills *out as
 * pl_plan_memory fills plateau's.  PL_EINVAL naming the value for a
 * configuration the planner knows is not valid (FSDP2: as
 * pl_plan_time_predict refuses it), checked first; PL_EINFEASIBLE
 * (pl_plan_dry_beyond_reach) when building or stepping it runs out of what
 * a dry device can reserve; PL_EUNSUPPORTED naming the system when none is
 * registered. */
typedef pl_status (*pl_plan_dry_measure_fn)(const pl_model_cfg *m,
                                            const pl_plan_cfg *c,
                                            const pl_plan_machine *mc,
                                            pl_plan_mem *out);
void pl_plan_set_dry_measure(pl_plan_system s, pl_plan_dry_measure_fn fn);
/* st for a dry measurement's build or step: out of memory there (a dry
 * device reserves address space only, with no limit of its own) means the
 * step asks for more than any device or host could hold — PL_EINFEASIBLE,
 * "does not fit: ..." before the message; any other status as it is. */
pl_status pl_plan_dry_beyond_reach(pl_status st);
pl_status pl_plan_dry_measure(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, pl_plan_mem *out);

/* ---- time --------------------------------------------------------------- */

enum {
  PL_TPART_ATTN,     /* attention kernels (fwd, recompute, bwd)            */
  PL_TPART_DENSE,    /* dense GEMMs: QKV, O, router, shared/dense FFN       */
  PL_TPART_EXPERT,   /* expert GEMMs (with the inner recompute)             */
  PL_TPART_HEAD,     /* vocabulary head and loss                            */
  PL_TPART_MEM,      /* elementwise, memory-bound work                      */
  PL_TPART_OPTIM,    /* optimizer step                                      */
  PL_TPART_A2A_MOE,  /* expert dispatch / combine, exposed part             */
  PL_TPART_A2A_SEQ,  /* Ulysses (plateau) / ring attention (FSDP2) comm     */
  PL_TPART_UNITS,    /* ZeRO-3 / FSDP gathers and reduce-scatters, exposed  */
  PL_TPART_HOST,     /* SCO copies / CPU-offload traffic, exposed           */
  PL_TPART_OVERHEAD, /* per step, per layer and per collective fixed costs  */
  PL_TPART_COUNT
};
const char *pl_plan_tpart_name(int p);

typedef struct pl_plan_time {
  double step_s;     /* predicted step time                            */
  double tok_s_gpu;  /* tokens per step / W / step_s                   */
  double tflops_gpu; /* model FLOPs (pl_model_flops_per_token) per GPU */
  double mfu;        /* tflops_gpu / gemm_tflops                       */
  double part_s[PL_TPART_COUNT];   /* exposed time of each part (sum = step) */
  double hidden_s[PL_TPART_COUNT]; /* comm hidden behind compute             */
  double flops_rank; /* executed FLOPs per rank per step (recompute in)*/
  double comm_s;     /* of step_s: the exposed communication — all-to-alls
                        (dispatch, Ulysses), ZeRO-3 / FSDP units (with the
                        offloaded shards' copies), Ring-DTP's and CP's
                        exposed hops, the collective calls' fixed cost    */
} pl_plan_time;

/* The step time of a configuration on a machine.  A virtual group of a
 * proxy (train/layout.h; fsdp2's virtual CP) communicates nothing: its
 * stand-ins are local, so its all-to-alls, hops and calls are not counted
 * (pl_plan_proxy_comm gives the W_v-rank run's).  Overlaps (plateau):
 * ZeRO-3 gathers / reduce-scatters behind each layer's compute (prefetch);
 * pipelined dispatch behind the expert GEMMs of the other chunks (ep, llep:
 * exposed); Ring-DTP hops behind the strips; SCO copies behind the layers;
 * Ulysses all-to-alls exposed; the optimizer after the backward, exposed.
 * FSDP2: see fsdp2_time.c (FSDP comm behind the layer compute; CP ring
 * behind attention; EP all-to-all exposed; optimizer exposed). */
pl_status pl_plan_time_predict(const pl_model_cfg *m, const pl_plan_cfg *c,
                               const pl_plan_machine *mc, pl_plan_time *out);

/* The communication a proxy's measurement leaves out (c->lc.W_v > c->W):
 * the W_v-rank run it plays (every rank present, every group real, on
 * nodes of `gpus_per_node` GPUs of mc's rates; 0: mc's own) is predicted,
 * and *comm_s is its exposed communication less the proxy's own (the
 * offloaded shards' copies a proxy does perform), never below 0; *run (may
 * be NULL) the W_v-rank run's whole prediction.  A real run (W_v = W):
 * *comm_s 0.  PL_EINVAL as pl_plan_time_predict. */
/* The projection's sensitivity to the network: the step predicted with the
 * inter-node bandwidth ib_gbs scaled by 1 − frac (*lo, the slower network)
 * and 1 + frac (*hi), everything else as mc.  0 < frac < 1, else
 * PL_EINVAL; PL_EINVAL as pl_plan_time_predict.  Within one node
 * (W ≤ gpus_per_node) both equal the step itself. */
#define PL_PLAN_LINK_FRAC 0.3 /* the ± fraction plan and report print */
pl_status pl_plan_link_sensitivity(const pl_model_cfg *m, const pl_plan_cfg *c,
                                   const pl_plan_machine *mc, double frac,
                                   pl_plan_time *lo, pl_plan_time *hi);

pl_status pl_plan_proxy_comm(const pl_model_cfg *m, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, int gpus_per_node,
                             double *comm_s, pl_plan_time *run);

/* ---- feasibility (the suite's and jobs/submit's call) ------------------- */

typedef struct pl_plan_verdict {
  bool fits;         /* device and host within the machine              */
  bool fits_worst;   /* device within HBM also under adversarial routing */
  char binding[40];  /* the term that binds: the largest device term at
                        the peak, or "host: <term>"; "" when it fits      */
  size_t need, have; /* bytes of the binding resource                   */
  char why[200];     /* one line: "device peak 151.2 GiB > 135.8 GiB
                        usable; largest term dispatch 40.1 GiB"           */
  pl_plan_mem mem;
} pl_plan_verdict;

/* Does the configuration fit on the machine?  Returns PL_OK with
 * verdict->fits set either way; PL_EINVAL only when the configuration is
 * not valid (the trainer would refuse it), naming the value.  The suite
 * records a point that does not fit as status `infeasible` with
 * verdict->binding and verdict->why instead of launching it. */
pl_status pl_plan_check(const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_machine *mc, pl_plan_verdict *verdict);

/* ---- the automatic choice ----------------------------------------------- */

/* Which knobs the search may choose: a knob left free is searched, a fixed
 * one is taken from the configuration given. */
typedef struct pl_plan_free {
  bool D, P, c, beta, sco, optim; /* plateau            */
  bool cp, ep, ac, offload;       /* fsdp2 (ep: plateau's too — its
                                     expert groups, lc.Ep: the world or,
                                     past a node, a node's ranks)      */
  /* plateau's headroom: the optimizer state resident in HBM
   * (sc.oo.resident_*) and the kept activations (sc.keep), filled below
   * the usable HBM less fill_reserve in the order of time saved per byte */
  bool resident, keep;
  /* not a knob: whether any configuration fits, not which is best — the
   * search stops at the first that fits (fastest bound first) and fills no
   * headroom (have_best: that one; runner_up and the fill left empty) */
  bool first_fit;
} pl_plan_free;

/* Every knob of both systems free, the headroom filled, the full search:
 * what `plateau plan --table paper` frees at each point (with first_fit
 * for its reach). */
pl_plan_free pl_plan_free_every(void);

typedef struct pl_plan_choice {
  pl_plan_cfg cfg;
  pl_plan_mem mem;
  pl_plan_time time;
  char fill[480]; /* what the headroom fill kept and why ("" without) */
} pl_plan_choice;

typedef struct pl_plan_search {
  int tried, feasible;
  int skipped; /* of tried: not evaluated, slower than the choice even with
                  their memory-decided knobs at their best (time bound) */
  int unbuilt; /* left out: a dry device cannot build them (not counted in
                  tried) */
  int beyond;  /* left out: so large a dry device cannot even reserve them
                  (they do not fit; not counted in tried) */
  long evals;  /* memory measurements made (a configuration once)        */
  long ahead;  /* of them: measured ahead on a second thread (the search's
                  look-ahead; 0 without one), the rest by the search      */
  pl_plan_choice best, runner_up; /* by predicted tok/s/GPU               */
  bool have_best, have_runner_up;
  char why_lost[400]; /* why the runner-up lost: its largest time part's
                         difference (or memory when it is slower by less
                         than 0.5%)                                        */
  char binding[40];   /* when nothing fits: the binding term of the
                         configuration closest to fitting                  */
  char why_none[480];
  char why_ep[400]; /* plateau with free.ep: the chosen expert groups
                       against the other kind (the world, or groups of a
                       node): the exposed unit and all-to-all time and
                       the peak each way                               */
} pl_plan_search;

/* Search the free knobs around base (its fixed knobs kept): plateau over
 * D (dividing W, n_q, n_kv and S), P (1, 2, 4, 8 inside a node), c, β, s,
 * the SCO budget (0, one boundary at a time, all), the optimizer (stream,
 * hybrid), the expert groups (free.ep: Ep = W_v, and past a node a node's
 * GPUs where they divide the ranks present; why_ep says why), and for each
 * such configuration that fits its headroom filled
 * (free.resident, free.keep: pl_plan_fill; with the SCO budget free, also
 * with every boundary offloaded, which moves device bytes to the host);
 * FSDP2 over CP, EP, AC and offload (one sequence per CP group per
 * micro-batch, as the baseline runs).  Maximizes predicted tok/s/GPU among
 * the configurations that fit. */
pl_status pl_plan_auto(const pl_model_cfg *m, const pl_plan_cfg *base,
                       const pl_plan_free *free, const pl_plan_machine *mc,
                       pl_plan_search *out);

/* Spend the headroom of c (a configuration that fits; its resident and
 * keep budgets the starting point): the items — every layer's attention
 * output and LSE kept, the optimizer state resident bucket by bucket, whole
 * attention halves kept — in the order of step time saved per byte (the
 * time model's: pl_plan_time_predict of each item at its whole), each taken
 * as far as the device peak stays within the usable HBM less fill_reserve
 * (measured: a bisection per item).  Writes the budgets into c
 * (sc.oo.resident_bytes, sc.keep {BYTES, ...}) and into why what was kept,
 * its bytes and time saved per GiB, and what was not and why. */
pl_status pl_plan_fill(const pl_model_cfg *m, const pl_plan_machine *mc,
                       bool resident, bool keep, pl_plan_cfg *c, char *why,
                       size_t n);

/* The largest tokens per rank N that fits (micro = 1) with the free knobs
 * searched, N a multiple of `quantum`, at most n_max; 0 when none. */
int64_t pl_plan_max_tokens(const pl_model_cfg *m, const pl_plan_cfg *base,
                           const pl_plan_free *free, const pl_plan_machine *mc,
                           int64_t quantum, int64_t n_max);

#ifdef __cplusplus
}
#endif
#endif
