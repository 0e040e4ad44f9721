/* train_system.h — a training system behind one small interface, so that
 * `plateau bench train --system a,b` measures each the same way (the same
 * model, sequences, rows and check): plateau (the composed step,
 * engine/train/step.h) and fsdp2 (the FSDP2 baseline, baselines/fsdp2) are
 * the entries of the registry in train_system.c, their functions wrapped in
 * these signatures.  Internal to suite/.
 *
 * A system is created per point (one context S) and destroyed after it;
 * every call is collective over the world. */
#ifndef PLATEAU_SUITE_TRAIN_SYSTEM_H
#define PLATEAU_SUITE_TRAIN_SYSTEM_H

#include <stdbool.h>
#include <stdio.h>

#include "../baselines/fsdp2/fsdp2.h"
#include "harness/bench.h"
#include "plan/plan.h"
#include "train/describe.h"
#include "train/step.h"

/* What the bench asks of a system at one point. */
typedef struct pl_train_setup {
  pl_model_cfg m;
  char model[32];    /* the preset's name, or "custom" (a size overridden) */
  pl_layout_cfg lc;  /* D, P, W_v (0: the real world)                    */
  int64_t S;         /* the context: N = S / D tokens per rank           */
  pl_step_cfg sc;    /* plateau's step; dt, micro, seed and profile are
                        every system's                                   */
  char sco_text[32]; /* --sco-budget as given                        */
  char resident_text[32]; /* --optim-resident as given (0, all, auto, a size) */
  char keep_text[32];     /* --keep as given (0, attn, all, auto, a size)     */
  bool resident_auto, keep_auto; /* auto: the planner fills them            */
  const char *dispatch; /* --dispatch as given: ep | llep | pllep       */
  const char *head;     /* --head: ring | fused | dense | vp            */
  const char *optim;    /* --optim: stream | hybrid | cpu               */
  /* fsdp2's knobs: cp, ep, ac, ac_freq, optim (--cp ... or a --tune or
   * --points point); its micro-batches, W_v, dtype, seed, profile and MoE
   * lanes are the ones above (sc, lc), every system's */
  pl_fsdp2_cfg f2;
  const char *kind; /* how the point was chosen: run | tune | peer | auto */
  char point[48];   /* a --points point's name ("" otherwise)           */
  char chosen[240]; /* --config auto: the planner's choice, for the note */
  char fill[480];   /* the planner's headroom fill (auto), for the note   */
} pl_train_setup;

typedef struct pl_train_system {
  const char *name;
  /* A configuration the system cannot run: PL_EINVAL naming the value (a
   * usage error, checked for every point before anything runs) or
   * PL_EINFEASIBLE (this point only: an infeasible row).  W: the ranks. */
  pl_status (*validate)(const pl_train_setup *u, int W);
  /* The row's columns of the system's own knobs: variant and its switches. */
  void (*identity)(const pl_train_setup *u, pl_row *row);
  /* Ranks sharing one sequence (plateau: D; fsdp2: cp): N = S / it. */
  int (*seq_ranks)(const pl_train_setup *u);
  pl_status (*create)(pl_dev *dev, pl_comm *world, const pl_train_setup *u,
                      void **out);
  void (*destroy)(void *h);
  /* Token ids per rank per step (the batch buffer), and this rank's batch
   * of step index st from the stream. */
  int64_t (*tokens_per_rank)(const void *h);
  pl_status (*batch)(void *h, pl_data *d, int64_t st, int32_t *tokens);
  pl_status (*step)(void *h, const int32_t *tokens, pl_step_result *res);
  /* Columns of the system's own results from the last step (may be NULL). */
  void (*result)(void *h, const pl_step_result *r, pl_row *row);
  /* The per-rank description before launch (train/describe.h; NULL: none):
   * --describe prints it, bound_bytes is its device total. */
  pl_status (*describe)(const pl_train_setup *u, int W, int rank, pl_backend be,
                        pl_train_desc *out);
  /* For the reference check (train_check.c; NULL: not comparable).  The
   * sequences of step st are windows st·q + i, i < q = sequences(h), of
   * the stream (train/data.h); the parameters are the composed step's
   * (names, shapes, order). */
  int (*sequences)(const void *h);
  pl_status (*forward_backward)(void *h, const int32_t *tokens,
                                pl_step_result *res);
  int (*nparams)(const void *h);
  pl_status (*param_info)(const void *h, int i, pl_param_info *out);
  pl_status (*gather)(void *h, int i, bool grad, float *out);
  const float *(*router_bias)(const void *h, int layer);
  /* The planner (plan/plan.h; train_plan.c): the point as its configuration
   * at W ranks (PL_EUNSUPPORTED: a point the planner does not model); the
   * knobs `--config auto` leaves to it (those the command line does not
   * give); its choice written back into the point's knobs. */
  pl_status (*plan)(const pl_train_setup *u, int W, pl_plan_cfg *out);
  void (*plan_free)(const pl_args *a, pl_plan_free *fr);
  void (*plan_apply)(const pl_plan_cfg *c, pl_train_setup *u);
} pl_train_system;

/* The systems built in, NULL-terminated ("plateau", "fsdp2"). */
extern const pl_train_system *const pl__train_systems[];
/* By name; NULL when none. */
const pl_train_system *pl__train_system_find(const char *name);
/* fsdp2's whole configuration at a point: u->f2's knobs with the shared
 * micro-batches, W_v, dtype, seed, profile and lanes. */
pl_fsdp2_cfg pl__train_fsdp2_cfg(const pl_train_setup *u);

#endif
