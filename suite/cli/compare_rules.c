/* compare_rules.c — how `plateau compare` (compare_cmd.c) treats a result
 * column: its class (configuration key, time, rate, memory, capacity, or
 * ignored), and the tolerance of each metric from the `--tol` specs, the
 * tolerance files and the defaults of compare_cmd.h.  The command itself
 * (reading, matching, printing) is compare_cmd.c. */
#include "compare_cmd.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "plateau/plateau.h"
#include "results/results_internal.h"

/* ---- classes ----------------------------------------------------------------
 */
typedef struct cls {
  const char *col;
  pl_cmp_class c;
} cls;

/* Every schema column, once.  KEY: what was asked or the shape (the schema's
 * identity section, without what a run decided: kernel, mode).  Columns a run
 * decides or counts (K, pieces, ...), analytic values that follow from the
 * key, text and trial bookkeeping are IGNORE. */
static const cls classes[] = {
    {"bench", PL_CMP_KEY},
    {"variant", PL_CMP_KEY},
    {"kernel", PL_CMP_IGNORE},
    {"ranks", PL_CMP_KEY},
    {"rank", PL_CMP_KEY},
    {"dtype", PL_CMP_KEY},
    {"tokens", PL_CMP_KEY},
    {"hidden", PL_CMP_KEY},
    {"ffn", PL_CMP_KEY},
    {"vocab", PL_CMP_KEY},
    {"experts", PL_CMP_KEY},
    {"topk", PL_CMP_KEY},
    {"layers", PL_CMP_KEY},
    {"seq", PL_CMP_KEY},
    {"batch", PL_CMP_KEY},
    {"n_q", PL_CMP_KEY},
    {"n_kv", PL_CMP_KEY},
    {"d", PL_CMP_KEY},
    {"pass", PL_CMP_KEY},
    {"mask", PL_CMP_KEY},
    {"params", PL_CMP_KEY},
    {"bytes", PL_CMP_KEY},
    {"mnk", PL_CMP_KEY},
    {"gemm", PL_CMP_KEY},
    {"gemm_api", PL_CMP_KEY},
    {"profile", PL_CMP_KEY},
    {"chunking", PL_CMP_KEY},
    {"lanes", PL_CMP_KEY},
    {"comm_blocks", PL_CMP_KEY},
    {"cap", PL_CMP_KEY},
    {"block", PL_CMP_KEY},
    {"mode", PL_CMP_IGNORE},
    {"release", PL_CMP_KEY},
    {"budget", PL_CMP_KEY},
    {"optim_resident", PL_CMP_KEY},
    {"keep", PL_CMP_KEY},
    {"budget_bytes", PL_CMP_IGNORE},
    {"bucket", PL_CMP_KEY},
    {"slots", PL_CMP_KEY},
    {"grad", PL_CMP_KEY},
    {"share", PL_CMP_KEY},
    {"threads", PL_CMP_KEY},
    {"gqa", PL_CMP_KEY},
    {"target", PL_CMP_KEY},
    {"kind", PL_CMP_KEY},
    {"system", PL_CMP_KEY},
    {"model", PL_CMP_KEY},
    {"D", PL_CMP_KEY},
    {"P", PL_CMP_KEY},
    {"virtual_world", PL_CMP_KEY},
    {"micro", PL_CMP_KEY},
    {"cp", PL_CMP_KEY},
    {"ep", PL_CMP_KEY},
    {"ac", PL_CMP_KEY},
    {"math", PL_CMP_KEY},
    {"strip_budget_bytes", PL_CMP_KEY},
    {"kept_strips", PL_CMP_IGNORE},
    {"dispatch", PL_CMP_KEY},
    {"head", PL_CMP_KEY},
    {"optim", PL_CMP_KEY},
    {"step_tokens", PL_CMP_IGNORE}, /* micro x N x W_v: from the key */
    {"params_total", PL_CMP_IGNORE},
    {"params_active", PL_CMP_IGNORE},
    {"attention_ms", PL_CMP_TIME},
    {"moe_ms", PL_CMP_TIME},
    {"head_ms", PL_CMP_TIME},
    {"optimizer_ms", PL_CMP_TIME},
    {"recompute_ms", PL_CMP_TIME},
    {"zero3_ms", PL_CMP_TIME},
    {"expert_units_ms", PL_CMP_TIME},
    {"sco_ms", PL_CMP_TIME},
    {"other_ms", PL_CMP_IGNORE}, /* a difference of the others */
    /* a proxy's stand-ins (copies, not a metric), its measured step without
     * them, and what the planner's link model adds to it (the projection
     * follows compute_ms and the machine's calibration) */
    {"standin_ms", PL_CMP_IGNORE},
    {"standin_side_ms", PL_CMP_IGNORE},
    {"compute_ms", PL_CMP_TIME},
    {"comm_model_ms", PL_CMP_IGNORE},
    {"step_proj_ms", PL_CMP_IGNORE},
    {"pred_proj_ms", PL_CMP_IGNORE},
    {"tok_s_gpu_proj", PL_CMP_IGNORE},
    {"tok_s_gpu_proj_lo", PL_CMP_IGNORE},
    {"tok_s_gpu_proj_hi", PL_CMP_IGNORE},
    {"tflops_proj", PL_CMP_IGNORE},
    {"gemm_tflops", PL_CMP_IGNORE}, /* the rate mfu is taken against */
    {"mfu", PL_CMP_IGNORE},         /* tflops decides */
    {"loss", PL_CMP_IGNORE},
    {"losses", PL_CMP_IGNORE},
    {"K", PL_CMP_IGNORE},
    {"c_eff", PL_CMP_IGNORE},
    {"groups", PL_CMP_IGNORE},
    {"rows", PL_CMP_IGNORE},
    {"selected", PL_CMP_IGNORE},
    {"resident_params", PL_CMP_IGNORE}, /* decided by the budget */
    {"kept_attn", PL_CMP_IGNORE},
    {"kept_full", PL_CMP_IGNORE},
    {"planned", PL_CMP_IGNORE},
    {"pieces", PL_CMP_IGNORE},
    {"spilled", PL_CMP_IGNORE},
    {"imb_before", PL_CMP_IGNORE},
    {"imb_after", PL_CMP_IGNORE},
    {"overlapped", PL_CMP_IGNORE},
    {"overlapped_bwd", PL_CMP_IGNORE},
    {"gemms", PL_CMP_IGNORE},
    {"em_chunks", PL_CMP_IGNORE},
    {"wgrad_passes", PL_CMP_IGNORE},
    {"max_send_ratio", PL_CMP_IGNORE},
    {"routes_moved", PL_CMP_IGNORE},
    {"stages", PL_CMP_IGNORE},
    {"hop_bytes", PL_CMP_IGNORE},
    {"sent_bytes", PL_CMP_IGNORE},
    {"cpu_share", PL_CMP_IGNORE},
    {"flops", PL_CMP_IGNORE},
    {"exit_code", PL_CMP_IGNORE},
    {"max_ok_tokens", PL_CMP_CAPACITY},
    {"first_fail_tokens", PL_CMP_IGNORE},
    {"trials", PL_CMP_IGNORE},
    {"trial_file", PL_CMP_IGNORE},
    {"time_ms", PL_CMP_TIME},
    {"time_p10_ms", PL_CMP_IGNORE}, /* the spread of time_ms */
    {"time_p90_ms", PL_CMP_IGNORE},
    {"fwd_ms", PL_CMP_TIME},
    {"dense_ms", PL_CMP_TIME},
    {"a2a_ms", PL_CMP_TIME},
    {"gpu_ms", PL_CMP_TIME},
    {"cpu_ms", PL_CMP_TIME},
    {"update_ms", PL_CMP_TIME},
    {"floor_ms", PL_CMP_IGNORE}, /* from the link rates below */
    /* the planner's predictions beside a train row: they follow the
     * machine's calibration, and the plan's own tests hold them */
    {"pred_dev_peak_bytes", PL_CMP_IGNORE},
    {"pred_host_bytes", PL_CMP_IGNORE},
    {"pred_time_ms", PL_CMP_IGNORE},
    {"tflops", PL_CMP_RATE},
    {"dense_tflops", PL_CMP_RATE},
    {"ratio", PL_CMP_RATE},
    {"tok_s_gpu", PL_CMP_RATE},
    {"gparam_s", PL_CMP_RATE},
    {"algbw_gbs", PL_CMP_RATE},
    {"busbw_gbs", PL_CMP_RATE},
    {"a2a_gbs", PL_CMP_RATE},
    {"acc_gbs", PL_CMP_RATE},
    {"h2d_gbs", PL_CMP_RATE},
    {"d2h_gbs", PL_CMP_RATE},
    {"link_h2d_gbs", PL_CMP_RATE},
    {"link_d2h_gbs", PL_CMP_RATE},
    {"link_bidir_gbs", PL_CMP_RATE},
    {"pct_floor", PL_CMP_IGNORE}, /* floor_ms / time_ms: time_ms decides */
    {"mem_copy_gbs", PL_CMP_RATE},
    {"joint_floor_ms", PL_CMP_IGNORE}, /* from the measured rates */
    {"pct_joint_floor", PL_CMP_IGNORE},
    {"host_bpp", PL_CMP_IGNORE},    /* analytic, from the variant */
    {"mem_roof_ms", PL_CMP_IGNORE}, /* from the measured copy rate */
    {"pct_mem_roof", PL_CMP_IGNORE},
    {"pct_update_roof", PL_CMP_IGNORE},
    {"dev_peak_bytes", PL_CMP_MEMORY},
    {"op_peak_bytes", PL_CMP_MEMORY},
    {"host_peak_bytes", PL_CMP_MEMORY},
    {"pool_peak_bytes", PL_CMP_MEMORY},
    {"live_set", PL_CMP_IGNORE},
    {"dispatch_bytes", PL_CMP_MEMORY},
    {"logits_bytes", PL_CMP_MEMORY},
    {"boundary_bytes", PL_CMP_MEMORY},
    {"attention_bytes", PL_CMP_MEMORY},
    {"optim_staging_bytes", PL_CMP_MEMORY},
    {"kept_bytes", PL_CMP_MEMORY},
    {"bound_bytes", PL_CMP_MEMORY},
    {"host_bytes", PL_CMP_MEMORY},
    {"max_err", PL_CMP_IGNORE}, /* the check column judges it */
    {"status", PL_CMP_IGNORE},  /* compared on its own: ok must stay ok */
    {"check", PL_CMP_IGNORE},   /* pass must stay pass */
    {"note", PL_CMP_IGNORE},
};
#define NCLASSES ((int)(sizeof classes / sizeof classes[0]))

