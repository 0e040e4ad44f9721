/* plan_mem.c — `plateau plan`'s memory output (plan_mem.h): the byte counts
 * in words, the live set at the peak, the result-schema TSV row, and
 * --memory dry|both: the configuration the search chose (on the replay,
 * for speed) built on a dry device and stepped (pl_plan_memory_dry), its
 * measured peaks reported instead of the replay's or set beside them tag
 * by tag.  The comparison is the check that the replay and the step agree
 * on the planner's own configurations, before the replay is retired. */
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

int pl__plan_dry(const pl_model_cfg *m, const pl_plan_cfg *c,
                 const pl_plan_machine *mc, bool replace, pl_plan_verdict *v,
                 pl_plan_dry_mem *dm, pl_plan_cfg *built, char *why_not,
                 size_t n) {
  const pl_status st = pl_plan_memory_dry(m, c, mc, true, built, dm);
  if (st == PL_EUNSUPPORTED || (st == PL_ENOMEM && !v->fits)) {
    /* what the dry device does not measure (imb above 1), or beyond what even a
     * dry device reserves (address space, host memory for its bookkeeping) when
     * the replay finds it too large: the replay's verdict stands, said so */
    dm->steps = 0;
    snprintf(why_not, n, "%s", pl_last_error());
    return 0;
  }
  if (st != PL_OK) {
    char cfg[256];
    pl_plan_cfg_str(built, cfg, sizeof cfg);
    fprintf(stderr,
            "plateau plan: --memory: the configuration cannot be measured on "
            "a dry device (W=%d W_v=%d %s): %s\n",
            built->W, built->lc.W_v, cfg, pl_last_error());
    return 3;
  }
  if (!replace)
    return 0;
  pl_plan_mem *mem = &v->mem;
  /* all of it measured, the worst case too (the rank view's absent
   * members send what it sends itself: all their routes to its experts) */
  const int rank = mem->peak_rank;
  *mem = dm->mem;
  mem->peak_rank = rank;
  const int gpn = mc->gpus_per_node < c->W ? mc->gpus_per_node : c->W;
  mem->host_node = (size_t)gpn * mem->host_rank; /* c's node, not the proxy's */
  char a[32], b[32];
  const double usable = pl_plan_hbm_usable(mc),
               host = mc->host_bytes - mc->host_reserve;
  if (v->fits && (double)mem->dev_peak > usable) {
    v->fits = false;
    snprintf(v->binding, sizeof v->binding, "device");
    snprintf(v->why, sizeof v->why,
             "the device peak measured on a dry device, %s, exceeds the "
             "usable %s",
             pl__plan_hb((double)mem->dev_peak, a, sizeof a),
             pl__plan_hb(usable, b, sizeof b));
  } else if (v->fits && (double)mem->host_node > host) {
    v->fits = false;
    snprintf(v->binding, sizeof v->binding, "host");
    snprintf(v->why, sizeof v->why,
             "the host per node with the pinned peak measured on a dry "
             "device, %s, exceeds the usable %s",
             pl__plan_hb((double)mem->host_node, a, sizeof a),
             pl__plan_hb(host, b, sizeof b));
  }
  return 0;
}

/* A tag's bytes in a replay's list (0: absent). */
static size_t tag_of(const pl_tag_bytes *l, int n, const char *tag) {
  for (int i = 0; i < n; i++)
    if (l[i].tag && !strcmp(l[i].tag, tag))
      return l[i].bytes;
  return 0;
}

static double absdiff(size_t x, size_t y) {
  return x > y ? (double)(x - y) : (double)(y - x);
}

/* The tags of the replay pm and the measurement dm that differ, the
 * largest difference (at the peak or of the own peak) first; at most
 * PL_DRY_SHOWN of them printed. */
