/* test_plan.c — the planner's pure parts, one process: the machine (result
 * files of both schema versions, key=value overrides and their refusals),
 * Eq. 6's terms at the paper's scale (the states per parameter, the
 * dispatch bound, the boundaries), the FSDP2 time model's documented
 * numbers (its attention time as the baseline runs it, or PyTorch's SDPA)
 * and its refusals, feasibility naming its binding term, the automatic
 * choice and the largest tokens per rank, the search's bounds, expert
 * groups' trade (all-to-all against expert units) and its search.  FSDP2's
 * memory is the baseline's dry measurement, which an engine test cannot
 * register: its assertions are baselines/fsdp2/test_fsdp2_planner.c's. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check_run.h"
#include "plan/plan.h"
#include "plan/plan_internal.h"
#include "plan/plan_testlib.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static pl_model_cfg preset(const char *n) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset(n, &m), PL_OK);
  return m;
}

static char *write_tmp(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/plateau_plan_test_XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

/* text loaded into m as a result file (PL_OK asserted) */
static void load_ok(pl_plan_machine *m, const char *text) {
  char *p = write_tmp(text);
  ck_assert_int_eq(pl_plan_machine_load(m, p), PL_OK);
  unlink(p);
}

START_TEST(machine_files) {
  pl_plan_machine m = pl_plan_machine_default();
  /* schema 1: the test name in `test` */
  const char *v1 =
      "# plateau-results: 1\n# bench: calib\n"
      "test\tbytes\tranks\tdtype\tmnk\ttime_ms\talgbw_gbs\t"
      "busbw_gbs\ttflops\tstatus\tcheck\tnote\n"
      "h2d\t65536\t2\tf32\t-\t0.1\t9.0\t9.0\t-\tok\tpass\tx\n"
      "h2d\t1073741824\t2\tf32\t-\t20\t54.4\t54.4\t-\tok\tpass\tx\n"
      "d2h\t1073741824\t2\tf32\t-\t20\t54.5\t54.5\t-\toom\tskip\tx\n"
      "gemm\t4\t2\tbf16\t8192\t1.4\t-\t-\t754.5\tok\tpass\tx\n"
      "alltoall\t1048576\t2\tf32\t-\t1\t10\t300\t-\tok\tpass\tx\n"
      "torn\tline\n";
  char *p = write_tmp(v1);
  ck_assert_int_eq(pl_plan_machine_load(&m, p), PL_OK);
  unlink(p);
  ck_assert_double_eq_tol(m.h2d_gbs, 54.4, 1e-9); /* the largest size   */
  ck_assert_double_eq_tol(m.d2h_gbs, 55.3, 1e-9); /* oom row: unchanged */
  ck_assert_double_eq_tol(m.gemm_tflops, 754.5, 1e-9);
  ck_assert_double_eq_tol(m.a2a_gbs, 300, 1e-9); /* busbw            */
  ck_assert_ptr_nonnull(strstr(m.source, "plateau_plan_test"));
  /* schema 2: `variant`; attention and adam rate files */
  const char *v2 = "# plateau-results: 2\n# bench: calib\n"
                   "variant\tbytes\tranks\tdtype\tmnk\ttime_ms\talgbw_gbs\t"
                   "busbw_gbs\ttflops\tstatus\n"
                   "bidir\t1048576\t2\tf32\t-\t1\t99\t99\t-\tok\n"
                   "mem_read\t2147483648\t1\t-\t-\t26\t80.9\t80.9\t-\tok\n"
                   "mem_copy\t2147483648\t1\t-\t-\t41\t105.5\t105.5\t-\tok\n";
  const double dram0 = m.host_dram_gbs;
  load_ok(&m, v2);
  ck_assert_double_eq_tol(m.bidir_gbs, 99, 1e-9);
  /* the host memory: mem_copy (read + write), not mem_read */
  ck_assert_double_ne_tol(dram0, 105.5, 1e-9);
  ck_assert_double_eq_tol(m.host_dram_gbs, 105.5, 1e-9);
  const char *at = "# bench: attention\n"
                   "ranks\tseq\tpass\ttime_ms\ttflops\tstatus\n"
                   "1\t4096\tfwd\t1\t270\tok\n"
                   "1\t131072\tfwd\t1\t540\tok\n"
                   "1\t131072\tfwdbwd\t1\t436\tok\n";
  load_ok(&m, at);
  ck_assert_double_eq_tol(m.attn_fwd_tflops, 540, 1e-9);
  /* 3.5/436 = 1/540 + 2.5/bwd */
  ck_assert_double_eq_tol(3.5 / 436, 1.0 / 540 + 2.5 / m.attn_bwd_tflops,
                          1e-12);
  ck_assert_double_eq_tol(m.attn_half_seq, 4096, 1e-6); /* 540 = 2 × 270 */
  /* causal rows alone: the defaults' full rates (another kernel's) go, the
   * causal ones serve (0) */
  ck_assert_double_gt(pl_plan_machine_default().attn_full_fwd_tflops, 0);
  ck_assert_double_eq(m.attn_full_fwd_tflops, 0);
  ck_assert_double_eq(m.attn_full_bwd_tflops, 0);
  /* the full mask's rows (mask full) set the full rates alone: the causal
   * rates and the half-rate context stay the causal rows' */
  const char *fm =
      "# bench: attention\nranks\tseq\tpass\tmask\ttflops\tstatus\n"
      "1\t1024\tfwd\tfull\t100\tok\n1\t65536\tfwd\tfull\t660\tok\n"
      "1\t65536\tfwdbwd\tfull\t600\tok\n";
  load_ok(&m, fm);
  ck_assert_double_eq_tol(m.attn_fwd_tflops, 540, 1e-9);
  ck_assert_double_eq_tol(m.attn_half_seq, 4096, 1e-6);
  ck_assert_double_eq_tol(m.attn_full_fwd_tflops, 660, 1e-9);
  ck_assert_double_eq_tol(3.5 / 600, 1.0 / 660 + 2.5 / m.attn_full_bwd_tflops,
                          1e-12);
  /* causal rows read after full ones (two files of one run) keep them */
  load_ok(&m, at);
  ck_assert_double_eq_tol(m.attn_full_fwd_tflops, 660, 1e-9);
  const char *ad = "# bench: adam\nvariant\tparams\tranks\tgparam_s\tstatus\n"
                   "stream\t2625000000\t2\t3.9\tok\n"
                   "cpu\t2625000000\t2\t1.4\tok\n"
                   "update\t1000000\t2\t9.5\tok\n"
                   "update\t2625000000\t2\t2.35\tok\n";
  ck_assert_double_eq(m.cpu_update_gparam_s, 0); /* default: cpu_adam's */
  load_ok(&m, ad);
  ck_assert_double_eq_tol(m.optim_gparam_s, 3.9, 1e-9);
  ck_assert_double_eq_tol(m.cpu_adam_gparam_s, 2.8, 1e-9); /* 2 ranks */
  /* the largest params' update row, times its ranks */
  ck_assert_double_eq_tol(m.cpu_update_gparam_s, 4.7, 1e-9);
  /* PyTorch's fused CPU AdamW (analysis/peers): its own key */
  const double fa0 = m.fsdp2_cpu_adam_gparam_s;
  p = write_tmp("# bench: torch_adamw\nvariant\tparams\tranks\tgparam_s\t"
                "status\ntorch_fused_adamw\t2625000000\t1\t4.25\tok\n"
                "torch_fused_adamw\t1000000\t1\t8\tok\n");
  ck_assert_int_eq(pl_plan_machine_load(&m, p), PL_OK);
  unlink(p);
  ck_assert_double_eq_tol(m.fsdp2_cpu_adam_gparam_s, 4.25, 1e-9);
  ck_assert_double_ne(m.fsdp2_cpu_adam_gparam_s, fa0);
  ck_assert_double_eq_tol(m.cpu_update_gparam_s, 4.7, 1e-9); /* unchanged */
  /* refusals name the value */
  p = write_tmp("# bench: vocab\na\tb\n1\t2\n");
  ck_assert_int_eq(pl_plan_machine_load(&m, p), PL_EINVAL);
  unlink(p);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "vocab"));
  ck_assert_int_eq(pl_plan_machine_load(&m, "/nonexistent/x.tsv"), PL_EINVAL);
  ck_assert_int_eq(pl_plan_machine_set(&m, "ib_gbs=25"), PL_OK);
  ck_assert_double_eq_tol(m.ib_gbs, 25, 1e-12);
  ck_assert_int_eq(pl_plan_machine_set(&m, "gpus_per_node=4"), PL_OK);
  ck_assert_int_eq(m.gpus_per_node, 4);
  ck_assert_int_eq(pl_plan_machine_set(&m, "ib_gbs=-1"), PL_EINVAL);
  ck_assert_int_eq(pl_plan_machine_set(&m, "warp=9"), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "warp"));
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "ib_gbs"));
}
END_TEST

