/* ep.c — standard expert parallelism (see ep.h): the MoE layer with the
 * native placement and no chunking. */
#include "ep.h"

pl_status pl_ep_create(pl_comm *ep, const pl_moe_cfg *cfg, pl_moe **out) {
  pl_moe_cfg c = *cfg;
  c.variant = PL_MOE_EP;
  c.knobs.native = true;
  c.contiguous = false;
  return pl_moe_create(ep, &c, out);
}
