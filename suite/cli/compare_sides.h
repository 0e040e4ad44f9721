/* compare_sides.h — the two sides of `plateau compare` (compare_sides.c):
 * the result files of NEW or REF read into rows keyed by their configuration
 * (each bench's key columns, in name order), and the matching of REF's rows
 * written before a key column existed to NEW's rows.  Internal to the
 * compare command. */
#ifndef PLATEAU_SUITE_CLI_COMPARE_SIDES_H
#define PLATEAU_SUITE_CLI_COMPARE_SIDES_H

#include "plateau/plateau.h"
#include "results/results.h"

typedef struct ent {
  char *key; /* "bench col=val ..." (key columns in name order, "-" left out) */
  pl_table *t; /* the row */
  int r;
  char *relaxed; /* REF: the key columns it lacks, matched by the others */
} ent;

typedef struct side {
  pl_table **t;
  int nt;
  ent *e;
  int ne;
} side;

/* Read every result file of path (a file, or a run directory and its direct
 * subdirectories but report/) into s; PL_OK, or an error naming the path. */
pl_status pl__cmp_side_read(const char *path, side *s);
/* Key both sides' rows by the key columns of every bench either side has,
 * then match REF rows that lack a key column to the one NEW row agreeing on
 * all the others (ent.relaxed says which). */
void pl__cmp_key_both(side *n, side *r);
void pl__cmp_side_free(side *s);

#endif