pl_cmp_class pl__compare_class(const char *col) {
  for (int i = 0; i < NCLASSES; i++)
    if (strcmp(classes[i].col, col) == 0)
      return classes[i].c;
  return PL_CMP_UNKNOWN;
}

const char *const pl__compare_kind_names[] = {
    "-", "key", "time", "rate", "memory", "capacity", "?"};

/* ---- tolerances -------------------------------------------------------------
 */
/* "[bench:]name=value": value "skip", "5%", "0.05" or "0". */
pl_status pl__compare_tol_parse(const char *spec_in, const char *where,
                                pl__compare_tols *ts) {
  char spec[256]; /* blanks around the name, '=' and the value dropped */
  size_t k = 0;
  for (const char *c = spec_in; *c && k + 1 < sizeof spec; c++)
    if (*c != ' ' && *c != '\t')
      spec[k++] = *c;
  spec[k] = '\0';
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || !eq[1])
    return pl_set_error(PL_EINVAL,
                        "%s: tolerance '%s' is not [BENCH:]METRIC=VALUE "
                        "(VALUE 5%%, 0.05, 0 or skip)",
                        where, spec);
  pl__compare_tol t;
  memset(&t, 0, sizeof t);
  const char *colon = memchr(spec, ':', (size_t)(eq - spec));
  const char *name = colon ? colon + 1 : spec;
  if (colon)
    snprintf(t.bench, sizeof t.bench, "%.*s", (int)(colon - spec), spec);
  snprintf(t.name, sizeof t.name, "%.*s", (int)(eq - name), name);
  bool kind = false;
  for (int k = PL_CMP_TIME; k <= PL_CMP_CAPACITY; k++)
    kind |= strcmp(t.name, pl__compare_kind_names[k]) == 0;
  pl_cmp_class c = pl__compare_class(t.name);
  if (!kind && c != PL_CMP_TIME && c != PL_CMP_RATE && c != PL_CMP_MEMORY &&
      c != PL_CMP_CAPACITY)
    return pl_set_error(PL_EINVAL,
                        "%s: tolerance '%s': '%s' is neither a metric column "
                        "nor a kind (time, rate, memory, capacity)",
                        where, spec, t.name);
  const char *v = eq + 1;
  if (strcmp(v, "skip") == 0) {
    t.v = -1;
  } else {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    bool pct = *end == '%';
    if (pct)
      end++;
    if (errno || end == v || *end || !isfinite(x) || x < 0)
      return pl_set_error(PL_EINVAL,
                          "%s: tolerance '%s': value '%s' is not 5%%, 0.05, "
                          "0 or skip",
                          where, spec, v);
    t.v = pct ? x / 100.0 : x;
  }
  ts->v = realloc(ts->v, sizeof *ts->v * (size_t)(ts->n + 1));
  PL_ASSERT(ts->v != NULL);
  ts->v[ts->n++] = t;
  return PL_OK;
}

