/* ring_dtp_internal.h — what the two files of the Ring-DTP operator
 * (ops/ring_dtp.h) share; not installed.  The operator is split at its seam:
 *   ring_dtp_create.c  the object: options, names, the agreement of the
 *                      group's inputs, the shard and mode arithmetic, the
 *                      kept-strip plan, create / destroy and the accessors;
 *   ring_dtp.c         the schedules: the ring driver, the four passes'
 *                      meetings, pl_dtp_forward / _backward / _run. */
#ifndef PLATEAU_OPS_RING_DTP_INTERNAL_H
#define PLATEAU_OPS_RING_DTP_INTERNAL_H

#include <stdbool.h>

#include "ops/ring_dtp.h"

struct pl_dtp {
  pl_comm *comm;
  pl_dev *dev;
  int p, r;
  pl_dtype dt;
  int64_t n, h, v;
  pl_dtp_opts o;
  pl_dtp_mode mode;
  int64_t *ns;          /* tokens of every rank (host)                 */
  int64_t *col0s, *vss; /* shard of every rank                         */
  int64_t nmax, vmax, vb;
  int64_t nc;    /* rows per chunk of the bf16 move-W backward  */
  pl_stream *cs; /* comm stream (== compute stream if !overlap) */
  pl_event *ev_go, *ev_pay, *ev_acc;
  float *aux;   /* 2·n: lse | g (saved by the forward)         */
  float *stats; /* 2: the group's Σ nll, count                 */
  int have_fwd;
  size_t sent_fwd, sent_bwd;
  pl_dtp_sched sched; /* of pl_dtp_run (resolved)                    */
  /* kept strips: slot s·ns + c is strip c of the meeting at step s */
  int64_t nstrip;      /* strips per meeting, at most                 */
  unsigned char *keep; /* P·ns: the plan (1: kept)                    */
  float **kept;        /* P·ns: the forward's buffers, or NULL        */
  int64_t nkept;
  size_t kept_bytes;
};

/* Rows and shard width of the meeting at step s (visitor (r − s) mod P). */
static inline void pl__dtp_meeting_shape(const pl_dtp *d, int s, int64_t *rows,
                                         int64_t *width) {
  int j = ((d->r - s) % d->p + d->p) % d->p;
  const bool act = d->mode == PL_DTP_MOVE_ACT || d->p == 1;
  *rows = act ? d->ns[j] : d->n;
  *width = act ? d->vss[d->r] : d->vss[j];
}

#endif