/* Values the models cannot take are refused, never used or skipped: a rate
 * of 0 (a division by zero), nan or inf, a capacity of 2^64 bytes, a nan
 * rate in an ok row of a file (it fell back to the default in silence); a
 * file refused halfway changes nothing; a FIFO is refused without waiting
 * for a writer. */
START_TEST(machine_refusals) {
  pl_plan_machine m = pl_plan_machine_default();
  const pl_plan_machine m0 = m;
  static const char *const bad[] = {
      "gemm_tflops=0",   "hbm_gbs=0",
      "host_bytes=0",    "hbm_bytes=18446744073709551616",
      "h2d_gbs=nan",     "ib_gbs=inf",
      "expert_eff=0",    "coll_us=-1",
      "gemm_tflops=",    "gemm_tflops",
      "gpus_per_node=0", "backend=tpu",
      "hbm_bytes=1e16"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_msg(pl_plan_machine_set(&m, bad[i]) == PL_EINVAL, "%s taken",
                  bad[i]);
    char key[32];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(bad[i], "="), bad[i]);
    ck_assert_msg(strstr(pl_last_error(), key), "%s: '%s'", bad[i],
                  pl_last_error());
  }
  ck_assert(memcmp(&m, &m0, sizeof m) == 0);
  ck_assert_int_eq(pl_plan_machine_set(&m, "optim_gparam_s=0"), PL_OK);
  ck_assert_int_eq(pl_plan_machine_set(&m, "hbm_bytes=80Gi"), PL_OK);
  ck_assert_double_eq_tol(m.hbm_bytes, 80 * GIB, 1e-3);
  m = m0;
  /* a nan rate in an ok row: refused naming the line, nothing changed */
  char *p = write_tmp("# plateau-results: 2\n# bench: calib\n"
                      "variant\tbytes\tmnk\talgbw_gbs\ttflops\tstatus\n"
                      "h2d\t1048576\t-\t33\t-\tok\n"
                      "gemm\t-\t8192\t-\tnan\tok\n"
                      "gemm\t-\t4096\t-\tnan\terror\n");
  ck_assert_int_eq(pl_plan_machine_load(&m, p), PL_EINVAL);
  unlink(p);
  ck_assert_msg(strstr(pl_last_error(), "line 5: column tflops is 'nan'"), "%s",
                pl_last_error());
  ck_assert(memcmp(&m, &m0, sizeof m) == 0);
  /* the same value in a row that is not ok is no rate: skipped */
  p = write_tmp("# bench: calib\nvariant\tmnk\ttflops\tstatus\n"
                "gemm\t8192\tnan\toom\ngemm\t4096\t700\tok\n");
  ck_assert_int_eq(pl_plan_machine_load(&m, p), PL_OK);
  unlink(p);
  ck_assert_double_eq_tol(m.gemm_tflops, 700, 1e-9);
  /* a FIFO: refused at once */
  char fifo[64];
  snprintf(fifo, sizeof fifo, "/tmp/plateau_plan_fifo_%d", (int)getpid());
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  ck_assert_int_eq(pl_plan_machine_load(&m, fifo), PL_EINVAL);
  unlink(fifo);
  ck_assert_msg(strstr(pl_last_error(), "not a regular file (a FIFO)"), "%s",
                pl_last_error());
}
END_TEST

