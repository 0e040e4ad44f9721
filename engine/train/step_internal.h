/* step_internal.h — what the trainer's files share (train/step.h's
 * implementation, split at its seams): the trainer's struct, its decoder
 * layers and parameter table, and the cross-file helpers.  Internal to
 * engine/train (not installed).
 *
 *   step.c         the step's schedule (micro-batches,
 *                  forward + backward, the optimizer and bias update, runs)
 *   step_layer.c   the decoder layer in the checkpoint runner (units
 *                  gathered, prefetched, released, gradients
 *                  reduce-scattered) and the head phase (final norm,
 *                  vocabulary head, loss), timed (train/timeline.h)
 *   step_build.c   the parameter table, the ZeRO-3 units, the weights'
 *                  initialization, create and destroy
 *   step_params.c  the parameters from outside: info, gather, set, router
 *                  biases
 *   step_cfg.c     the configuration: defaults, kept activations, part
 *                  names (called by the others, calls none of them)
 *   epgroups.c     expert groups smaller than the world: the expert units
 *                  (train/epgroups.h) */
#ifndef PLATEAU_TRAIN_STEP_INTERNAL_H
#define PLATEAU_TRAIN_STEP_INTERNAL_H

#include "model/layer.h"
#include "model/moe_ffn.h"
#include "train/ckpt.h"
#include "train/step.h"
#include "train/timeline.h"
#include "train/units.h"
#include "train/zero3.h"

typedef enum { PL__K_UNIT, PL__K_EXPERT } pl__param_kind;

typedef struct pl__tparam {
  pl_param_info info;
  pl__param_kind kind;
  int unit;         /* PL__K_UNIT                                   */
  size_t off;       /* PL__K_UNIT: first element in the unit        */
  int layer, which; /* PL__K_EXPERT: layer, 0 wg 1 wu 2 wd           */
  int head;         /* the head: columns of a vocab-parallel P-group */
  pl_dist dist;
  float a, b;
} pl__tparam;

typedef struct pl__tlayer {
  pl_trainer *t;
  int index, unit, moe;
  size_t off[PL__U_N];
  pl_layer layer;
  pl_moe_ffn ffn;
  void *ew[3];
  float *eg[3];
  float *bias, *hbias; /* E_route: device, host */
  int eunit;           /* expert groups: its expert unit (-1: none)    */
  size_t eoff[3];      /* wg, wu, wd in that unit (train/epgroups.h)   */
  int rec_a;           /* the recompute's start event (profile)  */
} pl__tlayer;

struct pl_trainer {
  pl_dev *dev;         /* borrowed */
  pl_comm *world;      /* borrowed: every rank of the step */
  pl_layout *lay;      /* the rank groups of the layout */
  pl_layout_plan plan; /* this rank's part of the layout */
  pl_model_cfg model;  /* the model (a copy) */
  pl_step_cfg cfg;     /* the step's configuration (a copy) */
  pl_dtype dt;         /* the model's dtype (cfg.dt) */
  size_t elem_bytes;   /* bytes per element of dt */
  int64_t N;           /* tokens per rank of a micro-batch */
  int64_t H;           /* hidden */
  /* the ZeRO-3 units: 0 the embedding, 1..L the layers, L+1 the head */
  pl_zero3 *units;
  int nunits; /* L + 2 */
  int u_emb;  /* the embedding's unit (0) */
  int u_head; /* the head's unit (L + 1) */
  /* expert groups (Ep < W_v): one unit per MoE layer; NULL otherwise
   * (train/epgroups.h) */
  pl_zero3 *expert_units;
  int64_t head_cols;       /* this rank's head columns (V or |V_r|) */
  pl__tlayer *layers;      /* L decoder layers */
  void **layer_ctx;        /* L pointers into layers: the runner's */
  pl_moe *moe;             /* the MoE layers' shared dispatch */
  pl_ckpt_stack *ckpt;     /* the checkpoint runner */
  pl_sco *sco;             /* the boundaries offloaded (SCO) */
  const pl_head_ops *head; /* the vocabulary head */
  void *hctx;              /* the head's context */
  /* optimizer */
  const pl_optim_ops *optim; /* cfg.optim, or stream */
  void *opt;                 /* its context */
  pl_adamw_state state;      /* fp32 master, m, v (host; resident part) */
  pl_adamw_param *adam;      /* the optimizer's tensors (nadam) */
  size_t *adam_off; /* each optimizer tensor's first element in the state */
  int nadam;        /* optimizer tensors */
  pl_bf16 *shadow;  /* f32 mode: the bf16 shadow weights */
  size_t theta;     /* parameters this rank updates */
  /* parameters: the table of every tensor (nparams) */
  pl__tparam *params;
  int nparams;
  /* per micro-batch device buffers (tag "tokens"), N each */
  int32_t *d_tok; /* the tokens */
  int32_t *d_tgt; /* their targets */
  float *d_dloss; /* each token's loss weight, 1/T */
  float *d_nll;   /* each token's NLL */
  float *h_nll;   /* host: the NLL copied back (N + 1) */
  /* step state */
  int64_t step_no;   /* steps taken */
  int micro_i;       /* the micro-batch being run */
  float *final_g;    /* the final norm's gradient (the last layer's unit) */
  pl_timeline tline; /* profile: events and spans of the current step */
  double fb_ms;      /* the last step's micro-batches (ms), before its update */
};

