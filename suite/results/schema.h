/* schema.h — the result schema (schema.def): every column name a result file
 * may have, with its unit and meaning, and the one table that maps the
 * column names of version-1 files to the current ones (schema.c).  The
 * harness checks a bench's columns against it; the reader (results_read.c)
 * applies the v1 mapping; `plateau schema` prints it. */
#ifndef PLATEAU_SUITE_SCHEMA_H
#define PLATEAU_SUITE_SCHEMA_H

#include <stdio.h>

/* The schema version result files are written with (`# plateau-results: N`);
 * the reader accepts this one and every older one it maps. */
#define PL_RESULTS_SCHEMA 2

typedef struct pl_col_def {
  const char *name, *unit, *meaning;
} pl_col_def;

/* The column `name`, or NULL when the schema has none. */
const pl_col_def *pl_schema_find(const char *name);
int pl_schema_count(void);
const pl_col_def *pl_schema_at(int i);
/* The schema as a Markdown table (column | unit | meaning), as
 * doc/guide/results.md shows it. */
void pl_schema_markdown(FILE *f);

/* One entry of the v1 -> v2 mapping: in files of `bench` ("*": any bench
 * without an entry of its own for that name), column `from` is column `to`
 * (NULL: dropped, the quantity is elsewhere), its numbers times `scale`. */
typedef struct pl_v1_map {
  const char *bench, *from, *to;
  double scale;
} pl_v1_map;

/* The entry for (bench, v1 column), or NULL when the name is unchanged. */
const pl_v1_map *pl_schema_v1(const char *bench, const char *from);

#endif
