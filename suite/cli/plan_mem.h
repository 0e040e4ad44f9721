/* plan_mem.h — `plateau plan`'s memory output (plan_mem.c): the byte counts
 * in words, the live set, the result-schema TSV row, and --memory dry|both
 * (the chosen configuration's peaks measured on a dry device, and their
 * comparison with the replay).  Internal to suite/cli. */
#ifndef PLATEAU_SUITE_PLAN_MEM_H
#define PLATEAU_SUITE_PLAN_MEM_H

#include <stdbool.h>
#include <stdio.h>

#include "plan/plan.h"

/* v bytes in words: "36.64 GiB", "12.00 MiB", "8 B". */
const char *pl__plan_hb(double v, char *buf, size_t n);
/* The live set at the peak, largest first: "tag=36.64 GiB ..." for the
 * table; compact ("tag=36.64GiB", single spaces), for --format tsv. */
void pl__plan_live_set(const pl_plan_mem *mem, bool compact, char *buf,
                       size_t n);
/* The plan as one row of the result schema's names, with its header. */
void pl__plan_print_tsv(FILE *f, const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_machine *mc, const pl_plan_verdict *v,
                        const pl_plan_time *t);

/* --memory dry|both on the configuration c the plan chose (v: its replayed
 * verdict): the peaks of one rank measured on a dry device
 * (pl_plan_memory_dry) into *dm, *built the configuration built (c, or the
 * one-GPU proxy of c's run), measured twice (balanced routes, then
 * adversarial ones for the worst case).  replace: v->mem becomes the
 * measured one (peaks, live set, tags, terms, phase, states, host, facts;
 * the host per node of c's node) but for dev_worst, which stays the
 * replay's (one process is not sent every other rank's routes), and a
 * measured peak that does not fit makes the verdict not fit.  0, or 3 with the
 * reason on stderr (the configuration cannot be built or stepped on a dry
 * device).  One the dry device does not measure (PL_EUNSUPPORTED: imb
 * above 1), or one the replay already finds too large that a
 * dry device cannot even hold (out of address space or host memory), gives
 * 0 with dm->steps 0 and the reason in why_not (n bytes): the replay's
 * verdict stands. */
int pl__plan_dry(const pl_model_cfg *m, const pl_plan_cfg *c,
                 const pl_plan_machine *mc, bool replace, pl_plan_verdict *v,
                 pl_plan_dry_mem *dm, pl_plan_cfg *built, char *why_not,
                 size_t n);
/* After the table: how the memory above was measured (--memory dry), or
 * (both) the replay of *built against the measurement: the device and
 * pinned host peaks and the tags that differ most, at the peak and each
 * tag's own peak, then every field of the two pl_plan_mem
 * (pl_plan_mem_diff: terms, phase, worst case, host, facts).  A proxy's replay
 * is set beside that of the real run's rank (c).  dm->steps 0: that the
 * memory above is the replay's, and why_not. */
void pl__plan_dry_print(FILE *f, const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_cfg *built, const pl_plan_machine *mc,
                        const pl_plan_verdict *v, const pl_plan_dry_mem *dm,
                        bool both, const char *why_not);

#endif