START_TEST(eq6_terms_at_scale) {
  /* 120B on 16 H200, 128K: the states per parameter, the dispatch bound */
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg c = pl_plan_cfg_plateau(16, 131072);
  c.lc.P = 8, c.sc.head = &pl_head_ring;
  pl_plan_mem mem;
  ck_assert_int_eq(pl_plan_memory(&m, &c, &mc, -1, &mem), PL_OK);
  const double th = (double)mem.params_rank;
  ck_assert(th > 7.0e9 && th < 8.0e9); /* 122.5 B / 16 + padding */
  /* 4Θ/W split: bf16 weights (+ router biases), f32 gradients */
  ck_assert_double_eq_tol(mem.term[PL_TERM_GRADS], 4 * th, 1);
  ck_assert(fabs(mem.term[PL_TERM_WEIGHTS] - 2 * th) < 1e6);
  /* staging s·β·12 <= s·β·16 */
  ck_assert(mem.term_peak[PL_TERM_OPTIM] >= 2 * 100000000.0 * 12);
  ck_assert(mem.term_peak[PL_TERM_OPTIM] <= 2 * 100000000.0 * 16);
  /* Eq. 1: K = N / c, the bound 2·Ep·k·c_eff·H·b */
  ck_assert_int_eq(mem.K, 16);
  ck_assert_uint_eq(mem.dispatch_bound, 2ull * 16 * 8 * 8192 * 7168 * 2);
  ck_assert(mem.term_peak[PL_TERM_DISPATCH] <= mem.dispatch_bound);
  /* boundaries on the device: L·N·H·b resident at the most (no SCO) */
  const double nhb = 131072.0 * 7168 * 2;
  ck_assert(mem.term_peak[PL_TERM_RESIDENT] <= (m.L + 1) * nhb);
  ck_assert_uint_eq(mem.term_peak[PL_TERM_RESTORED], 0);
  ck_assert_uint_eq(mem.sco_layers, 0);
  /* the worst routing costs more, within the guarantee of the bound */
  ck_assert(mem.dev_worst > mem.dev_peak);
  /* host: 12 B/param of fp32 state, 8 ranks per node */
  ck_assert(fabs((double)mem.host_optim - 12 * th) < 1);
  ck_assert(mem.host_node >= 8 * mem.host_optim);
  /* SCO: three boundaries off the device, restored two at a time */
  c.sc.sco = (pl_sco_budget){false, (uint64_t)(3 * nhb)};
  pl_plan_mem s3;
  ck_assert_int_eq(pl_plan_memory(&m, &c, &mc, -1, &s3), PL_OK);
  ck_assert_int_eq(s3.sco_layers, 3);
  ck_assert(s3.dev_peak < mem.dev_peak);
  ck_assert(s3.term_peak[PL_TERM_RESTORED] <= 2 * nhb);
  ck_assert_double_eq_tol(s3.host_sco, 3 * nhb, 1);
  /* more chunks, a smaller dispatch peak */
  c.sc.sco = (pl_sco_budget){false, 0};
  c.sc.moe_c = 2048;
  pl_plan_mem k64;
  ck_assert_int_eq(pl_plan_memory(&m, &c, &mc, -1, &k64), PL_OK);
  ck_assert_int_eq(k64.K, 64);
  ck_assert(k64.term_peak[PL_TERM_DISPATCH] < mem.term_peak[PL_TERM_DISPATCH]);
}
END_TEST

START_TEST(fsdp2_model) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg c = pl_plan_cfg_fsdp2(&m, 16, 32768);
  ck_assert_int_eq(c.ep, 16);
  ck_assert_int_eq(pl_plan_tokens_per_rank(&c), 32768);
  /* the memory is the baseline's measurement: none registered here */
  pl_plan_mem d;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, &d), PL_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "fsdp2"));
  /* refusals, before any measurement: PL_EINVAL naming the value */
  c.cp = 3;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, &d), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "cp=3"));
  pl_plan_verdict v;
  ck_assert_int_eq(pl_plan_check(&m, &c, &mc, &v), PL_EINVAL);
  c.cp = 1, c.ep = 5;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, &d), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "ep=5"));
  c.ep = 16, c.sc.micro = 0;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, &d), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "micro=0"));
  c.sc.micro = 1;
  /* time: positive parts, the optimizer on the CPU with offload */
  c.offload = true;
  pl_plan_time t;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &t), PL_OK);
  ck_assert(t.step_s > 0 && t.tok_s_gpu > 0);
  ck_assert(t.part_s[PL_TPART_OPTIM] > 1.0); /* 7.7 B params per rank */
}
END_TEST

/* T3 and T2's edges on the one-GPU proxy (W 1, W_v 16, virtual CP 4, the
 * optimizer offloaded): the baseline's CPU update at cpu_update_gparam_s
 * (0: cpu_adam_gparam_s), PyTorch's at fsdp2_cpu_adam_gparam_s, the host
 * memory's 32 B/param the bound; the units' copies hidden behind the layers
 * but the step's edges (the embedding's shard and layer 0's, one copy each
 * way, at h2d_gbs and d2h_gbs). */
