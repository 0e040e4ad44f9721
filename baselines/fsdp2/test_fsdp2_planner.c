/* test_fsdp2_planner.c — the planner's FSDP2 answers on the baseline's own
 * dry measurement (fsdp2_dry.c, registered as the planner's measurement of
 * the fsdp2 system), one process: the memory's documented facts at the
 * paper's scale (16 B per parameter of sharded state, moved to the host by
 * offload; the dense loss's three N×V fp32; CP dividing it; activation
 * checkpointing ordering the kept sets), the search's floor (lighter
 * activation checkpointing or offloaded state never raises the peak), the
 * automatic choice (no mix fits at 1M on 16 GPUs, the loss binding; the
 * largest tokens per rank below plateau's; EP over the ranks present; a
 * first-fit search agreeing with the full one) and tokens per step made
 * whole by cp and micro-batches (one sequence per CP group per micro-batch,
 * as the baseline runs).  The engine's tests cannot register the baseline:
 * these are the FSDP2 halves of engine/plan/test_plan.c's and
 * test_plan_room.c's. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "fsdp2.h"
#include "plan/plan.h"
#include "plan/plan_testlib.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static pl_model_cfg preset(const char *n) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset(n, &m), PL_OK);
  return m;
}

static void setup(void) {
  pl_fsdp2_register_dry();
}

/* The memory's facts at 120b, 16 GPUs, 32K. */
START_TEST(memory_facts) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg c = pl_plan_cfg_fsdp2(&m, 16, 32768);
  pl_plan_mem *a = malloc(4 * sizeof *a), *b = a + 1, *d = a + 2;
  ck_assert_ptr_nonnull(a);
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, a), PL_OK);
  /* 16 B per parameter / W of sharded state without offload */
  const double pr = 122.5e9 / 16;
  ck_assert_msg(fabs((double)(a->term[PL_TERM_WEIGHTS] +
                              a->term[PL_TERM_GRADS] + a->term[PL_TERM_OPTIM]) -
                     16 * pr) < 0.01 * 16 * pr,
                "state %zu + %zu + %zu, want 16·%.0f", a->term[PL_TERM_WEIGHTS],
                a->term[PL_TERM_GRADS], a->term[PL_TERM_OPTIM], pr);
  ck_assert_uint_eq(a->host_pinned, 0);
  /* the dense loss: 3 N×V fp32 at its peak */
  ck_assert_double_eq_tol((double)pl_plan_mem_tag_peak(a, "logits"),
                          12.0 * 32768 * 200000, 1);
  /* offload moves the 16 B/param to the host */
  c.offload = true;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, b), PL_OK);
  ck_assert(b->dev_peak < a->dev_peak - 100 * GIB);
  ck_assert_msg(fabs((double)b->host_node - 8 * 16 * pr) < 0.01 * 8 * 16 * pr,
                "host per node %zu, want 8·16·%.0f", b->host_node, pr);
  /* CP splits the sequence: the loss shrinks with it */
  c.cp = 4;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, d), PL_OK);
  ck_assert_double_eq_tol((double)pl_plan_mem_tag_peak(d, "logits"),
                          12.0 * 32768 / 4 * 200000, 1);
  /* activation checkpointing: none keeps the most, full the least */
  pl_plan_mem *ac = malloc(3 * sizeof *ac);
  ck_assert_ptr_nonnull(ac);
  for (int i = 0; i < 3; i++) {
    pl_plan_cfg x = c;
    x.ac = (pl_plan_ac)i;
    ck_assert_int_eq(pl_plan_dry_measure(&m, &x, &mc, &ac[i]), PL_OK);
  }
  ck_assert(ac[PL_PLAN_AC_FULL].term_peak[PL_TERM_RESIDENT] <
            ac[PL_PLAN_AC_SELECTIVE].term_peak[PL_TERM_RESIDENT]);
  ck_assert(ac[PL_PLAN_AC_SELECTIVE].term_peak[PL_TERM_RESIDENT] <
            ac[PL_PLAN_AC_NONE].term_peak[PL_TERM_RESIDENT]);
  ck_assert(ac[PL_PLAN_AC_FULL].dev_peak < ac[PL_PLAN_AC_NONE].dev_peak);
  /* refusals name the value, before any measurement */
  c.cp = 3;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, d), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "cp=3"));
  c.cp = 1, c.ep = 5;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, d), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "ep=5"));
  free(ac);
  free(a);
}
END_TEST

