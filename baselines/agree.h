/* agree.h — failure agreement before a collective, for the baselines.
 *
 * A rank that failed locally (a tracked allocation over its arena's limit, a
 * kernel launch) must not leave the other ranks of its group waiting in the
 * next collective until the watchdog ends the job.  Every rank calls
 * pl_bl_agree with its status so far right before the collective, whatever
 * happened before (a failed rank skips its own work but never an agreement):
 * one host all-reduce of an int64 over the group, no device sync.  Where
 * every rank is fine it returns PL_OK and the collective runs; otherwise no
 * rank enters it.  A failed rank keeps its own status and message; the
 * others get PL_ENOMEM or PL_ECOMM saying that another rank of the group
 * failed before the collective `what`, prefixed by `who`. */
#ifndef PLATEAU_BASELINES_AGREE_H
#define PLATEAU_BASELINES_AGREE_H

#include "plateau/comm.h"

pl_status pl_bl_agree(pl_comm *c, pl_status st, const char *who,
                      const char *what);

#endif