START_TEST(fsdp2_optim_copies_time) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  mc.gpus_per_node = 1;
  const int64_t S = 131072;
  pl_plan_cfg c = pl_plan_cfg_fsdp2(&m, 1, S);
  c.lc.W_v = 16, c.cp = 4, c.ep = 4, c.ac = PL_PLAN_AC_NONE, c.offload = true;
  const pl_model_params pc = pl_model_count(&m);
  const double pr = (double)pc.total / 16;
  mc.host_dram_gbs = 1e5; /* the rate binds */
  mc.cpu_adam_gparam_s = 6, mc.cpu_update_gparam_s = 0;
  mc.fsdp2_cpu_adam_gparam_s = 3;
  pl_plan_time t;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &t), PL_OK);
  ck_assert_double_eq_tol(t.part_s[PL_TPART_OPTIM], pr / 6e9, 1e-9);
  mc.cpu_update_gparam_s = 4;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &t), PL_OK);
  ck_assert_double_eq_tol(t.part_s[PL_TPART_OPTIM], pr / 4e9, 1e-9);
  pl_plan_cfg x = c;
  x.sdpa = true;
  ck_assert_int_eq(pl_plan_time_predict(&m, &x, &mc, &t), PL_OK);
  ck_assert_double_eq_tol(t.part_s[PL_TPART_OPTIM], pr / 3e9, 1e-9);
  mc.host_dram_gbs = 100; /* the host memory binds: 32 B/param */
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &t), PL_OK);
  ck_assert_double_eq_tol(t.part_s[PL_TPART_OPTIM], 32 * pr / 100e9, 1e-9);
  /* the edges: W = 1 has no collective; the copies of the embedding's
   * shard and layer 0's units, one each way */
  ck_assert(pl_model_layer_is_moe(&m, 0) || m.dense_layers > 0);
  const int moe0 = pl_model_layer_is_moe(&m, 0);
  const double du = (double)(pc.attn + pc.norms +
                             (moe0 ? pc.router + pc.shared : pc.dense_ffn));
  const double eu = moe0 ? (double)(m.E / 4) * 3 * m.H * (double)m.I : 0;
  const double sh = (double)pc.embed / 16 + du / 16 + eu / 4;
  ck_assert_double_eq_tol(
      t.part_s[PL_TPART_UNITS],
      sh * 4 / (mc.h2d_gbs * 1e9) + sh * 4 / (mc.d2h_gbs * 1e9), 1e-9);
  ck_assert(t.hidden_s[PL_TPART_UNITS] > t.part_s[PL_TPART_UNITS]);
  /* a slower D2H moves the edge's reduce by its bytes */
  pl_plan_machine sl = mc;
  sl.d2h_gbs /= 2;
  pl_plan_time t2;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &sl, &t2), PL_OK);
  ck_assert_double_eq_tol(t2.part_s[PL_TPART_UNITS] - t.part_s[PL_TPART_UNITS],
                          sh * 4 / (mc.d2h_gbs * 1e9), 1e-9);
  /* without offload nothing crosses the link, W = 1 gathers nothing */
  c.offload = false;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &t), PL_OK);
  ck_assert_double_eq(t.part_s[PL_TPART_UNITS], 0);
  ck_assert_double_eq_tol(t.part_s[PL_TPART_OPTIM],
                          28 * pr / (mc.hbm_gbs * 1e9), 1e-12);
}
END_TEST

/* --imb is the router's skew: the MoE layers run at the pace of the rank it
 * skews toward — imb× under plain EP and under LLEP below its threshold λ
 * (1.3: the native placement kept), balanced once LLEP spreads it. */
START_TEST(imb_rank_load) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  const pl_moe_variant vs[] = {PL_MOE_EP, PL_MOE_LLEP, PL_MOE_PIPELINED};
  for (size_t v = 0; v < sizeof vs / sizeof vs[0]; v++) {
    double t[3];
    const double imbs[3] = {1, 1.2, 2};
    for (int i = 0; i < 3; i++) {
      pl_plan_cfg c = pl_plan_cfg_plateau(16, 131072);
      c.sc.dispatch = vs[v], c.imb = imbs[i];
      pl_plan_time pt;
      ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &pt), PL_OK);
      t[i] = pt.step_s;
    }
    ck_assert_msg(t[1] > t[0], "%s: imb 1.2 not slower",
                  pl_moe_variant_desc_of(vs[v])->name);
    if (vs[v] == PL_MOE_EP)
      ck_assert_msg(t[2] > t[1], "ep: imb 2 not slower than 1.2");
    else
      ck_assert_msg(t[2] == t[0], "%s: imb 2 (spread) %g s, imb 1 %g s",
                    pl_moe_variant_desc_of(vs[v])->name, t[2], t[0]);
  }
}
END_TEST

/* T1's attention: the baseline's ring attention on our kernels (blocks of
 * S/(2·CP) at attn_fwd/bwd_tflops, plus its merges' HBM traffic) unless
 * sdpa (PyTorch's FSDP2 at fsdp2_attn_tflops for chunks of S/CP); each rate
 * moves only its own model; a checkpointed layer's forward again. */
