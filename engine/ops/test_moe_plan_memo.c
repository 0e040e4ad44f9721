/* test_moe_plan_memo.c — a thread's kept counts of routes per chunk
 * (ops/moe_plan_memo.h), the one pass over every route a dry device's MoE
 * plan makes:
 *
 *   chunk_counts_kept  read back for the chunking they were counted in,
 *                      summed for strided chunkings whose count divides it,
 *                      never for another stamp, shape or chunking, nor
 *                      without a stamp. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/check_run.h"
#include "ops/moe_plan_memo.h"

/* counts (K x E) of routes idx (N x k) in K strided or contiguous chunks,
 * by pl_chunk_of's rule */
static void chunk_counts_ref(const int32_t *idx, int64_t N, int k, int E, int K,
                             bool contig, int64_t *cnt) {
  memset(cnt, 0, (size_t)K * E * sizeof *cnt);
  const int64_t ce = (N + K - 1) / K;
  for (int64_t t = 0; t < N; t++)
    for (int j = 0; j < k; j++)
      cnt[(contig ? t / ce : t % K) * E + idx[t * k + j]]++;
}

START_TEST(chunk_counts_kept) {
  enum { N = 1001, k = 2, E = 6 };
  static int32_t idx[N * k];
  uint64_t z = 99;
  for (int i = 0; i < N * k; i++) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    idx[i] = (int32_t)((z >> 33) % E);
  }
  static int64_t want[12 * E], got[12 * E];
  const uint64_t st = 0x5eed0001ull;
  chunk_counts_ref(idx, N, k, E, 12, false, want);
  pl__moe_chunk_counts_keep(st, N, k, E, 12, false, want);
  const int Ks[] = {12, 6, 4, 3, 2};
  for (int i = 0; i < 5; i++) {
    chunk_counts_ref(idx, N, k, E, Ks[i], false, want);
    memset(got, 0x55, sizeof got);
    ck_assert(pl__moe_chunk_counts_find(st, N, k, E, Ks[i], false, got));
    ck_assert_msg(!memcmp(got, want, (size_t)Ks[i] * E * sizeof *got),
                  "K=%d: summed counts differ", Ks[i]);
  }
  ck_assert(!pl__moe_chunk_counts_find(st, N, k, E, 5, false, got));
  ck_assert(!pl__moe_chunk_counts_find(st, N, k, E, 4, true, got));
  ck_assert(!pl__moe_chunk_counts_find(st + 1, N, k, E, 4, false, got));
  ck_assert(!pl__moe_chunk_counts_find(st, N + 1, k, E, 4, false, got));
  ck_assert(!pl__moe_chunk_counts_find(0, N, k, E, 12, false, got));
  pl__moe_chunk_counts_keep(0, N, k, E, 12, false, want); /* no stamp */
  ck_assert(!pl__moe_chunk_counts_find(0, N, k, E, 12, false, got));
}
END_TEST

int main(void) {
  const TTest *tests[] = {chunk_counts_kept, NULL};
  return pl_check_suite("moe_plan_memo", 60, tests, NULL, NULL, CK_FORK, 0) ? 1
                                                                            : 0;
}