/* The FSDP2 search's floor (search.c fsdp2_floored): lighter activation
 * checkpointing (full below selective below none) or the optimizer state
 * offloaded never raises the measured device peak — over 120b and 667b on
 * 16 and 64 GPUs at 32K, 256K and 1M, every cp and ep of powers of two. */
START_TEST(floor_holds) {
  const char *models[] = {"120b", "667b"};
  const int Ws[] = {16, 64};
  const pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_mem *a = malloc(2 * sizeof *a), *b = a + 1;
  ck_assert_ptr_nonnull(a);
  int checked = 0;
  for (int mi = 0; mi < 2; mi++) {
    const pl_model_cfg m = preset(models[mi]);
    for (int wi = 0; wi < 2; wi++)
      for (int64_t S = 32 << 10; S <= 1 << 20; S *= 8)
        for (int cp = 1; cp <= Ws[wi]; cp *= 2)
          for (int ep = 1; ep <= Ws[wi]; ep *= 2)
            for (int off = 0; off < 2; off++)
              for (int ac = 0; ac < 3; ac++) {
                pl_plan_cfg c = pl_plan_cfg_fsdp2(&m, Ws[wi], S);
                c.cp = cp, c.ep = ep;
                c.ac = (pl_plan_ac)ac, c.offload = off == 1;
                if (pl_plan_dry_measure(&m, &c, &mc, a) != PL_OK) {
                  pl_clear_error();
                  continue;
                }
                for (int k = 0; k < 2; k++) { /* lighter AC; offloaded */
                  pl_plan_cfg d = c;
                  if (k == 0 && ac > 0)
                    d.ac = (pl_plan_ac)(ac - 1);
                  else if (k == 1 && !off)
                    d.offload = true;
                  else
                    continue;
                  ck_assert_int_eq(pl_plan_dry_measure(&m, &d, &mc, b), PL_OK);
                  ck_assert_msg(b->dev_peak <= a->dev_peak,
                                "%s W %d S %lld cp %d ep %d: ac %s offload %d "
                                "peaks %zu, above ac %s offload %d's %zu",
                                models[mi], Ws[wi], (long long)S, cp, ep,
                                pl_plan_ac_name(d.ac), d.offload, b->dev_peak,
                                pl_plan_ac_name(c.ac), c.offload, a->dev_peak);
                  checked++;
                }
              }
  }
  ck_assert_int_gt(checked, 1000);
  free(a);
}
END_TEST

/* The automatic choice: at 1M on 16 GPUs no mix fits (the paper's OOM), the
 * loss binding; the largest tokens per rank below plateau's; EP free over
 * the ranks present. */
START_TEST(auto_choice) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_search *s = malloc(sizeof *s);
  ck_assert_ptr_nonnull(s);
  pl_plan_cfg f = pl_plan_cfg_fsdp2(&m, 16, 1 << 20);
  pl_plan_free ff = {.cp = true, .ep = true, .ac = true, .offload = true};
  ck_assert_int_eq(pl_plan_auto(&m, &f, &ff, &mc, s), PL_OK);
  ck_assert(!s->have_best);
  ck_assert_str_eq(s->binding, "logits");
  pl_plan_cfg p = pl_plan_cfg_plateau(16, 1 << 20);
  pl_plan_free fr = {.D = true,
                     .P = true,
                     .c = true,
                     .beta = true,
                     .sco = true,
                     .optim = true};
  const int64_t np = pl_plan_max_tokens(&m, &p, &fr, &mc, 8192, 1 << 21);
  const int64_t nf = pl_plan_max_tokens(&m, &f, &ff, &mc, 8192, 1 << 21);
  ck_assert_msg(np > nf && nf > 0,
                "largest tokens per rank: plateau %lld, "
                "fsdp2 %lld",
                (long long)np, (long long)nf);
  ck_assert(nf % 8192 == 0);
  /* ep (only ep free): dividing the ranks present or a multiple of them,
   * as the baseline takes it — of 24 ranks (E's divisors among 24's: all
   * 8) with 3 present 1, 3, 6, 12, 24 */
  pl_plan_cfg e = pl_plan_cfg_fsdp2(&m, 24, 32 << 10);
  e.offload = true;
  ck_assert_int_eq(m.E % 24, 0);
  pl_plan_free fe = {.ep = true};
  ck_assert_int_eq(pl_plan_auto(&m, &e, &fe, &mc, s), PL_OK);
  ck_assert_int_eq(s->tried, 8);
  e.present = 3;
  ck_assert_int_eq(pl_plan_auto(&m, &e, &fe, &mc, s), PL_OK);
  ck_assert_int_eq(s->tried, 5);
  ck_assert(s->have_best);
  ck_assert_msg(s->best.cfg.ep % 3 == 0 || s->best.cfg.ep == 1, "ep=%d",
                s->best.cfg.ep);
  free(s);
}
END_TEST