pl_status pl__compare_tol_file(const char *path, pl__compare_tols *ts) {
  /* a regular file only: a FIFO would block the read, a directory is no
   * list of tolerances (both: bad input) */
  struct stat sb;
  if (stat(path, &sb) != 0)
    return pl_set_error(PL_EIO, "tolerance file %s: %s", path, strerror(errno));
  pl_status ost;
  FILE *f = S_ISREG(sb.st_mode) ? pl__results_open_regular(path, &ost) : NULL;
  if (!f && (!S_ISREG(sb.st_mode) || ost == PL_EINVAL))
    return pl_set_error(PL_EINVAL, "tolerance file %s: not a regular file (%s)",
                        path,
                        S_ISDIR(sb.st_mode)    ? "a directory"
                        : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                               : "a device or socket");
  if (!f)
    return pl_error_prefix(PL_EIO, "tolerance file ");
  char line[512], where[PATH_MAX + 32];
  int n = 0;
  pl_status st = PL_OK;
  while (st == PL_OK && fgets(line, sizeof line, f)) {
    n++;
    char *s = line;
    while (*s == ' ' || *s == '\t')
      s++;
    s[strcspn(s, "#\r\n")] = '\0';
    for (size_t k = strlen(s); k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t');)
      s[--k] = '\0';
    if (!*s)
      continue;
    snprintf(where, sizeof where, "%s:%d", path, n);
    st = pl__compare_tol_parse(s, where, ts);
  }
  fclose(f);
  return st;
}

/* The tolerance of (bench, metric of kind c): the last matching spec of the
 * most specific level wins; -1 skip. */
double pl__compare_tol_of(const pl__compare_tols *ts, const char *bench,
                          const char *metric, pl_cmp_class c) {
  const char *kind = pl__compare_kind_names[c];
  for (int level = 0; level < 4; level++)
    for (int i = ts->n - 1; i >= 0; i--) {
      const pl__compare_tol *t = &ts->v[i];
      bool b = level < 2 ? strcmp(t->bench, bench) == 0 : !t->bench[0];
      bool m = level % 2 == 0 ? strcmp(t->name, metric) == 0
                              : strcmp(t->name, kind) == 0;
      if (b && m)
        return t->v;
    }
  if (strcmp(metric, "pool_peak_bytes") == 0)
    return 0.05;
  return c == PL_CMP_TIME || c == PL_CMP_RATE ? 0.05 : 0.0;
}