START_TEST(fsdp2_attention_time) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  /* every block at the causal rates first (the full mask's: below) */
  mc.attn_full_fwd_tflops = mc.attn_full_bwd_tflops = 0;
  const int64_t S = 131072;
  pl_plan_cfg c = pl_plan_cfg_fsdp2(&m, 16, S);
  c.cp = 4, c.ep = 4, c.ac = PL_PLAN_AC_NONE, c.offload = true;
  ck_assert(!c.sdpa); /* the default: the baseline itself */
  const double fa = 2.0 * S * S * m.d * m.n_q / c.cp, len = S / 8.0;
  const double h = mc.attn_half_seq;
  const double ours =
      m.L * (fa / (mc.attn_fwd_tflops * 1e12 * len / (len + h)) +
             2.5 * fa / (mc.attn_bwd_tflops * 1e12 * len / (len + h)));
  pl_plan_time t;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &t), PL_OK);
  const double a = t.part_s[PL_TPART_ATTN];
  /* the kernels' time and a merge traffic of at most a few percent */
  ck_assert_msg(a > ours && a < 1.05 * ours, "attention %.4f s, kernels %.4f s",
                a, ours);
  /* PyTorch's SDPA */
  pl_plan_cfg x = c;
  x.sdpa = true;
  const double q = S / 4.0;
  const double sdpa =
      m.L * 3.5 * fa / (mc.fsdp2_attn_tflops * 1e12 * q / (q + h));
  pl_plan_time ts;
  ck_assert_int_eq(pl_plan_time_predict(&m, &x, &mc, &ts), PL_OK);
  ck_assert_double_eq_tol(ts.part_s[PL_TPART_ATTN], sdpa, 1e-9 * sdpa);
  /* each rate moves its own model only */
  pl_plan_machine slow = mc;
  slow.attn_fwd_tflops /= 2, slow.attn_bwd_tflops /= 2;
  pl_plan_time t2, ts2;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &slow, &t2), PL_OK);
  ck_assert_int_eq(pl_plan_time_predict(&m, &x, &slow, &ts2), PL_OK);
  ck_assert(t2.part_s[PL_TPART_ATTN] > 1.9 * a);
  ck_assert_double_eq_tol(ts2.part_s[PL_TPART_ATTN], ts.part_s[PL_TPART_ATTN],
                          1e-12);
  slow = mc;
  slow.fsdp2_attn_tflops /= 2;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &slow, &t2), PL_OK);
  ck_assert_double_eq_tol(t2.part_s[PL_TPART_ATTN], a, 1e-12);
  /* full AC: every layer's forward again (its merges too) */
  c.ac = PL_PLAN_AC_FULL;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &t2), PL_OK);
  const double tf = m.L * fa / (mc.attn_fwd_tflops * 1e12 * len / (len + h));
  ck_assert(t2.part_s[PL_TPART_ATTN] > a + tf &&
            t2.part_s[PL_TPART_ATTN] < a + 1.05 * tf);
  /* the full mask's rates (flat in the block's length) time the 2·CP − 1
   * full blocks' share of the FLOPs, (2·CP − 1)/(2·CP), alone, forward and
   * backward; the merges' traffic is unchanged */
  c.ac = PL_PLAN_AC_NONE;
  pl_plan_machine fast = mc;
  fast.attn_full_fwd_tflops = 2 * mc.attn_fwd_tflops;
  fast.attn_full_bwd_tflops = 2 * mc.attn_bwd_tflops;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &fast, &t2), PL_OK);
  const double share = (2.0 * c.cp - 1) / (2.0 * c.cp),
               full = m.L * (fa / (fast.attn_full_fwd_tflops * 1e12) +
                             2.5 * fa / (fast.attn_full_bwd_tflops * 1e12));
  ck_assert_double_eq_tol(t2.part_s[PL_TPART_ATTN],
                          a - share * ours + share * full, 1e-9 * a);
  fast.attn_full_bwd_tflops = 0; /* either 0: the causal rates */
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &fast, &t2), PL_OK);
  ck_assert_double_eq_tol(t2.part_s[PL_TPART_ATTN], a, 1e-12);
  /* CP = 1: one flash call of S tokens, no merges */
  c.ac = PL_PLAN_AC_NONE, c.cp = 1;
  ck_assert_int_eq(pl_plan_time_predict(&m, &c, &mc, &t2), PL_OK);
  const double f1 = 2.0 * S * S * m.d * m.n_q;
  const double one =
      m.L * (f1 / (mc.attn_fwd_tflops * 1e12 * S / (S + h)) +
             2.5 * f1 / (mc.attn_bwd_tflops * 1e12 * S / (S + h)));
  ck_assert_double_eq_tol(t2.part_s[PL_TPART_ATTN], one, 1e-9 * one);
}
END_TEST

START_TEST(check_names_binding) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  /* 1M tokens on one rank of 16 at D = 1: does not fit */
  pl_plan_cfg c = pl_plan_cfg_plateau(16, 1 << 20);
  pl_plan_verdict v;
  ck_assert_int_eq(pl_plan_check(&m, &c, &mc, &v), PL_OK);
  ck_assert(!v.fits);
  ck_assert_str_eq(v.binding, "acts");
  ck_assert_ptr_nonnull(strstr(v.why, "device peak"));
  ck_assert(v.need > v.have);
  /* 32K fits */
  c = pl_plan_cfg_plateau(16, 32768);
  ck_assert_int_eq(pl_plan_check(&m, &c, &mc, &v), PL_OK);
  ck_assert(v.fits);
  ck_assert_str_eq(v.binding, "");
  /* a small host: the optimizer state binds */
  pl_plan_machine small = mc;
  small.host_bytes = 256 * GIB;
  ck_assert_int_eq(pl_plan_check(&m, &c, &small, &v), PL_OK);
  ck_assert(!v.fits);
  ck_assert_str_eq(v.binding, "host: optimizer state");
  /* invalid: refused, not infeasible */
  c.lc.D = 3;
  ck_assert_int_eq(pl_plan_check(&m, &c, &mc, &v), PL_EINVAL);
}
END_TEST