#define PL_DRY_SHOWN 5
static int print_tag_diffs(FILE *f, const pl_plan_mem *pm,
                           const pl_plan_dry_mem *dm) {
  const char *name[2 * PL_PLAN_MAX_TAGS];
  double d[2 * PL_PLAN_MAX_TAGS];
  int n = 0;
  for (int i = 0; i < dm->n_tags; i++)
    name[n++] = dm->tags[i].tag;
  for (int i = 0; i < pm->n_tags; i++) {
    bool seen = false;
    for (int j = 0; j < dm->n_tags; j++)
      seen = seen || !strcmp(pm->tag_peak[i].tag, dm->tags[j].tag);
    if (!seen)
      name[n++] = pm->tag_peak[i].tag;
  }
  size_t r_at[2 * PL_PLAN_MAX_TAGS], r_pk[2 * PL_PLAN_MAX_TAGS],
      d_at[2 * PL_PLAN_MAX_TAGS], d_pk[2 * PL_PLAN_MAX_TAGS];
  int nd = 0;
  for (int i = 0; i < n; i++) {
    r_at[i] = tag_of(pm->at_peak, pm->n_tags, name[i]);
    r_pk[i] = tag_of(pm->tag_peak, pm->n_tags, name[i]);
    d_at[i] = d_pk[i] = 0;
    for (int j = 0; j < dm->n_tags; j++)
      if (!strcmp(dm->tags[j].tag, name[i]))
        d_at[i] = dm->tags[j].at_peak, d_pk[i] = dm->tags[j].peak;
    const double x = absdiff(r_at[i], d_at[i]), y = absdiff(r_pk[i], d_pk[i]);
    d[i] = x > y ? x : y;
    nd += d[i] > 0;
  }
  if (!nd) {
    fprintf(f, "  tags: all %d equal, at the peak and at their own peaks\n", n);
    return 0;
  }
  fprintf(f,
          "  tags that differ (%d of %d; largest first): at the peak "
          "replay / dry, own peak replay / dry\n",
          nd, n);
  for (int k = 0; k < nd && k < PL_DRY_SHOWN; k++) {
    int best = -1;
    for (int i = 0; i < n; i++)
      if (d[i] > 0 && (best < 0 || d[i] > d[best]))
        best = i;
    fprintf(f, "    %-16s %14zu / %14zu  %14zu / %14zu\n", name[best],
            r_at[best], d_at[best], r_pk[best], d_pk[best]);
    d[best] = 0;
  }
  return nd;
}

/* Every field of the replay pm and the measurement dm (pl_plan_mem_diff:
 * the terms, the phase, the worst case, the host, the facts, the tags);
 * at most PL_DRY_FIELDS of those that differ printed. */
#define PL_DRY_FIELDS 12
static int print_field_diffs(FILE *f, const pl_plan_mem *pm,
                             const pl_plan_mem *dm) {
  char lines[PL_DRY_FIELDS][PL_PLAN_DIFF_LEN];
  const int n = pl_plan_mem_diff(pm, dm, lines, PL_DRY_FIELDS);
  if (!n) {
    fprintf(f,
            "  every field equal: terms, phase of the peak (%s), worst case, "
            "states, host, facts\n",
            dm->peak_phase);
    return 0;
  }
  fprintf(f, "  fields that differ (%d; replay / dry):\n", n);
  for (int i = 0; i < n && i < PL_DRY_FIELDS; i++)
    fprintf(f, "    %s\n", lines[i]);
  return n;
}

void pl__plan_dry_print(FILE *f, const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_cfg *built, const pl_plan_machine *mc,
                        const pl_plan_verdict *v, const pl_plan_dry_mem *dm,
                        bool both, const char *why_not) {
  const char *fl = pl_backend_name(mc->backend);
  char a[32], b[32];
  if (dm->steps == 0) {
    fprintf(f,
            "\nmemory above: replayed; a dry device could not build this "
            "configuration: %s\n",
            why_not);
    return;
  }
  fprintf(f,
          "\nmemory %s one step on a dry device (%s, %d step%s, the last "
          "measured; %.2f s)\n",
          both ? "replayed, and measured by" : "above: measured by", fl,
          dm->steps, dm->steps == 1 ? "" : "s", dm->seconds);
  if (built->W != c->W)
    fprintf(f,
            "  built as rank 0 of the %d-GPU run in one process (the rank "
            "view: W_v = %d, every group virtual)\n",
            c->W, built->lc.W_v);
  if (!both) {
    fprintf(f,
            "  device peak %zu B (%s), pinned host %zu B (%s); the terms and "
            "the phase measured too (the peak at %s)\n",
            dm->dev_peak, pl__plan_hb((double)dm->dev_peak, a, sizeof a),
            dm->host_peak, pl__plan_hb((double)dm->host_peak, b, sizeof b),
            dm->mem.peak_phase);
    return;
  }
  /* the rank view is the run's rank 0: against that rank's replay */
  const pl_plan_mem *pm = &v->mem;
  fprintf(f, "  %-12s replay %14zu  dry %14zu  (%+.0f B)\n", "device peak",
          pm->dev_peak, dm->dev_peak,
          (double)dm->dev_peak - (double)pm->dev_peak);
  fprintf(f, "  %-12s replay %14zu  dry %14zu  (%+.0f B)\n", "pinned host",
          pm->host_pinned, dm->host_peak,
          (double)dm->host_peak - (double)pm->host_pinned);
  const int nd = print_tag_diffs(f, pm, dm);
  const int nf = print_field_diffs(f, pm, &dm->mem);
  const bool equal = !nd && !nf && pm->dev_peak == dm->dev_peak &&
                     pm->host_pinned == dm->host_peak;
  fprintf(f, "memory: the replay and the dry device %s\n",
          equal ? "are equal" : "DIFFER");
}
