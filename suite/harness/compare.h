/* compare.h — the one comparison every bench's check uses (compare.c), as in
 * llm.c's dev/cuda/common.h validate_result: a result against its reference,
 * element by element, with a tolerance that scales with the dtype and the
 * reduction length, reporting the max abs and rel error and the first bad
 * index.  A bench's check callback fills one pl_check (several comparisons
 * accumulate); the harness agrees it over ranks and writes the row's
 * max_err, check (pass | fail | skip) and, on a failure, the note.
 *
 * Error: normwise, e_i = |got_i - ref_i| / max_j |ref_j| (max |ref| = 0:
 * absolute); max_err of a row is the largest e_i of any comparison.
 * Tolerance (pl_check_tol) for a result stored in dtype dt after fp32
 * accumulations over k terms:
 *     tol = 4 eps(dt) + 2 eps(f32) sqrt(k)
 * eps(f32) = 2^-23, eps(bf16) = 2^-7: a few ulps of the output's rounding,
 * plus the random-walk growth of fp32 rounding over a k-term dot product.
 * k = PL_CHECK_EXACT asks for bit-identical elements (tolerance 0): what
 * deterministic schedules promise (SCO, the optimizer, the CPU backend). */
#ifndef PLATEAU_SUITE_COMPARE_H
#define PLATEAU_SUITE_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plateau/plateau.h"

/* Element types of host arrays under comparison. */
typedef enum pl_elem { PL_ELEM_F32, PL_ELEM_BF16, PL_ELEM_F64 } pl_elem;

#define PL_CHECK_EXACT ((int64_t)-1)

typedef struct pl_check {
  bool compared;     /* something was checked (else the row says skip) */
  bool failed;       /* an element or a condition failed */
  double max_abs;    /* over every comparison */
  double max_rel;    /* normwise; the row's max_err */
  int64_t bad;       /* elements out of tolerance */
  int64_t first_bad; /* their first index in `what`, -1 */
  int first_rank;    /* the rank that saw it (set by the harness) */
  double tol;        /* the tolerance of `what` */
  char what[48];     /* the first failing comparison */
  char why[256];     /* a failing condition (pl_check_that) */
} pl_check;

/* The tolerance above; k < 0 (PL_CHECK_EXACT): 0. */
double pl_check_tol(pl_dtype dt, int64_t k);

/* The element type of a pl_dtype (F32, BF16). */
pl_elem pl_elem_of(pl_dtype dt);

/* Compare n host elements got (type ge) with ref (type re), result dtype dt
 * reduced over k terms (or PL_CHECK_EXACT: bit-identical when ge == re,
 * equal values otherwise).  NaN in got is always bad. */
void pl_check_arrays(pl_check *c, const char *what, const void *got, pl_elem ge,
                     const void *ref, pl_elem re, size_t n, pl_dtype dt,
                     int64_t k);

/* The same against ref_i * rs (a reference known up to a factor: a sum
 * reduction rescaled to a mean). */
void pl_check_scaled(pl_check *c, const char *what, const void *got, pl_elem ge,
                     const void *ref, pl_elem re, double rs, size_t n,
                     pl_dtype dt, int64_t k);

/* The same for two device (or host) tensors of dtype dt: copied to the host
 * on stream s first.  PL_ENOMEM when the host copies do not fit. */
pl_status pl_check_device(pl_check *c, pl_stream *s, const char *what,
                          const void *got, const void *ref, pl_dtype dt,
                          size_t n, int64_t k);

/* got (n f32 on the host) against the counter-RNG draws it must hold, bit
 * for bit: element i of block b (len elements each) is
 * pl_rng_uniform(seed, offs[b] + i, -1, 1). */
void pl_check_draws(pl_check *c, const char *what, const float *got, size_t n,
                    size_t len, uint64_t seed, const uint64_t *offs);

/* C = A·B, row-major G x G host arrays of dtype dt: ns sampled entries (the
 * first and the last always, the others at positions drawn from seed)
 * against a double dot product of the same inputs; reduction length G. */
void pl_check_gemm(pl_check *c, const char *what, const void *A, const void *B,
                   const void *C, pl_dtype dt, int64_t G, int ns,
                   uint64_t seed);

/* A condition of the result that is not an element comparison (a peak
 * within its bound, a clip factor): counts as checked; false fails the row
 * with the reason printf(fmt, ...). */
void pl_check_that(pl_check *c, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the harness ------------------------------------------------------------
 */
/* Combine every rank's check (max errors, any failure, the first bad index
 * of the lowest failing rank, its reason). */
pl_status pl_check_agree(pl_comm *comm, pl_check *c);
/* "CHECK FAILED: ..." for the note of a failing row ("" otherwise). */
void pl_check_note(const pl_check *c, char *buf, size_t n);

#endif