/* Elements of parameter p's full tensor. */
static inline int64_t pl__step_numel(const pl__tparam *p) {
  return p->info.rows * p->info.cols;
}

/* ---- step_layer.c ---------------------------------------------------------
 */
/* The layer's recompute marks (pl_layer.recompute_mark): a span of part
 * recompute (profile on). */
pl_status pl__step_recompute_mark(void *ctx, pl_stream *s, int end);
/* The decoder layer in the checkpoint runner, and its FFN slot (timed). */
extern const pl_layer_ops pl__step_layer_ops;
extern const pl_ffn_ops pl__step_slot_ops;
/* Failure agreement over the world before layer l's WHAT (l < 0: before
 * WHAT); every rank calls it with its status so far (plateau/comm.h). */
pl_status pl__step_agree(pl_trainer *t, pl_status st, const char *what, int l);
/* The runner's head (train/ckpt.h): final norm, vocabulary head, loss. */
pl_status pl__step_head_run(void *ctx, pl_stream *s, const void *hL, void *dh,
                            int64_t N, double *loss);

/* ---- step_build.c ---------------------------------------------------------
 */
/* The fp32 master at flat elements [i, i + n) from / into device or host
 * memory, wherever its part lives (host; past Θ − resident, the device). */
pl_status pl__step_master_put(pl_trainer *t, pl_stream *s, size_t i,
                              const float *src, size_t n);
pl_status pl__step_master_get(pl_trainer *t, pl_stream *s, size_t i, float *dst,
                              size_t n);
/* The first element of expert parameter p's full tensor this rank's shard
 * holds, and its optimizer tensor (they follow the units). */
int64_t pl__step_expert_first(const pl_trainer *t, const pl__tparam *p);
int pl__step_expert_tensor(const pl_trainer *t, const pl__tparam *p);

/* ---- epgroups.c (train/epgroups.h; no-ops unless t->expert_units) ---------
 */
/* The expert units (after the layers are set up; t->expert_units stays NULL
 * with Ep = W_v). */
pl_status pl__ep_create(pl_trainer *t);
/* Issue the gather of the layer's expert unit behind the work issued on s. */
pl_status pl__ep_layer_begin(pl_trainer *t, pl__tlayer *x, pl_stream *s);
/* Around the layer's FFN slot: the unit gathered and the MoE weights
 * pointed into it (bwd: its full f32 gradient opened too); then released
 * (bwd: the gradient reduce-scattered over the replica ranks). */
pl_status pl__ep_slot_begin(pl_trainer *t, pl__tlayer *x, pl_stream *s,
                            bool bwd);
pl_status pl__ep_slot_end(pl_trainer *t, pl__tlayer *x, pl_stream *s, bool bwd);
/* The shard of an expert parameter p: its weights, gradient, length and
 * first element in the unit, and the range [*p0, *p0 + n) the parameter's
 * E_local experts take in the unit. */
void pl__ep_param_shard(pl_trainer *t, const pl__tparam *p, void **w, float **g,
                        size_t *s, size_t *off, size_t *p0, size_t *n);

#endif
