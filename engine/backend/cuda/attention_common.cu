/* attention_common.cu — what the CUDA attention's launcher (attention.cu)
 * and its kernel files share (attention_common.cuh): the launch check and
 * the TMA descriptor of a [B][S][heads][128] bf16 tensor.  Below both: the
 * launcher calls the kernel files, and they call only this. */
#include "backend/cuda/attention_common.cuh"

/* PL_OK, or PL_ERUNTIME naming `what` when the last launch failed */
pl_status pl__attn_launched(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention: %s: %s", what,
                        cudaGetErrorString(e));
  return PL_OK;
}

/* *m = the TMA descriptor of a [B][S][heads][128] bf16 tensor at ptr, box
 * rows × 64 (see AttnTma); the driver's encoder is found through the
 * runtime (no libcuda link) */
pl_status pl__attn_tma_map_bshd(CUtensorMap *m, const void *ptr, int heads,
                                int S, unsigned B, int rows) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
  if (!encode) {
    cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    cudaError_t e = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn)
      return pl_set_error(
          PL_ERUNTIME, "attention (tma): cuTensorMapEncodeTiled not found: %s",
          cudaGetErrorString(e));
    encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
  }
  const cuuint64_t dims[4] = {128, (cuuint64_t)heads, (cuuint64_t)S, B};
  const cuuint64_t strides[3] = {128 * 2, (cuuint64_t)heads * 128 * 2,
                                 (cuuint64_t)S * heads * 128 * 2};
  const cuuint32_t box[4] = {64, 1, (cuuint32_t)rows, 1},
                   estr[4] = {1, 1, 1, 1};
  CUresult r =
      encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void *>(ptr),
             dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return pl_set_error(PL_ERUNTIME,
                        "attention (tma): cuTensorMapEncodeTiled: error %d",
                        (int)r);
  return PL_OK;
}
