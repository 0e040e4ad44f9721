/* layout.h — the MoP rank layout (DESIGN §1.5): one rank set of W ranks and
 * three overlapping groups, plus the one-GPU proxy.
 *
 *   D-groups  D consecutive ranks share one sequence of S tokens, rank j of
 *             the group holding tokens [j·N, (j+1)·N), N = S / D; attention
 *             trades sequence for heads inside the group (Ulysses), so n_q
 *             and n_kv must divide by D.  W / D sequences per micro-batch.
 *   EP group  all W ranks: rank r holds experts [r·E/W, (r+1)·E/W) of every
 *             MoE layer (E divisible by W); PipelinedLLEP / LLEP / EP.  Or
 *             (Ep < W, train/epgroups.h) Ep consecutive ranks, each group
 *             holding all E experts as ZeRO-3 units over the W / Ep groups.
 *   P-groups  P consecutive ranks run Ring-DTP, each with its own tokens and
 *             the vocabulary shard V_r of its group rank (pl_ce_shard; V need
 *             not divide by P).  The ranks holding the same shard (one per
 *             P-group: W / P of them, rank ≡ r mod P) form the head's
 *             replica group.
 *   dense weights (attention, norms, router, shared expert, dense FFN,
 *             embedding) are ZeRO-3 units sharded over all W ranks; the head
 *             shard W_r is a unit sharded over its W / P replica ranks
 *             (train/zero3.h).
 *
 * The one-GPU proxy (virtual world W_v >= W, a multiple of W; W_v = W is a
 * real run): each of the W processes plays one rank of a W_v-rank run with
 * that rank's real slice — E / W_v local experts per MoE layer (the router
 * chooses the top-k among the E·W / W_v experts of the W present ranks, so a
 * token's expert FLOPs are the real ones), each dense ZeRO-3 unit stored as
 * a 1/W_v shard (weights, gradient shard and optimizer state of the shard
 * only) and gathered by an all-gather over the W real ranks whose result is
 * tiled to the full unit (a stand-in for the shards of the absent ranks), the
 * head shard likewise (W_v / P virtual holders); when fewer than k experts
 * are present (667B on one process of 64: 6 of them, k = 8) the router
 * chooses among slots, a multiple of them, each slot landing on present
 * expert slot mod E·W/W_v, so a token still makes k routes (some to the same
 * expert twice) and the experts' rows are the real run's.  Shapes, FLOPs and
 * per-rank memory are those of the W_v-rank run; what the proxy is not: no
 * communication with the absent ranks (the time of the W_v-rank run's
 * all-gathers, reduce-scatters and all-to-alls is not measured), and
 * numerically a different model (the tiled units repeat the present shards;
 * routing, loss and gradients differ from the real run's).
 *
 * Virtual groups (the proxy's attention and head).  A D-group or P-group is
 * real when its size divides W (its members are present ranks, as in a real
 * run).  Otherwise it is virtual: each present rank plays member 0 of its
 * own group whose other G − 1 members are absent (so W·G must divide W_v),
 * and the group's communicator is a virtual one (plateau/comm.h): its
 * collectives — Ulysses' all-to-alls, Ring-DTP's hops and statistics — move
 * the same bytes through local stand-ins (the rank's own data for the
 * absent members').  Member 0 of a D-group holds tokens [0, N) of its
 * sequence and heads [0, h/D) after the all-to-all; of a P-group, vocabulary
 * shard 0 (the widest).  Shapes, FLOPs and buffers are those of member 0 of
 * the W_v-rank run; the stand-ins' time is reported apart (train/step.h)
 * and the communication of the W_v-rank run is the planner's to model.
 * Each present rank is its own sequence (n_groups = W) and its own head
 * shard's holder (the replica group: all W present ranks, W_v / P virtual
 * holders).  An expert group (Ep < W_v) is virtual likewise when Ep does
 * not divide W and W·Ep divides W_v: the rank is member 0 of its group
 * (experts [0, E/Ep)), its dispatch goes through a virtual group whose
 * absent members send it what it sends itself (plateau/comm.h), and the
 * MoE plan counts what each absent member would send as that member would,
 * routing as the rank does (ops/moe_plan.c).
 *
 * The rank view (lc.rank_view, W = 1): the proxy above keeps the world's
 * expert group to the ranks present, so its router chooses among fewer
 * experts than a real rank's; the rank view makes that group virtual too
 * (E_moe = E_route = E, E/W_v local experts, the dispatch over W_v
 * members), so one process holds exactly what rank 0 of the W_v-rank run
 * holds when every rank routes alike (LLEP's balanced profile does): the
 * planner's dry measurement of a run it cannot start
 * (plan/test_mpi_plan_rank.c checks it against real ranks). */
#ifndef PLATEAU_TRAIN_LAYOUT_H
#define PLATEAU_TRAIN_LAYOUT_H