/* Tokens per step: a pass is W/cp sequences (one per CP group), so the
 * search keeps the cps that make the tokens whole and sets the
 * micro-batches; none: PL_EINVAL naming the tokens and what is allowed. */
START_TEST(tokens_per_step) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_search *s = malloc(sizeof *s);
  ck_assert_ptr_nonnull(s);
  pl_plan_cfg f = pl_plan_cfg_fsdp2(&m, 16, 32 << 10);
  pl_plan_free ff = {.cp = true, .ep = true, .ac = true, .offload = true};
  /* 3 sequences of 32K per step over 16 GPUs: only cp = 16 (one CP group,
   * 3 micro-batches) makes it whole */
  f.tokens_step = 3 * (32 << 10);
  ck_assert_int_eq(pl_plan_auto(&m, &f, &ff, &mc, s), PL_OK);
  ck_assert(s->have_best);
  ck_assert_int_eq(s->best.cfg.cp, 16);
  ck_assert_int_eq(s->best.cfg.sc.micro, 3);
  ck_assert_int_eq(pl_plan_tokens_per_step(&s->best.cfg), f.tokens_step);
  /* 32 sequences: every cp, micro-batches 2·cp */
  f.tokens_step = 32 * (32 << 10);
  ck_assert_int_eq(pl_plan_auto(&m, &f, &ff, &mc, s), PL_OK);
  ck_assert(s->have_best);
  ck_assert_int_eq(s->best.cfg.sc.micro, 2 * s->best.cfg.cp);
  ck_assert_int_eq(pl_plan_tokens_per_step(&s->best.cfg), f.tokens_step);
  /* not a whole number of sequences: no cp makes it */
  f.tokens_step = 1000;
  ck_assert_int_eq(pl_plan_auto(&m, &f, &ff, &mc, s), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "tokens per step 1000"));
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "no cp makes it"));
  free(s);
}
END_TEST

/* A first-fit search answers as the full search does (pt_first_fit_agrees,
 * plan_testlib.h), for FSDP2. */
START_TEST(first_fit_agrees) {
  pt_first_fit_agrees(PL_PLAN_FSDP2);
}
END_TEST

/* The search's look-ahead answers as the search alone does
 * (pt_ahead_agrees, plan_testlib.h), for FSDP2: where it fits, and where
 * nothing does. */
START_TEST(ahead_agrees) {
  const pl_plan_machine mc = pl_plan_machine_default();
  const long ahead = pt_ahead_agrees(PL_PLAN_FSDP2, 16, 128 << 10, &mc) +
                     pt_ahead_agrees(PL_PLAN_FSDP2, 16, 4 << 20, &mc);
  ck_assert_int_gt(ahead, 0);
}
END_TEST

int main(void) {
  const TTest *tests[] = {
      memory_facts,     floor_holds,  auto_choice, tokens_per_step,
      first_fit_agrees, ahead_agrees, NULL};
  return pl_check_suite("fsdp2_planner", 300, tests, setup, NULL,
                        CK_FORK_GETENV, 0)
             ? 1
             : 0;
}
