/* agree.c — failure agreement before a collective (agree.h): the engine's
 * pl_agree, the collective named without its article. */
#include "agree.h"

#include <stdio.h>

pl_status pl_bl_agree(pl_comm *c, pl_status st, const char *who,
                      const char *what) {
  char the[160];
  snprintf(the, sizeof the, "the %s", what);
  return pl_agree(c, st, who, the);
}
