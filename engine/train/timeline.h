/* timeline.h — the events and spans of a training step's time breakdown
 * (train/step.h's parts), for the trainer and the FSDP2 baseline alike: an
 * event recorded on a stream at each mark, a span naming the part that ran
 * from one mark to another, the spans' times added up once the device has
 * finished them.  Off (profile off): every call is a no-op and a mark is -1.
 * Events are kept for reuse from step to step. */
#ifndef PLATEAU_TRAIN_TIMELINE_H
#define PLATEAU_TRAIN_TIMELINE_H

#include <stdbool.h>

#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_timeline_entry {
  int part, a, b; /* part index; the marks it ran between */
} pl_timeline_entry;

typedef struct pl_timeline {
  pl_dev *dev;
  bool on;
  pl_event **ev;
  int nev, capev;
  pl_timeline_entry *sp;
  int nsp, capsp;
} pl_timeline;

/* An empty timeline on dev (on: profile). */
pl_timeline pl_timeline_make(pl_dev *dev, bool on);
/* Record an event on s; *idx its mark (-1 when off). */
pl_status pl_timeline_mark(pl_timeline *tl, pl_stream *s, int *idx);
/* Part `part` lasted from mark a to mark b (ignored when off or a mark is
 * -1). */
pl_status pl_timeline_span(pl_timeline *tl, int part, int a, int b);
/* Add each span's time into part_ms[part] (the device has finished them)
 * and start over. */
pl_status pl_timeline_take(pl_timeline *tl, double *part_ms);
/* Start over without reading the spans (a new step). */
void pl_timeline_clear(pl_timeline *tl);
void pl_timeline_free(pl_timeline *tl);

#ifdef __cplusplus
}
#endif
#endif
