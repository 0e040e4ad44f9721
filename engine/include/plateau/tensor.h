/* tensor.h — dtypes and tensors (up to 4 dims) in a tracked arena.
 *
 * A pl_tensor is a plain struct (no reference counting): data pointer, dtype,
 * shape, arena, tag and the device it lives on.  Row-major, contiguous. */
#ifndef PLATEAU_TENSOR_H
#define PLATEAU_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "plateau/dev.h"
#include "plateau/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_dtype {
  PL_F32 = 0,
  PL_BF16 = 1,
  PL_I32 = 2,
  PL_I64 = 3,
} pl_dtype;

#define PL_MAX_DIMS 4

typedef struct pl_tensor {
  void *data;
  pl_dtype dtype;
  int ndim;
  int64_t shape[PL_MAX_DIMS];
  pl_arena arena;
  const char *tag;
  pl_dev *dev;
} pl_tensor;

size_t pl_dtype_size(pl_dtype dt);
const char *pl_dtype_name(pl_dtype dt);
/* Parse "f32" | "fp32" | "bf16" | "i32" | "i64". */
pl_status pl_dtype_parse(const char *s, pl_dtype *out);

/* Allocate a tensor; shape entries must be >= 0 (0 gives an empty tensor). */
pl_status pl_tensor_alloc(pl_dev *dev, pl_arena arena, pl_dtype dt, int ndim,
                          const int64_t *shape, const char *tag,
                          pl_tensor *out);
/* Free and zero the struct (NULL data is ignored). */
void pl_tensor_free(pl_tensor *t);
int64_t pl_tensor_numel(const pl_tensor *t);
size_t pl_tensor_bytes(const pl_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
