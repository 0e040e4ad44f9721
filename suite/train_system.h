/* train_system.h — a training system behind one small interface, so that
 * `plateau bench train --system a,b` measures each the same way (the same
 * model, sequences, rows and check): plateau (the composed step,
 * engine/train/step.h) is built in (train_system.c); another system
 * (baselines/fsdp2) is one more entry in the registry there, its functions
 * wrapped in these signatures.  Internal to suite/.
 *
 * A system is created per point (one context S) and destroyed after it;
 * every call is collective over the world. */
#ifndef PLATEAU_SUITE_TRAIN_SYSTEM_H
#define PLATEAU_SUITE_TRAIN_SYSTEM_H

#include <stdbool.h>
#include <stdio.h>

#include "bench.h"
#include "train/describe.h"
#include "train/step.h"

/* What the bench asks of a system at one point. */
typedef struct pl_train_setup {
  pl_model_cfg m;
  char model[32];       /* the preset's name, or "custom" (a size overridden) */
  pl_layout_cfg lc;     /* D, P, W_v (0: the real world)                    */
  int64_t S;            /* the context: N = S / D tokens per rank           */
  pl_step_cfg sc;       /* plateau's step; dt, micro, seed and profile are
                           every system's                                   */
  char sco_text[32];    /* --sco-budget as given                        */
  const char *dispatch; /* --dispatch as given: ep | llep | pllep       */
  const char *head;     /* --head: ring | fused | dense | vp            */
  const char *optim;    /* --optim: stream | hybrid | cpu               */
} pl_train_setup;

typedef struct pl_train_system {
  const char *name;
  /* A configuration the system cannot run: PL_EINVAL naming the value (a
   * usage error, checked for every point before anything runs) or
   * PL_EINFEASIBLE (this point only: an infeasible row).  W: the ranks. */
  pl_status (*validate)(const pl_train_setup *u, int W);
  /* The row's columns of the system's own knobs: variant and its switches. */
  void (*identity)(const pl_train_setup *u, pl_row *row);
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
} pl_train_system;

/* The systems built in, NULL-terminated ("plateau"). */
extern const pl_train_system *const pl__train_systems[];
/* By name; NULL when none. */
const pl_train_system *pl__train_system_find(const char *name);

#endif
