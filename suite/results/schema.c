/* schema.c — the result schema (schema.def) and the v1 -> v2 mapping table:
 * the one place that knows which column names exist and what the names of
 * version-1 result files (results/reference/ holds many) are called now. */
#include "schema.h"

#include <string.h>

#include "ops/moe.h" /* the dispatch variants' names (schema.def) */

static const pl_col_def cols[] = {
#define COL(name, unit, meaning) {#name, unit, meaning},
#include "schema.def"
#undef COL
};
#define NCOLS ((int)(sizeof cols / sizeof cols[0]))

const pl_col_def *pl_schema_find(const char *name) {
  for (int i = 0; name && i < NCOLS; i++)
    if (strcmp(cols[i].name, name) == 0)
      return &cols[i];
  return NULL;
}

int pl_schema_count(void) {
  return NCOLS;
}

const pl_col_def *pl_schema_at(int i) {
  return i >= 0 && i < NCOLS ? &cols[i] : NULL;
}

void pl_schema_markdown(FILE *f) {
  fprintf(f, "| column | unit | meaning |\n|---|---|---|\n");
  for (int i = 0; i < NCOLS; i++) {
    fprintf(f, "| `%s` | %s | ", cols[i].name, cols[i].unit);
    for (const char *c = cols[i].meaning; *c; c++) { /* '|' escaped */
      if (*c == '|')
        fputc('\\', f);
      fputc(*c, f);
    }
    fprintf(f, " |\n");
  }
}

#define GIB 1073741824.0

/* Version 1 (before one name per quantity): the median time was ms,
 * ms_median, step_ms or grouped_ms; the peak peak_gib or dev_peak_gib (GiB);
 * a2a_gbps; the backend a column; the variant test, algo, mode or layout.
 * Beside these renames the reader adds what v2 has and v1 kept elsewhere:
 * the `bench` column (from the metadata), attention's `kernel` and adam's
 * `cpu_share` (from the v1 note, the only place v1 wrote them;
 * results_read.c). */
static const pl_v1_map v1[] = {
    {"*", "ms", "time_ms", 1},
    {"*", "ms_p10", "time_p10_ms", 1},
    {"*", "ms_p90", "time_p90_ms", 1},
    {"*", "ms_median", "time_ms", 1},
    {"*", "step_ms", "time_ms", 1},
    {"*", "step_p10_ms", "time_p10_ms", 1},
    {"*", "step_p90_ms", "time_p90_ms", 1},
    {"*", "peak_gib", "dev_peak_bytes", GIB},
    {"*", "tflop_s_gpu", "tflops", 1},
    {"*", "a2a_gbps", "a2a_gbs", 1},
    {"*", "host_pinned_bytes", "host_peak_bytes", 1},
    {"*", "pool_high_bytes", "pool_peak_bytes", 1},
    {"*", "backend", NULL, 1}, /* the file's `backend` metadata */
    {"calib", "test", "variant", 1},
    {"dispatch", "op_peak_gib", "op_peak_bytes", GIB},
    {"dispatch", "dispatch_gib", "dispatch_bytes", GIB},
    {"dispatch", "bound_gib", "bound_bytes", GIB},
    {"dispatch", "pool_gib", "pool_peak_bytes", GIB},
    {"moegemm", "kind", "gemm", 1},
    {"moegemm", "layout", "variant", 1},
    {"moegemm", "grouped_ms", "time_ms", 1},
    {"moegemm", "grouped_tflops", "tflops", 1},
    {"sco", "dev_peak_gib", NULL, 1}, /* = dev_peak_bytes */
    {"sco", "boundary_peak_bytes", "boundary_bytes", 1},
    {"sco", "boundary_bound_bytes", "bound_bytes", 1},
    {"maxbatch", "bench", "target", 1},
    {"vocab", "logits_gib", "logits_bytes", GIB},
    {"vocab", "floor_gib", "bound_bytes", GIB},
    {"attention", "algo", "variant", 1},
    {"attention", "attn_ws_gib", "attention_bytes", GIB},
    {"layer", "tokens_per_rank", "tokens", 1},
    {"layer", "H", "hidden", 1},
    {"layer", "I", "ffn", 1},
    {"layer", "attn_gib", "attention_bytes", GIB},
    {"adam", "mode", "variant", 1},
    {"adam", "simd", "kernel", 1},
    {"adam", "staging_bytes", "optim_staging_bytes", 1},
    {"adam", "staging_bound", "bound_bytes", 1},
    {"peer_torch_sdpa", "peer", NULL, 1}, /* = the bench */
    {"peer_torch_sdpa", "backend", "variant", 1},
    {"torch_adamw", "peer", "variant", 1},
};

const pl_v1_map *pl_schema_v1(const char *bench, const char *from) {
  const pl_v1_map *any = NULL;
  for (size_t i = 0; i < sizeof v1 / sizeof v1[0]; i++) {
    if (strcmp(v1[i].from, from) != 0)
      continue;
    if (strcmp(v1[i].bench, bench) == 0)
      return &v1[i];
    if (strcmp(v1[i].bench, "*") == 0)
      any = &v1[i];
  }
  return any;
}
