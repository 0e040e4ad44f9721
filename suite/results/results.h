/* results.h — result files: one file per run, never overwritten, rows appended
 * atomically.
 *
 * Format (TSV, read directly by awk and gnuplot):
 *   # plateau-results: 2                 <- schema version (schema.h)
 *   # key: value                          <- metadata record (git sha, dirty,
 *   ...                                      backend, device, versions, Slurm
 *                                            ids, UTC start, argv, whitelisted
 *                                            environment)
 *   bench<TAB>col2<TAB>...<TAB>status<TAB>check<TAB>note   <- header: the
 *                                            names of schema.def
 *   v1<TAB>v2...                          <- rows
 *   # end: ok 2026-11-30T05:00:00Z        <- written when the run finishes
 *
 * A file is created with O_EXCL under a unique name
 * <dir>/<stem>.<utcstamp>.<host>.<pid>.<n>.tsv, so concurrent writers (array
 * tasks, ranks of several jobs) never collide.  Each row is one write(2) of a
 * whole line under an exclusive flock; if the file does not end in a newline
 * (a writer killed mid-row), the next writer first terminates the fragment, so
 * the fragment is one malformed line that readers skip and count, and no
 * complete row is ever corrupted.  Readers accept a row only when it ends with
 * a newline and has exactly the header's number of fields.
 *
 * The reader accepts the schema versions it knows (1 and 2) and refuses
 * others; a version-1 table is mapped to the current column names on read
 * (schema.c's table), so every consumer sees one set of names. */
#ifndef PLATEAU_SUITE_RESULTS_H
#define PLATEAU_SUITE_RESULTS_H

#include <stdbool.h>
#include <stddef.h>

#include "plateau/status.h"

typedef struct pl_results pl_results;

/* meta_kv: NULL-terminated array of alternating keys and values.  `columns` is
 * the tab-separated header.  Creates dir (and parents) if needed. */
pl_status pl_results_create(const char *dir, const char *stem,
                            const char *columns, const char *const *meta_kv,
                            pl_results **out);
/* Could pl_results_create make its file in dir?  Checked without creating
 * anything (a probe directory is made and removed at once in the deepest
 * existing ancestor): the path's length (at most PL_RESULTS_DIR_MAX, each
 * name at most NAME_MAX), every existing component a directory, and a new
 * entry creatable there.  PL_EINVAL with a message naming the part that is
 * wrong (the caller prefixes the option). */
#define PL_RESULTS_DIR_MAX 3800
pl_status pl_results_dir_check(const char *dir);
/* Open an existing result file for appending rows (shared by several
 * processes); its header must equal `columns`. */
pl_status pl_results_open_append(const char *path, const char *columns,
                                 pl_results **out);
/* Append one row: `line` holds tab-separated fields, no newline. */
pl_status pl_results_append(pl_results *r, const char *line);
/* Close r and remove its file and the directories pl_results_create made
 * for it (a run that turned out to be a usage error leaves no trace).  NULL
 * r is ignored. */
void pl_results_discard(pl_results *r);
/* Write "# end: <status> <utc>" and close.  NULL r is ignored. */
pl_status pl_results_close(pl_results *r, const char *end_status);
const char *pl_results_path(const pl_results *r);

/* ---- reading ------------------------------------------------------------- */
typedef struct pl_table {
  char *path;
  char *bench; /* the `bench` metadata value ("unknown" if none) */
  int version; /* schema version of the file */
  int ncols;
  char **cols; /* header names                                */
  int nrows;
  char ***rows; /* rows[i][j]                                  */
  int *lines;   /* lines[i]: row i's line number in the file   */
  int nmeta;
  char **meta_keys, **meta_vals;
  int nbad;     /* malformed lines skipped (torn rows)          */
  int finished; /* 1 if an "# end:" line is present            */
} pl_table;

/* Read a result file (version-1 files mapped to the current names); an
 * unknown version or a file without the '# plateau-results:' line is
 * PL_EINVAL with a message. */
pl_status pl_table_read(const char *path, pl_table *out);
void pl_table_free(pl_table *t);
/* Column index by name, or -1. */
int pl_table_col(const pl_table *t, const char *name);
/* Metadata value by key, or NULL. */
const char *pl_table_meta(const pl_table *t, const char *key);

/* The result files of a run directory, sorted by path: every *.tsv in dir
 * and in its subdirectories one level down, report/ left out.  An entry
 * named *.tsv that is not a regular file is listed too (the reader says
 * why it is skipped).  *paths (malloc'd strings, NULL when none) and *n;
 * free with pl_results_scan_free. */
void pl_results_scan(const char *dir, char ***paths, int *n);
void pl_results_scan_free(char **paths, int n);

/* Metadata the harness records for every run: fills a NULL-terminated kv
 * array (static storage, valid until the next call) from the device, the
 * communicator, argv (whole, quoted so that a shell reads it back into the
 * same words) and the environment: only the variables named in results.c's
 * env_recorded (the PLATEAU_* variables the program reads, NCCL's tuning
 * variables, Slurm ids, CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS,
 * OPENBLAS_NUM_THREADS), by exact name, a secret-looking name's value
 * redacted; never the whole environment. */
struct pl_dev;
struct pl_comm;
const char *const *pl_results_meta(struct pl_dev *dev, struct pl_comm *comm,
                                   const char *bench, int argc, char **argv);

/* Internal (tested in test_results.c): does a variable name look like it
 * holds a secret (TOKEN, PASSWORD, SECRET, KEY, CREDENTIAL, AUTH, ...)?
 * The value recorded for variable name[0..len): NULL when not recorded,
 * "<redacted>" for a secret-looking name, else value.  argv as one shell
 * line (malloc'd). */
bool pl__env_secret_like(const char *name, size_t len);
const char *pl__env_recorded(const char *name, size_t len, const char *value);
char *pl__shell_quote_argv(int argc, char **argv);

#endif
