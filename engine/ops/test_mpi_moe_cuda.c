/* test_mpi_moe_cuda.c — the MoE exactness and bound tests of test_mpi_moe.c
 * on the CUDA backend (one GPU per rank; bf16 and f32 against the CPU dense
 * reference within dtype-scaled tolerances, K = 1 equal to llep bit for bit,
 * the dispatch bound from the tracked allocator).  Prints "skipped: no CUDA
 * device" and passes when the node has fewer GPUs than ranks. */
#define MOE_TEST_CUDA 1
#include "test_mpi_moe.c"
