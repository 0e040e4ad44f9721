/* tensor.c — dtypes and tensors allocated through the tracked allocator. */
#include <string.h>

#include "plateau/tensor.h"

size_t pl_dtype_size(pl_dtype dt) {
  switch (dt) {
  case PL_F32:
    return 4;
  case PL_BF16:
    return 2;
  case PL_I32:
    return 4;
  case PL_I64:
    return 8;
  }
  return 0;
}

const char *pl_dtype_name(pl_dtype dt) {
  switch (dt) {
  case PL_F32:
    return "f32";
  case PL_BF16:
    return "bf16";
  case PL_I32:
    return "i32";
  case PL_I64:
    return "i64";
  }
  return "?";
}

pl_status pl_dtype_parse(const char *s, pl_dtype *out) {
  if (s && (!strcmp(s, "f32") || !strcmp(s, "fp32")))
    *out = PL_F32;
  else if (s && !strcmp(s, "bf16"))
    *out = PL_BF16;
  else if (s && !strcmp(s, "i32"))
    *out = PL_I32;
  else if (s && !strcmp(s, "i64"))
    *out = PL_I64;
  else
    return pl_set_error(
        PL_EINVAL,
        "dtype '%s': not allowed (allowed: f32 | fp32 | bf16 | i32 | i64)",
        s ? s : "");
  return PL_OK;
}

pl_status pl_tensor_alloc(pl_dev *dev, pl_arena arena, pl_dtype dt, int ndim,
                          const int64_t *shape, const char *tag,
                          pl_tensor *out) {
  memset(out, 0, sizeof *out);
  if (ndim < 0 || ndim > PL_MAX_DIMS)
    return pl_set_error(PL_EINVAL, "tensor '%s': ndim=%d (allowed: 0..%d)",
                        tag ? tag : "?", ndim, PL_MAX_DIMS);
  if (pl_dtype_size(dt) == 0)
    return pl_set_error(PL_EINVAL, "tensor '%s': unknown dtype %d",
                        tag ? tag : "?", (int)dt);
  size_t numel = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return pl_set_error(PL_EINVAL,
                          "tensor '%s': shape[%d]=%lld (must be >= 0)",
                          tag ? tag : "?", i, (long long)shape[i]);
    numel *= (size_t)shape[i];
    out->shape[i] = shape[i];
  }
  out->dtype = dt;
  out->ndim = ndim;
  out->arena = arena;
  out->tag = tag;
  out->dev = dev;
  pl_status st =
      pl_alloc(dev, arena, numel * pl_dtype_size(dt), tag, &out->data);
  if (st != PL_OK)
    memset(out, 0, sizeof *out);
  return st;
}

void pl_tensor_free(pl_tensor *t) {
  if (t && t->data)
    pl_free(t->dev, t->data);
  if (t)
    memset(t, 0, sizeof *t);
}

int64_t pl_tensor_numel(const pl_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

size_t pl_tensor_bytes(const pl_tensor *t) {
  return (size_t)pl_tensor_numel(t) * pl_dtype_size(t->dtype);
}
