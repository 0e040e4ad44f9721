/* timeline.c — a step's time-breakdown events and spans (train/timeline.h). */
#include "train/timeline.h"

#include <stdlib.h>
#include <string.h>

pl_timeline pl_timeline_make(pl_dev *dev, bool on) {
  pl_timeline tl;
  memset(&tl, 0, sizeof tl);
  tl.dev = dev, tl.on = on;
  return tl;
}

pl_status pl_timeline_mark(pl_timeline *tl, pl_stream *s, int *idx) {
  *idx = -1;
  if (!tl->on)
    return PL_OK;
  if (tl->nev == tl->capev) {
    const int cap = tl->capev ? 2 * tl->capev : 64;
    pl_event **e = realloc(tl->ev, (size_t)cap * sizeof *e);
    if (!e)
      return pl_set_error(PL_ENOMEM, "timeline: host");
    for (int i = tl->capev; i < cap; i++)
      e[i] = NULL;
    tl->ev = e, tl->capev = cap;
  }
  if (!tl->ev[tl->nev])
    PL_TRY(pl_event_create(tl->dev, &tl->ev[tl->nev]));
  PL_TRY(pl_event_record(tl->ev[tl->nev], s));
  *idx = tl->nev++;
  return PL_OK;
}

pl_status pl_timeline_span(pl_timeline *tl, int part, int a, int b) {
  if (!tl->on || a < 0 || b < 0)
    return PL_OK;
  if (tl->nsp == tl->capsp) {
    const int cap = tl->capsp ? 2 * tl->capsp : 64;
    pl_timeline_entry *p = realloc(tl->sp, (size_t)cap * sizeof *p);
    if (!p)
      return pl_set_error(PL_ENOMEM, "timeline: host");
    tl->sp = p, tl->capsp = cap;
  }
  tl->sp[tl->nsp++] = (pl_timeline_entry){part, a, b};
  return PL_OK;
}

pl_status pl_timeline_take(pl_timeline *tl, double *part_ms) {
  for (int i = 0; i < tl->nsp; i++) {
    float ms = 0;
    PL_TRY(pl_event_elapsed_ms(tl->ev[tl->sp[i].a], tl->ev[tl->sp[i].b], &ms));
    part_ms[tl->sp[i].part] += ms;
  }
  pl_timeline_clear(tl);
  return PL_OK;
}

void pl_timeline_clear(pl_timeline *tl) {
  tl->nsp = tl->nev = 0;
}

void pl_timeline_free(pl_timeline *tl) {
  for (int i = 0; i < tl->capev; i++)
    if (tl->ev[i])
      pl_event_destroy(tl->ev[i]);
  free(tl->ev);
  free(tl->sp);
  tl->ev = NULL, tl->sp = NULL;
  tl->nev = tl->capev = tl->nsp = tl->capsp = 0;
}
