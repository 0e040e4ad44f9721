/* plan_mem.c — `plateau plan`'s memory output (plan_mem.h): the byte counts
 * in words, the live set at the peak, the result-schema TSV row, and how
 * the memory was measured. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_mem.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

const char *pl__plan_hb(double v, char *buf, size_t n) {
  if (v >= GIB)
    snprintf(buf, n, "%.2f GiB", v / GIB);
  else if (v >= 1024.0 * 1024)
    snprintf(buf, n, "%.2f MiB", v / (1024.0 * 1024));
  else if (v >= 1024.0)
    snprintf(buf, n, "%.2f KiB", v / 1024.0);
  else
    snprintf(buf, n, "%.0f B", v);
  return buf;
}

/* The live set at the peak, largest first: "tag=36.64 GiB ..." for the
 * table; compact, as the result files' live_set column writes it
 * ("tag=36.64GiB", items separated by single spaces, no tab or comma in a
 * value), for --format tsv. */
void pl__plan_live_set(const pl_plan_mem *mem, bool compact, char *buf,
                       size_t n) {
  int order[PL_PLAN_MAX_TAGS], k = 0;
  for (int i = 0; i < mem->n_tags; i++)
    if (mem->at_peak[i].bytes)
      order[k++] = i;
  for (int i = 0; i < k; i++) /* largest first */
    for (int j = i + 1; j < k; j++)
      if (mem->at_peak[order[j]].bytes > mem->at_peak[order[i]].bytes) {
        int t = order[i];
        order[i] = order[j], order[j] = t;
      }
  buf[0] = 0;
  for (int i = 0; i < k; i++) {
    char item[64], h[24];
    pl__plan_hb((double)mem->at_peak[order[i]].bytes, h, sizeof h);
    char *sp = compact ? strchr(h, ' ') : NULL;
    if (sp) /* "36.64 GiB" -> "36.64GiB" */
      memmove(sp, sp + 1, strlen(sp));
    snprintf(item, sizeof item, "%s%s=%s", i ? " " : "",
             mem->at_peak[order[i]].tag, h);
    strncat(buf, item, n - strlen(buf) - 1);
  }
}

/* the tags the result schema has a <tag>_bytes column for (each tag's own
 * peak); the terms follow as term_<term>_bytes */
static const char *const schema_tags[] = {"dispatch", "logits", "boundary",
                                          "attention", "optim_staging"};
#define NSCHEMA 5

/* the result schema's names where they apply */
void pl__plan_print_tsv(FILE *f, const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_machine *mc, const pl_plan_verdict *v,
                        const pl_plan_time *t) {
  const pl_plan_mem *mem = &v->mem;
  fprintf(f, "bench\tvariant\tmodel\tranks\tgpus_per_node\tseq\ttokens\t"
             "tokens_step\tconfig\tstatus\tbinding\tdev_peak_bytes\t"
             "dev_worst_bytes\thbm_bytes\thost_node_bytes\thost_bytes\t");
  for (int i = 0; i < NSCHEMA; i++)
    fprintf(f, "%s_bytes\t", schema_tags[i]);
  for (int i = 0; i < PL_TERM_COUNT; i++)
    fprintf(f, "term_%s_bytes\t", pl_plan_term_name(i));
  fprintf(f, "time_ms\ttok_s_gpu\ttflops\tmfu\t");
  for (int i = 0; i < PL_TPART_COUNT; i++)
    fprintf(f, "%s_ms\t", pl_plan_tpart_name(i));
  fprintf(f, "live_set\tnote\n");
  char cfg[256], live[1024];
  pl_plan_cfg_str(c, cfg, sizeof cfg);
  pl__plan_live_set(mem, true, live, sizeof live);
  fprintf(f,
          "plan\t%s\t%s\t%d\t%d\t%lld\t%lld\t%lld\t%s\t%s\t%s\t%zu\t%zu\t%.0f\t"
          "%zu\t%.0f\t",
          pl_plan_system_name(c->system), m->name, c->W, mc->gpus_per_node,
          (long long)c->S, (long long)pl_plan_tokens_per_rank(c),
          (long long)pl_plan_tokens_per_step(c), cfg,
          v->fits ? "ok" : "infeasible", v->binding[0] ? v->binding : "-",
          mem->dev_peak, mem->dev_worst, pl_plan_hbm_usable(mc), mem->host_node,
          mc->host_bytes - mc->host_reserve);
  for (int i = 0; i < NSCHEMA; i++)
    fprintf(f, "%zu\t", pl_plan_mem_tag_peak(mem, schema_tags[i]));
  for (int i = 0; i < PL_TERM_COUNT; i++)
    fprintf(f, "%zu\t", mem->term_peak[i]);
  if (v->fits)
    fprintf(f, "%.3f\t%.1f\t%.1f\t%.4f\t", t->step_s * 1e3, t->tok_s_gpu,
            t->tflops_gpu, t->mfu);
  else
    fprintf(f, "-\t-\t-\t-\t");
  for (int i = 0; i < PL_TPART_COUNT; i++) {
    if (v->fits)
      fprintf(f, "%.3f\t", t->part_s[i] * 1e3);
    else
      fprintf(f, "-\t");
  }
  fprintf(f, "%s\tprojection; peak at %s%s\n", live[0] ? live : "-",
          mem->peak_phase,
          c->system == PL_PLAN_PLATEAU && v->fits && !v->fits_worst
              ? "; adversarial routing does not fit (dev_worst_bytes)"
              : "");
}

/* ---- --memory dry | both -------------------------------------------------
 */

void pl__plan_measured_print(FILE *f, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, const pl_plan_search *s,
                             double seconds) {
  fprintf(f,
          "\nmemory above: measured by one step of the %s on a dry device "
          "(%s)\n",
          c->system == PL_PLAN_PLATEAU ? "trainer" : "FSDP2 baseline",
          pl_backend_name(mc->backend));
  const pl_plan_cfg b = pl_plan_rank_view_cfg(c);
  if (b.W != c->W)
    fprintf(f,
            "  built as rank 0 of the %d-GPU run in one process (the rank "
            "view: W_v = %d, every group virtual)\n",
            c->W, b.lc.W_v);
  if (c->imb > 1)
    fprintf(f,
            "  routes skewed: rank 0's experts sent %g x their balanced share "
            "(--imb)\n",
            c->imb);
  if (!s)
    return;
  char beyond[96] = "";
  if (s->beyond)
    snprintf(beyond, sizeof beyond,
             ", %d too large for it to reserve (they do not fit)", s->beyond);
  fprintf(f,
          "search: every candidate's memory measured so (%d tried, %ld "
          "measured, %d left out that it cannot build%s; %.1f s)\n",
          s->tried, s->evals, s->unbuilt, beyond, seconds);
}
