/* agree.c — failure agreement before a collective (plateau/comm.h). */
#include "plateau/comm.h"

pl_status pl_agree(pl_comm *c, pl_status st, const char *who,
                   const char *what) {
  if (!c || pl_comm_size(c) == 1)
    return st;
  int64_t v = st == PL_OK ? 0 : st == PL_ENOMEM ? 1 : 2;
  pl_status cs = pl_host_allreduce_i64(c, &v, 1, PL_RED_MAX);
  if (cs != PL_OK)
    return st != PL_OK ? st : cs;
  if (v == 0)
    return PL_OK;
  if (st != PL_OK)
    return st;
  return pl_set_error(v == 1 ? PL_ENOMEM : PL_ECOMM,
                      "%s: another rank of the group failed (%s) before %s, "
                      "which no rank entered",
                      who, v == 1 ? "out of memory" : "error", what);
}