/* The search's cost: a memo answers a configuration evaluated before
 * without measuring it again, the time bound holds over the knobs the memory
 * decides, and the search of 120b on 16 GPUs at 128K stays within its
 * evaluations. */
START_TEST(search_cost) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg c = pl_plan_cfg_plateau(16, 131072);
  c.lc.Ep = 8;
  pl__plan_memo *mm = pl__plan_memo_new();
  ck_assert_ptr_nonnull(mm);
  pl_plan_mem a, b;
  const long e0 = pl__plan_mem_evals();
  ck_assert_int_eq(pl__plan_mem_eval(mm, &m, &c, &mc, false, &a), PL_OK);
  ck_assert_int_eq(pl__plan_mem_eval(mm, &m, &c, &mc, false, &b), PL_OK);
  ck_assert_int_eq(pl__plan_mem_evals() - e0, 1);
  ck_assert_int_eq(a.dev_peak, b.dev_peak);
  pl__plan_memo_free(mm);
  double u = 0;
  ck_assert_int_eq(pl__plan_time_bound(&m, &c, &mc, &u), PL_OK);
  const uint64_t nhb = 131072ull * (uint64_t)m.H * 2;
  for (int s = 0; s <= m.L; s += 9)
    for (int k = 0; k <= 2; k++)
      for (int r = 0; r <= 4; r++) {
        pl_plan_cfg y = c;
        y.sc.sco = (pl_sco_budget){s == m.L, (uint64_t)s * nhb};
        y.sc.keep = (pl_keep_budget){(pl_keep_mode)k, 0};
        y.sc.oo.resident_bytes = (uint64_t)r * 40000000000ull;
        pl_plan_time t;
        ck_assert_int_eq(pl_plan_time_predict(&m, &y, &mc, &t), PL_OK);
        ck_assert(t.tok_s_gpu <= u);
      }
  pl_plan_free fr = {.D = true,
                     .P = true,
                     .c = true,
                     .beta = true,
                     .sco = true,
                     .optim = true,
                     .ep = true,
                     .resident = true,
                     .keep = true};
  pl_plan_search s;
  const long e1 = pl__plan_mem_evals();
  ck_assert_int_eq(pl_plan_auto(&m, &c, &fr, &mc, &s), PL_OK);
  ck_assert(s.have_best && s.have_runner_up);
  ck_assert_int_lt(pl__plan_mem_evals() - e1, 1000);
}
END_TEST

/* The memo's look-ahead (memo.c): what its view measures waits in the store
 * and the memo takes it where it would have measured (counted as its own
 * evaluation, the view's not counted), the same answer as a measurement
 * without a memo; a configuration a dry device cannot build answers the
 * same refusal either way; a stopped view measures nothing more. */
START_TEST(memo_ahead) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg c = pl_plan_cfg_plateau(16, 131072);
  c.lc.Ep = 8;
  pl__plan_memo *mm = pl__plan_memo_new(), *v = pl__plan_memo_ahead(mm);
  ck_assert_ptr_nonnull(mm);
  ck_assert_ptr_nonnull(v);
  ck_assert_ptr_null(pl__plan_memo_ahead(mm)); /* one view per memo */
  pl_plan_mem *a = malloc(sizeof *a), *b = malloc(sizeof *b),
              *r = malloc(sizeof *r);
  ck_assert(a && b && r);
  const long e0 = pl__plan_mem_evals();
  ck_assert_int_eq(pl__plan_mem_eval(v, &m, &c, &mc, true, a), PL_OK);
  ck_assert_int_eq(pl__plan_mem_evals() - e0, 0);
  ck_assert_int_eq(pl__plan_memo_ahead_used(mm), 0);
  ck_assert_int_eq(pl__plan_mem_eval(mm, &m, &c, &mc, true, b), PL_OK);
  ck_assert_int_eq(pl__plan_mem_evals() - e0, 1);
  ck_assert_int_eq(pl__plan_memo_evals(mm), 1);
  ck_assert_int_eq(pl__plan_memo_ahead_used(mm), 2); /* balanced, worst */
  ck_assert_int_eq(pl__plan_memory(&m, &c, &mc, -1, true, r), PL_OK);
  ck_assert_int_eq(b->dev_peak, r->dev_peak);
  ck_assert_int_eq(b->dev_worst, r->dev_worst);
  ck_assert_int_eq(b->host_pinned, r->host_pinned);
  ck_assert_int_gt(b->dev_worst, 0);
  ck_assert_int_eq(a->dev_peak, r->dev_peak);
  /* a refusal, measured ahead: the same status and message */
  pl_plan_cfg big = pl_plan_cfg_plateau(16, 1ll << 40);
  ck_assert_int_eq(pl__plan_mem_eval(NULL, &m, &big, &mc, false, r),
                   PL_EINFEASIBLE);
  char why[1024];
  snprintf(why, sizeof why, "%s", pl_last_error());
  pl_clear_error();
  ck_assert_int_eq(pl__plan_mem_eval(v, &m, &big, &mc, false, a),
                   PL_EINFEASIBLE);
  pl_clear_error();
  ck_assert_int_eq(pl__plan_mem_eval(mm, &m, &big, &mc, false, b),
                   PL_EINFEASIBLE);
  ck_assert_str_eq(pl_last_error(), why);
  ck_assert_int_eq(pl__plan_memo_unbuilt(mm), 0);
  ck_assert_int_eq(pl__plan_memo_beyond(mm), 1);
  ck_assert_int_eq(pl__plan_memo_ahead_used(mm), 3);
  /* stopped */
  pl__plan_memo_cancel(v);
  c.lc.Ep = 16;
  ck_assert_int_eq(pl__plan_mem_eval(v, &m, &c, &mc, false, a), PL_ERUNTIME);
  pl_clear_error();
  pl__plan_memo_free(v);
  pl__plan_memo_free(mm);
  free(a), free(b), free(r);
}
END_TEST