#include "model/model.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_layout_cfg {
  int D;         /* Ulysses group size (>= 1)                               */
  int P;         /* Ring-DTP group size (>= 1)                              */
  int W_v;       /* virtual world (0: W, a real run)                        */
  int Ep;        /* expert group size (0: W_v, every rank one expert group;
                    train/epgroups.h for Ep < W_v)                        */
  int rank_view; /* 1: with W = 1 < W_v, play rank 0 of the W_v-rank run
                    whole — the world's expert group virtual too (the
                    router over all E experts, the dispatch through a
                    virtual group): a real rank's memory, as the planner
                    measures it; 0: a proxy's experts are those of the
                    ranks present (the local routing a GPU proxy times) */
} pl_layout_cfg;

/* Everything but the communicators: a pure function of the model, the
 * configuration, W, the rank and S (the planner uses it without MPI). */
typedef struct pl_layout_plan {
  int W, W_v, rank, D, P;
  int d_rank, d_group; /* rank inside its D-group, D-group index            */
  int p_rank, p_group; /* rank inside its P-group (its vocabulary shard)  */
  int n_groups;        /* W / D sequences per micro-batch (W when the
                          D-group is virtual)                             */
  int d_virtual;       /* 1: the D-group is virtual (D does not divide W) */
  int p_virtual;       /* 1: the P-group is virtual (P does not divide W) */
  int e_virtual;       /* 1: the expert group is virtual: Ep < W_v does
                          not divide W, or the rank view's whole world    */
  int64_t S, N;        /* sequence length, tokens per rank (S / D)         */
  int E_route;         /* experts the router chooses among: E·W / W_v, or
                          in a proxy with fewer than k of them present
                          that number times ⌈k / it⌉ (route slot e lands
                          on expert e mod E_moe: model/moe_ffn.h)       */
  int E_moe;           /* experts of the MoE layer over the W ranks present:
                          E·W / W_v                                       */
  int E_local;         /* experts this rank holds per MoE layer: E / W_v   */
  int zero_vsize;      /* virtual group of a dense unit: W_v               */
  int head_vsize;      /* virtual group of a vocabulary-sharded head unit:
                          W_v / P (a head over the full vocabulary: W_v)  */
  int64_t v_col0, v_cols; /* this rank's vocabulary shard at P           */
  /* expert groups (train/epgroups.h) */
  int Ep;         /* ranks of an expert group: W_v, or a divisor of W      */
  int ep_grouped; /* 1: Ep < W_v, each group holds all E experts, their
                     weights ZeRO-3 units over the W_v / Ep groups        */
  int ep_rank;    /* rank inside its expert group (its experts
                     [ep_rank·E_local, (ep_rank+1)·E_local))             */
  int ep_group;   /* expert group index (rank / Ep)                        */
  int ep_vsize;   /* virtual group of an expert unit: W_v / Ep (grouped)  */
  int ep_span;    /* ranks the dispatch spans: Ep (grouped), W_v (the
                     rank view), else the W present ranks                */
} pl_layout_plan;

/* PL_EINVAL naming the values when: D (or P) is < 1, or neither divides W
 * (a real group) nor, times W, divides W_v (a virtual one); W_v is not a
 * multiple of W; n_q or n_kv does not divide by D; S does not divide by D
 * (or S < D); E does not divide by W_v (MoE layers); the model is invalid;
 * Ep < 1, Ep > W_v, Ep < W_v not dividing E, or neither dividing W nor,
 * times W, W_v (train/epgroups.h); rank_view with W > 1 processes in a
 * virtual world (W_v > W). */
pl_status pl_layout_plan_make(const pl_model_cfg *m, const pl_layout_cfg *c,
                              int W, int rank, int64_t S, pl_layout_plan *out);

typedef struct pl_layout {
  pl_layout_plan plan;
  pl_comm *world; /* borrowed                                              */
  pl_comm *sp;    /* the D-group (NULL when D = 1; virtual: plateau/comm.h) */
  pl_comm *ep;    /* expert group: all W ranks (its own communicator), or
                     the Ep consecutive ranks of its group (ep_grouped)   */
  pl_comm *erep;  /* ep_grouped: the ranks holding the same experts (one
                     per expert group, rank ≡ ep_rank mod Ep); else NULL */
  pl_comm *vp;    /* the P-group (Ring-DTP; virtual when p_virtual)        */
  pl_comm *zero;  /* ZeRO-3 of dense units: all W ranks (its own)          */
  pl_comm *hrep;  /* the head shard's replica ranks (W / P of them)        */
  pl_comm *self;  /* this rank alone (a head over the full vocabulary)     */
} pl_layout;

/* Collective over world; each group is a communicator of its own (so the
 * collectives of ZeRO-3, the MoE layer and the head never share one). */
pl_status pl_layout_create(pl_comm *world, const pl_model_cfg *m,
                           const pl_layout_cfg *c, int64_t S, pl_layout **out);
void pl_layout_destroy(pl_layout *l);

#ifdef __cplusplus
}
#endif
#endif