/* The search's look-ahead (search.c): on two threads the search answers
 * exactly as on one (choice, runner-up, peaks, times, counts, every
 * reason), where something fits and where nothing does, and takes
 * measurements from the second thread. */
START_TEST(ahead_agrees) {
  const pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_machine tiny = mc; /* nothing fits: the closest, and its reason */
  tiny.hbm_bytes = 8 * GIB;
  const long ahead = pt_ahead_agrees(PL_PLAN_PLATEAU, 16, 128 << 10, &mc) +
                     pt_ahead_agrees(PL_PLAN_PLATEAU, 16, 1 << 20, &mc) +
                     pt_ahead_agrees(PL_PLAN_PLATEAU, 16, 1 << 20, &tiny);
  ck_assert_int_gt(ahead, 0);
}
END_TEST

START_TEST(auto_choice) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg base = pl_plan_cfg_plateau(16, 1 << 20);
  pl_plan_free fr = {.D = true,
                     .P = true,
                     .c = true,
                     .beta = true,
                     .sco = true,
                     .optim = true};
  pl_plan_search s;
  ck_assert_int_eq(pl_plan_auto(&m, &base, &fr, &mc, &s), PL_OK);
  ck_assert(s.have_best && s.feasible > 0 && s.tried >= s.feasible);
  ck_assert(s.best.cfg.lc.D > 1); /* 1M tokens per rank cannot fit */
  pl_plan_verdict v;
  ck_assert_int_eq(pl_plan_check(&m, &s.best.cfg, &mc, &v), PL_OK);
  ck_assert(v.fits);
  ck_assert(s.have_runner_up);
  ck_assert(s.best.time.tok_s_gpu >= s.runner_up.time.tok_s_gpu * 0.999);
  ck_assert(strlen(s.why_lost) > 0);
  /* nothing fits on a tiny device: the closest names its binding term */
  pl_plan_machine tiny = mc;
  tiny.hbm_bytes = 8 * GIB;
  ck_assert_int_eq(pl_plan_auto(&m, &base, &fr, &tiny, &s), PL_OK);
  ck_assert(!s.have_best);
  ck_assert(strlen(s.binding) > 0);
  ck_assert_ptr_nonnull(strstr(s.why_none, "closest"));
  /* the largest tokens per rank (FSDP2's below it:
   * baselines/fsdp2/test_fsdp2_planner.c) */
  const int64_t np = pl_plan_max_tokens(&m, &base, &fr, &mc, 8192, 1 << 21);
  ck_assert(np > 0);
  ck_assert(np % 8192 == 0);
  /* at that many tokens per rank (D = 1) something fits, at 2× nothing */
  pl_plan_cfg at = base;
  pl_plan_free nod = fr;
  nod.D = false;
  at.S = np;
  ck_assert_int_eq(pl_plan_auto(&m, &at, &nod, &mc, &s), PL_OK);
  ck_assert(s.have_best);
  at.S = 2 * np;
  ck_assert_int_eq(pl_plan_auto(&m, &at, &nod, &mc, &s), PL_OK);
  ck_assert(!s.have_best);
}
END_TEST

/* A first-fit search answers as the full search does (pt_first_fit_agrees,
 * plan_testlib.h), for plateau (FSDP2's: baselines/fsdp2/
 * test_fsdp2_planner.c). */
START_TEST(first_fit_agrees) {
  pt_first_fit_agrees(PL_PLAN_PLATEAU);
}
END_TEST

/* Expert groups (train/epgroups.h) at the paper's scale: 120B on 64 GPUs
 * (8 nodes).  Groups of a node move the dispatch onto NVLink (less
 * all-to-all time, exposed + hidden) for the expert units' gathers and
 * reduce-scatters (more unit time) and one gathered expert unit of HBM;
 * the search with Ep free tries both and says why it chose. */
START_TEST(expert_groups) {
  pl_model_cfg m = preset("120b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg w = pl_plan_cfg_plateau(64, 128 << 10), g = w;
  g.lc.Ep = 8;
  pl_plan_time tw, tg;
  ck_assert_int_eq(pl_plan_time_predict(&m, &w, &mc, &tw), PL_OK);
  ck_assert_int_eq(pl_plan_time_predict(&m, &g, &mc, &tg), PL_OK);
  const double a2a_w =
                   tw.part_s[PL_TPART_A2A_MOE] + tw.hidden_s[PL_TPART_A2A_MOE],
               a2a_g =
                   tg.part_s[PL_TPART_A2A_MOE] + tg.hidden_s[PL_TPART_A2A_MOE],
               u_w = tw.part_s[PL_TPART_UNITS] + tw.hidden_s[PL_TPART_UNITS],
               u_g = tg.part_s[PL_TPART_UNITS] + tg.hidden_s[PL_TPART_UNITS];
  ck_assert_msg(a2a_g < a2a_w, "all-to-all %g s with Ep=8, %g s with Ep=64",
                a2a_g, a2a_w);
  ck_assert_msg(u_g > u_w, "units %g s with Ep=8, %g s with Ep=64", u_g, u_w);
  pl_plan_mem mw, mg;
  ck_assert_int_eq(pl_plan_memory(&m, &w, &mc, -1, &mw), PL_OK);
  ck_assert_int_eq(pl_plan_memory(&m, &g, &mc, -1, &mg), PL_OK);
  /* one gathered expert unit more: 3·(E/8)·H·I·2 bytes at the peak */
  const double unit = 3.0 * (m.E / 8) * (double)m.H * (double)m.I * 2;
  ck_assert_msg(pl_plan_mem_tag_peak(&mg, "zero3") >=
                    pl_plan_mem_tag_peak(&mw, "zero3") + unit,
                "zero3 peak %zu with Ep=8, %zu with Ep=64, unit %.0f",
                pl_plan_mem_tag_peak(&mg, "zero3"),
                pl_plan_mem_tag_peak(&mw, "zero3"), unit);
  /* the dispatch bound is the group's */
  ck_assert_uint_eq(mg.dispatch_bound * 8, mw.dispatch_bound);
  /* searched: the choice and its reason */
  pl_plan_free fr = {.sco = true, .ep = true};
  pl_plan_search s;
  ck_assert_int_eq(pl_plan_auto(&m, &w, &fr, &mc, &s), PL_OK);
  ck_assert(s.have_best);
  ck_assert_msg(strstr(s.why_ep, "chosen over Ep="), "why_ep: '%s'", s.why_ep);
  const int ep = s.best.cfg.lc.Ep ? s.best.cfg.lc.Ep : 64;
  char want[16];
  snprintf(want, sizeof want, "Ep=%d", ep);
  ck_assert_msg(!strncmp(s.why_ep, want, strlen(want)), "'%s' vs %s", s.why_ep,
                want);
  /* a proxy planned as the 64-rank run it plays: groups of a node only
   * where they divide the ranks present (train/epgroups.h) */
  pl_plan_cfg px = w;
  px.present = 8; /* a node's group divides 8: searched as before */
  ck_assert_int_eq(pl_plan_auto(&m, &px, &fr, &mc, &s), PL_OK);
  ck_assert_msg(strstr(s.why_ep, "chosen over Ep="), "why_ep: '%s'", s.why_ep);
  px.present = 4; /* not 4: the world stays, and why_ep says why */
  ck_assert_int_eq(pl_plan_auto(&m, &px, &fr, &mc, &s), PL_OK);
  ck_assert(s.have_best);
  ck_assert_int_eq(s.best.cfg.lc.Ep, 0);
  ck_assert_msg(strstr(s.why_ep, "does not divide the ranks present"),
                "why_ep: '%s'", s.why_ep);
  /* refused naming the value: Ep not dividing W */
  g.lc.Ep = 3;
  ck_assert_int_eq(pl_plan_time_predict(&m, &g, &mc, &tg), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "Ep=3"));
}
END_TEST

/* The link model's sensitivity: inter-node bandwidth ±30% moves only the
 * communication of a run that spans nodes (a slower network, a longer step;
 * the compute parts unchanged), nothing within one node; the fraction is
 * refused outside (0, 1). */
START_TEST(link_sensitivity) {
  pl_model_cfg m = preset("241b");
  pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg w = pl_plan_cfg_plateau(32, 128 << 10);
  pl_plan_time t, lo, hi;
  ck_assert_int_eq(pl_plan_time_predict(&m, &w, &mc, &t), PL_OK);
  ck_assert_int_eq(pl_plan_link_sensitivity(&m, &w, &mc, 0.3, &lo, &hi), PL_OK);
  ck_assert_msg(lo.step_s > t.step_s && t.step_s > hi.step_s,
                "steps %g / %g / %g s", lo.step_s, t.step_s, hi.step_s);
  ck_assert_msg(lo.comm_s > t.comm_s && t.comm_s > hi.comm_s,
                "comm %g / %g / %g s", lo.comm_s, t.comm_s, hi.comm_s);
  const int compute[] = {PL_TPART_ATTN, PL_TPART_DENSE, PL_TPART_EXPERT,
                         PL_TPART_HEAD, PL_TPART_OPTIM};
  for (int i = 0; i < 5; i++)
    ck_assert_double_eq(lo.part_s[compute[i]], t.part_s[compute[i]]);
  /* the all-to-all alone: its inter-node share at 0.7x the bandwidth */
  const double a2a = t.part_s[PL_TPART_A2A_MOE] + t.hidden_s[PL_TPART_A2A_MOE],
               a2a_lo =
                   lo.part_s[PL_TPART_A2A_MOE] + lo.hidden_s[PL_TPART_A2A_MOE];
  ck_assert_msg(a2a_lo > a2a && a2a_lo <= a2a / 0.7 + 1e-9,
                "a2a %g s, at 0.7x the bandwidth %g s", a2a, a2a_lo);
  pl_plan_cfg one = pl_plan_cfg_plateau(8, 128 << 10);
  m = preset("120b");
  ck_assert_int_eq(pl_plan_time_predict(&m, &one, &mc, &t), PL_OK);
  ck_assert_int_eq(pl_plan_link_sensitivity(&m, &one, &mc, 0.3, &lo, &hi),
                   PL_OK);
  ck_assert_double_eq(lo.step_s, t.step_s);
  ck_assert_double_eq(hi.step_s, t.step_s);
  ck_assert_int_eq(pl_plan_link_sensitivity(&m, &one, &mc, 0, &lo, &hi),
                   PL_EINVAL);
  ck_assert_int_eq(pl_plan_link_sensitivity(&m, &one, &mc, 1, &lo, &hi),
                   PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "fraction 1"));
}
END_TEST

int main(void) {
  const TTest *tests[] = {link_sensitivity,     imb_rank_load,
                          machine_files,        machine_refusals,
                          eq6_terms_at_scale,   fsdp2_model,
                          fsdp2_attention_time, fsdp2_optim_copies_time,
                          check_names_binding,  auto_choice,
                          search_cost,          memo_ahead,
                          ahead_agrees,         first_fit_agrees,
                          expert_groups,        NULL};
  return pl_check_suite("plan", 120, tests, NULL, NULL, CK_FORK_GETENV, 0) ? 1
                                                                           : 0;
}
