/* plan_cmd.c — `plateau plan`: before spending an allocation, the per-rank
 * device budget of a training configuration term by term (Eq. 6 and the
 * transients our operators allocate), the host budget per node, whether it
 * fits and which term binds, the predicted step time and tok/s/GPU; with
 * knobs left free, the configuration of the highest predicted throughput
 * among those that fit and the runner-up; `--table paper`, the projection
 * of the paper's end-to-end points (plan_table.c).  Plateau or the FSDP2
 * baseline; the machine from defaults, calib and kernel-rate result files.
 * Everything is computed by engine/plan; this file parses and prints. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/options.h"
#include "plan/plan.h"
#include "plan_cmd.h"
#include "plan_mem.h"
#include "plan_table.h"
#include "plateau/timer.h"
#include "results/results.h"
#include "ticker.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char *const formats[] = {"table", "tsv", NULL};
static const char *const configs[] = {"auto", "explicit", NULL};
static const char *const heads[] = {"auto", pl_head_name_ring,
                                    pl_head_name_fused, NULL};
static const char *const onoff[] = {"off", "on", NULL};
static const char *const dtypes[] = {"bf16", "f32", NULL};
static const char *const backends[] = {"cuda", "cpu", NULL};
static const char *const tables[] = {"paper", NULL};

static const pl_opt plan_opts[] = {
    {"model", 0, PL_OPT_ENUM, "120b", "model preset", 0, 0,
     pl_model_preset_names},
    {"layers", 0, PL_OPT_INT, NULL, "override: decoder layers L", 1, 1024,
     NULL},
    {"experts", 0, PL_OPT_INT, NULL, "override: routed experts E", 0, 65536,
     NULL},
    {"topk", 0, PL_OPT_INT, NULL, "override: routes per token k", 1, 256, NULL},
    {"hidden", 0, PL_OPT_SIZE, NULL, "override: hidden H", 1, 1048576, NULL},
    {"ffn", 0, PL_OPT_SIZE, NULL, "override: routed expert width I", 1, 1048576,
     NULL},
    {"vocab", 0, PL_OPT_SIZE, NULL, "override: vocabulary V", 1, 1e9, NULL},
    {"dense-layers", 0, PL_OPT_INT, NULL, "override: the first N layers dense",
     0, 1024, NULL},
    {"gpus", 0, PL_OPT_INT, "16", "GPUs W (one rank each)", 1, 65536, NULL},
    {"gpus-per-node", 0, PL_OPT_INT, "8", "GPUs per node", 1, 1024, NULL},
    {"seq", 0, PL_OPT_SIZE, "128Ki", "sequence length S (context)", 2,
     1099511627776.0, NULL},
    {"host-mem", 0, PL_OPT_SIZE, NULL, "host RAM per node (default 2Ti)", 1,
     1e15, NULL},
    {"hbm", 0, PL_OPT_SIZE, NULL, "device memory per GPU (default 139.8Gi)", 1,
     1e15, NULL},
    {"system", 0, PL_OPT_ENUM, PL_PLAN_NAME_PLATEAU,
     PL_PLAN_NAME_PLATEAU " | " PL_PLAN_NAME_FSDP2 "; a comma list plans each "
                          "in turn, each with its own knobs",
     0, 0, pl_plan_system_names},
    {"config", 0, PL_OPT_ENUM, "auto",
     "auto: knobs not given are searched; explicit: they take defaults", 0, 0,
     configs},
    /* plateau's knobs */
    {"D", 0, PL_OPT_INT, NULL, "plateau: Ulysses group D", 1, 65536, NULL},
    {"P", 0, PL_OPT_INT, NULL, "plateau: Ring-DTP group P", 1, 65536, NULL},
    {"c", 0, PL_OPT_SIZE, NULL, "plateau: per-source token cap c (Eq. 1)", 1,
     1e12, NULL},
    {"beta", 0, PL_OPT_SIZE, NULL, "plateau: optimizer bucket beta (params)", 1,
     1e12, NULL},
    {"slots", 0, PL_OPT_INT, NULL, "plateau: staging slots s", 1, 64, NULL},
    {"sco", 0, PL_OPT_STR, NULL,
     "plateau: SCO host budget per rank: 0, all, or a size", 0, 0, NULL},
    {"optim", 0, PL_OPT_ENUM, NULL, "plateau: stream | hybrid", 0, 0,
     pl_optim_builtin_names},
    {"optim-resident", 0, PL_OPT_STR, NULL,
     "plateau: HBM for the optimizer's fp32 master, m, v (whole buckets): 0, "
     "all, auto (filled), or a size",
     0, 0, NULL},
    {"keep", 0, PL_OPT_STR, NULL,
     "plateau: activations kept for the backward: 0, attn (every layer's "
     "attention output + LSE), all (whole attention halves), auto (filled), "
     "or a device budget",
     0, 0, NULL},
    {"dispatch", 0, PL_OPT_ENUM, "pllep",
     "plateau: " PL_MOE_SHORT_NAMES_JOINED(" | "), 0, 0,
     pl_moe_variant_short_names},
    {"head", 0, PL_OPT_ENUM, "auto", "plateau: ring | fused (auto: by P)", 0, 0,
     heads},
    {"virtual", 0, PL_OPT_INT, NULL,
     "the virtual world W_v of a one-GPU proxy (a multiple of gpus)", 1, 65536,
     NULL},
    {"dtype", 0, PL_OPT_ENUM, "bf16", "bf16 | f32", 0, 0, dtypes},
    {"imb", 0, PL_OPT_F64, "1",
     "router skew: the measured rank's experts get imb x their balanced "
     "share of routes (>= 1; at most Ep: every route)",
     1, 1e6, NULL},
    /* both */
    {"ep", 0, PL_OPT_INT, NULL,
     "expert-parallel degree (plateau: the expert group, W_v or a divisor "
     "of gpus: groups of Ep ranks each holding all experts as ZeRO-3 units)",
     1, 65536, NULL},
    {"tokens", 0, PL_OPT_SIZE, NULL,
     "tokens per step (micro-batches accumulated); default one pass", 1, 1e15,
     NULL},
    {"micro", 0, PL_OPT_INT, NULL, "micro-batches per step", 1, 1 << 20, NULL},
    /* fsdp2's knobs */
    {"cp", 0, PL_OPT_INT, NULL, "fsdp2: context-parallel degree", 1, 65536,
     NULL},
    {"ac", 0, PL_OPT_ENUM, NULL, "fsdp2: activation checkpointing", 0, 0,
     pl_plan_ac_names},
    {"offload", 0, PL_OPT_ENUM, NULL, "fsdp2: CPU offload on | off", 0, 0,
     onoff},
    /* the machine */
    {"calib", 0, PL_OPT_STR, NULL,
     "result files (calib, attention, adam, moegemm, torch_adamw), "
     "comma-separated",
     0, 0, NULL},
    {"set", 0, PL_OPT_STR, NULL,
     "machine parameters key=value[,key=value] (--machine lists them)", 0, 0,
     NULL},
    {"backend", 0, PL_OPT_ENUM, "cuda", "the target device: cuda | cpu", 0, 0,
     backends},
    {"machine", 0, PL_OPT_FLAG, NULL, "print the machine and exit", 0, 0, NULL},
    /* output */
    {"format", 0, PL_OPT_ENUM, "table", "table | tsv", 0, 0, formats},
    {"table", 0, PL_OPT_ENUM, NULL,
     "paper: the projection of the paper's end-to-end points", 0, 0, tables},
    {"out", 'o', PL_OPT_STR, NULL,
     "--table: directory for plan_paper.md, .tsv, plan_reach.tsv/.svg/.png", 0,
     0, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: plateau plan [options]\n"
          "  The per-rank memory budget, feasibility and predicted throughput "
          "of a\n  training configuration, before launch (engine/plan).  Knobs "
          "not given are\n  chosen to maximize predicted tok/s/GPU among "
          "configurations that fit\n  (--config explicit: defaults instead).  "
          "--table paper projects the\n  paper's points.  Memory is measured: "
          "each candidate's trainer is\n  built and stepped once on a dry "
          "device (its rank 0 in one process, every\n  group virtual; "
          "allocations tracked, none backed, no kernel run).\n  "
          "Exit: 0 fits, "
          "1 does not fit, 2 bad input, 3 error.\n\n");
  pl_args_usage(plan_opts, f);
}

static int bad(const char *what) {
  fprintf(stderr, "plateau plan: %s\n", what);
  return 2;
}

/* ---- the model and the machine ------------------------------------------ */

static pl_status model_of(const pl_args *a, pl_model_cfg *m) {
  PL_TRY(pl_model_preset(pl_args_enum_name(a, "model"), m));
  if (pl_args_given(a, "layers"))
    m->L = (int)pl_args_int(a, "layers");
  if (pl_args_given(a, "experts"))
    m->E = (int)pl_args_int(a, "experts");
  if (pl_args_given(a, "topk"))
    m->k = (int)pl_args_int(a, "topk");
  if (pl_args_given(a, "hidden"))
    m->H = (int64_t)pl_args_size(a, "hidden");
  if (pl_args_given(a, "ffn"))
    m->I = (int64_t)pl_args_size(a, "ffn");
  if (pl_args_given(a, "vocab"))
    m->V = (int64_t)pl_args_size(a, "vocab");
  if (pl_args_given(a, "dense-layers"))
    m->dense_layers = (int)pl_args_int(a, "dense-layers");
  return pl_model_cfg_check(m);
}

/* comma-separated items of option opt's value s, each given to fn; an
 * empty item (",a", "a,,b", "a,") is refused, as in every list option */
static pl_status each_item(const char *opt, const char *s, pl_plan_machine *mc,
                           pl_status (*fn)(pl_plan_machine *, const char *)) {
  char buf[4096];
  if (strlen(s) >= sizeof buf)
    return pl_set_error(PL_EINVAL,
                        "--%s: %zu characters (allowed: at most %zu)", opt,
                        strlen(s), sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", s);
  for (char *p = buf;;) {
    char *comma = strchr(p, ',');
    if (comma)
      *comma = 0;
    if (!*p)
      return pl_set_error(PL_EINVAL,
                          "--%s=%s: empty list element (allowed: items "
                          "separated by single commas)",
                          opt, s);
    PL_TRY(fn(mc, p));
    if (!comma)
      return PL_OK;
    p = comma + 1;
  }
}

/* A --calib file: a plateau result file of a schema this build reads (as
 * `bench train --calib` requires; a regular file), then its rates. */
static pl_status load_calib(pl_plan_machine *mc, const char *path) {
  pl_table t;
  if (pl_table_read(path, &t) != PL_OK) {
    return pl_error_prefix(PL_EINVAL, "--calib: ");
  }
  pl_table_free(&t);
  return pl_plan_machine_load(mc, path);
}

static pl_status machine_of(const pl_args *a, pl_plan_machine *mc) {
  *mc = pl_plan_machine_default();
  mc->backend =
      pl_args_enum(a, "backend") == 1 ? PL_BACKEND_CPU : PL_BACKEND_CUDA;
  mc->gpus_per_node = (int)pl_args_int(a, "gpus-per-node");
  if (pl_args_str(a, "calib"))
    PL_TRY(each_item("calib", pl_args_str(a, "calib"), mc, load_calib));
  if (pl_args_str(a, "set"))
    PL_TRY(each_item("set", pl_args_str(a, "set"), mc, pl_plan_machine_set));
  if (pl_args_given(a, "hbm"))
    mc->hbm_bytes = (double)pl_args_size(a, "hbm");
  if (pl_args_given(a, "host-mem"))
    mc->host_bytes = (double)pl_args_size(a, "host-mem");
  if (mc->hbm_reserve >= mc->hbm_bytes)
    return pl_set_error(PL_EINVAL,
                        "--hbm=%.0f bytes: must exceed the reserve of %.0f "
                        "(set hbm_reserve with --set)",
                        mc->hbm_bytes, mc->hbm_reserve);
  if (mc->host_reserve >= mc->host_bytes)
    return pl_set_error(PL_EINVAL,
                        "--host-mem=%.0f bytes: must exceed the reserve of "
                        "%.0f (set host_reserve with --set)",
                        mc->host_bytes, mc->host_reserve);
  return PL_OK;
}

/* ---- the configuration --------------------------------------------------- */

static int divides(int a, int b) {
  return a > 0 && b % a == 0;
}

/* A group of g over W GPUs: real (g divides W) or, in a proxy of W_v,
 * virtual (g·W divides W_v; train/layout.h). */
static int group_ok(int g, int W, int Wv) {
  return divides(g, W) || (g > 0 && Wv > W && Wv % W == 0 && Wv % (g * W) == 0);
}

/* --optim-resident and --keep: a budget given is fixed; auto (or not given
 * under --config auto) is the planner's fill (pl_plan_fill) */
static pl_status headroom_of(const pl_args *a, bool autoc, pl_plan_cfg *c,
                             pl_plan_free *fr) {
  pl_headroom_mode md;
  uint64_t b;
  fr->resident = autoc, fr->keep = autoc;
  if (pl_args_given(a, "optim-resident")) {
    PL_TRY(pl_headroom_parse("--optim-resident",
                             pl_args_str(a, "optim-resident"), false, &md, &b));
    fr->resident = md == PL_HEADROOM_AUTO;
    c->sc.oo.resident_all = md == PL_HEADROOM_ALL;
    c->sc.oo.resident_bytes = b;
  }
  if (pl_args_given(a, "keep")) {
    PL_TRY(pl_headroom_parse("--keep", pl_args_str(a, "keep"), true, &md, &b));
    fr->keep = md == PL_HEADROOM_AUTO;
    c->sc.keep = (pl_keep_budget){md == PL_HEADROOM_ATTN  ? PL_KEEP_ATTN
                                  : md == PL_HEADROOM_ALL ? PL_KEEP_ALL
                                                          : PL_KEEP_BYTES,
                                  b};
  }
  return PL_OK;
}

/* FSDP2's configuration and free knobs (--cp, --ep, --ac, --offload,
 * --virtual) at W GPUs and context S: one sequence per CP group per
 * micro-batch, as the baseline runs. */
static pl_status fsdp2_config_of(const pl_args *a, const pl_model_cfg *m, int W,
                                 int64_t S, bool autoc, pl_plan_cfg *c,
                                 pl_plan_free *fr) {
  *c = pl_plan_cfg_fsdp2(m, W, S);
  fr->cp = autoc && !pl_args_given(a, "cp");
  fr->ep = autoc && !pl_args_given(a, "ep");
  fr->ac = autoc && !pl_args_given(a, "ac");
  fr->offload = autoc && !pl_args_given(a, "offload");
  if (pl_args_given(a, "cp"))
    c->cp = (int)pl_args_int(a, "cp");
  if (pl_args_given(a, "ep"))
    c->ep = (int)pl_args_int(a, "ep");
  if (pl_args_given(a, "ac"))
    c->ac = (pl_plan_ac)pl_args_enum(a, "ac");
  if (pl_args_given(a, "offload"))
    c->offload = pl_args_enum(a, "offload") == 1;
  if (pl_args_given(a, "virtual"))
    c->lc.W_v = (int)pl_args_int(a, "virtual");
  const int Wv = c->lc.W_v ? c->lc.W_v : W;
  if (!group_ok(c->cp, W, Wv))
    return pl_set_error(PL_EINVAL,
                        "--cp=%d: must divide --gpus=%d (or, with --virtual, "
                        "cp·gpus divide W_v=%d: a virtual group)",
                        c->cp, W, Wv);
  if (S % (2 * c->cp))
    return pl_set_error(PL_EINVAL,
                        "--seq=%lld: must be a multiple of 2·cp = %d (the "
                        "load-balanced split)",
                        (long long)S, 2 * c->cp);
  if (!divides(c->ep, Wv) || (m->E > 0 && m->E % c->ep))
    return pl_set_error(PL_EINVAL,
                        "--ep=%d: must divide --gpus=%d (--virtual: W_v) "
                        "and E=%d",
                        c->ep, Wv, m->E);
  return PL_OK;
}

/* plateau's configuration and free knobs (--D, --P, --virtual, --head, --c,
 * --beta, --slots, --sco, --optim, --dispatch, the headroom) at W GPUs and
 * context S. */
static pl_status plateau_config_of(const pl_args *a, int W, int64_t S,
                                   bool autoc, pl_plan_cfg *c,
                                   pl_plan_free *fr) {
  *c = pl_plan_cfg_plateau(W, S);
  fr->D = autoc && !pl_args_given(a, "D");
  fr->P = autoc && !pl_args_given(a, "P");
  fr->c = autoc && !pl_args_given(a, "c");
  fr->beta = autoc && !pl_args_given(a, "beta");
  fr->sco = autoc && !pl_args_given(a, "sco");
  fr->optim = autoc && !pl_args_given(a, "optim");
  /* expert groups (train/epgroups.h): --ep, or the search's */
  fr->ep = autoc && !pl_args_given(a, "ep");
  if (pl_args_given(a, "ep"))
    c->lc.Ep = (int)pl_args_int(a, "ep");
  if (pl_args_given(a, "D"))
    c->lc.D = (int)pl_args_int(a, "D");
  if (pl_args_given(a, "P"))
    c->lc.P = (int)pl_args_int(a, "P");
  if (pl_args_given(a, "virtual"))
    c->lc.W_v = (int)pl_args_int(a, "virtual");
  const int Wv = c->lc.W_v ? c->lc.W_v : W;
  if (!group_ok(c->lc.D, W, Wv) || !group_ok(c->lc.P, W, Wv))
    return pl_set_error(PL_EINVAL,
                        "--D=%d --P=%d: both must divide --gpus=%d (or, "
                        "with --virtual, D·gpus and P·gpus divide W_v=%d: "
                        "virtual groups)",
                        c->lc.D, c->lc.P, W, Wv);
  if (S % c->lc.D)
    return pl_set_error(PL_EINVAL, "--seq=%lld: must be a multiple of D=%d",
                        (long long)S, c->lc.D);
  const int h = pl_args_enum(a, "head"); /* 0 auto, then the built-ins */
  c->sc.head = h             ? pl_head_builtins[h - 1]
               : c->lc.P > 1 ? &pl_head_ring
                             : &pl_head_fused;
  if (c->sc.head == &pl_head_fused && h && c->lc.P > 1)
    return pl_set_error(PL_EINVAL,
                        "--head=fused with --P=%d: the fused head is P = 1",
                        c->lc.P);
  if (pl_args_given(a, "c"))
    c->sc.moe_c = (int64_t)pl_args_size(a, "c");
  if (pl_args_given(a, "beta"))
    c->sc.oo.bucket = (size_t)pl_args_size(a, "beta");
  if (pl_args_given(a, "slots"))
    c->sc.oo.slots = (int)pl_args_int(a, "slots");
  if (pl_args_given(a, "sco"))
    PL_TRY(pl_sco_parse_budget("--sco", pl_args_str(a, "sco"), &c->sc.sco));
  if (pl_args_given(a, "optim"))
    c->sc.optim = pl_optim_builtins[pl_args_enum(a, "optim")];
  c->sc.dispatch = (pl_moe_variant)pl_args_enum(a, "dispatch");
  PL_TRY(headroom_of(a, autoc, c, fr));
  return PL_OK;
}

/* The knobs of one system only: given with the other, they are refused
 * (and a --system list passes each system its own). */
static const char *const plateau_only[] = {
    "D",    "P", "c", "beta", "slots", "sco", "optim", "optim-resident",
    "keep", NULL};
static const char *const fsdp2_only[] = {"cp", "ac", "offload", NULL};

/* base configuration and the free knobs from the options */
static pl_status config_of(const pl_args *a, const pl_model_cfg *m,
                           pl_plan_cfg *c, pl_plan_free *fr) {
  const int W = (int)pl_args_int(a, "gpus");
  const int64_t S = (int64_t)pl_args_size(a, "seq");
  const bool fsdp2 = pl_args_enum(a, "system") == 1;
  const bool autoc = pl_args_enum(a, "config") == 0;
  memset(fr, 0, sizeof *fr);
  const char *const *wrong = fsdp2 ? plateau_only : fsdp2_only;
  for (int i = 0; wrong[i]; i++)
    if (pl_args_given(a, wrong[i]))
      return pl_set_error(PL_EINVAL,
                          "--%s: a knob of %s (allowed with --system=%s: "
                          "see --help)",
                          wrong[i],
                          fsdp2 ? PL_PLAN_NAME_PLATEAU : PL_PLAN_NAME_FSDP2,
                          fsdp2 ? PL_PLAN_NAME_FSDP2 : PL_PLAN_NAME_PLATEAU);
  if (fsdp2)
    PL_TRY(fsdp2_config_of(a, m, W, S, autoc, c, fr));
  else
    PL_TRY(plateau_config_of(a, W, S, autoc, c, fr));
  if (pl_args_given(a, "virtual")) /* a proxy: the --gpus ranks present */
    c->present = W;
  c->sc.dt = pl_args_enum(a, "dtype") == 1 ? PL_F32 : PL_BF16;
  c->imb = pl_args_f64(a, "imb");
  if (pl_args_given(a, "micro"))
    c->sc.micro = (int)pl_args_int(a, "micro");
  if (pl_args_given(a, "tokens")) {
    /* a fixed layout must divide it; a searched one is chosen among those
     * that do (sc.micro follows) */
    const int64_t t = (int64_t)pl_args_size(a, "tokens");
    c->tokens_step = t;
    const bool layout_fixed = fsdp2 ? !fr->cp : !fr->D;
    const int64_t per = pl_plan_tokens_per_step(c) / c->sc.micro;
    if (per <= 0 || t % per) {
      if (layout_fixed)
        return pl_set_error(PL_EINVAL,
                            "--tokens=%lld: must be a multiple of one pass's "
                            "%lld tokens (W/%s sequences of S%s)",
                            (long long)t, (long long)per, fsdp2 ? "cp" : "D",
                            fsdp2 ? ": one per CP group per micro-batch" : "");
    } else {
      c->sc.micro = (int)(t / per);
    }
    if (pl_args_given(a, "micro"))
      return pl_set_error(PL_EINVAL,
                          "--tokens and --micro: give one (tokens per step "
                          "sets the micro-batches)");
  }
  return PL_OK;
}

/* ---- printing ------------------------------------------------------------ */

/* The peak if every route went to one rank, and whether it fits, in words
 * (the verdict assumes balanced routing). */
static void print_adversarial(FILE *f, const pl_plan_cfg *c,
                              const pl_plan_mem *mem, double usable) {
  char a[32], b[32];
  const double over = (double)mem->dev_worst - usable;
  fprintf(f, "  adversarial routing (every route to one rank): %s: ",
          pl__plan_hb((double)mem->dev_worst, a, sizeof a));
  if (over <= 0)
    fprintf(f, "fits (%s headroom)", pl__plan_hb(-over, b, sizeof b));
  else
    fprintf(f, "DOES NOT FIT (%s over the usable)",
            pl__plan_hb(over, b, sizeof b));
  if (!pl_moe_variant_desc_of(c->sc.dispatch)->chunks) {
    /* the variants without chunks ("ep / llep") */
    fprintf(f, "; ");
    for (int v = 0, n = 0; v < PL_MOE_VARIANT_COUNT; v++)
      if (!pl_moe_variants[v].chunks)
        fprintf(f, "%s%s", n++ ? " / " : "", pl_moe_variants[v].short_name);
    fprintf(f, ": the receiving rank's buffers grow with its routes, "
               "unbounded\n");
  } else {
    fprintf(f, "%s\n",
            over <= 0 ? "; held by the pipelined dispatch's per-chunk bound "
                        "(below)"
                      : "; the pipelined dispatch bounds it per chunk "
                        "(below): a smaller --c lowers it until the chunks "
                        "reach their maximum number");
  }
}

/* The link model's reach: the step with the inter-node bandwidth 30% lower
 * and higher (a user's network may differ from the machine's ib_gbs). */
#define LINK_FRAC PL_PLAN_LINK_FRAC
static void print_link_sensitivity(FILE *f, const pl_model_cfg *m,
                                   const pl_plan_cfg *c,
                                   const pl_plan_machine *mc,
                                   const pl_plan_time *t) {
  if (c->W <= mc->gpus_per_node) {
    fprintf(f, "  inter-node bandwidth: not used (%d GPU(s), nodes of %d)\n",
            c->W, mc->gpus_per_node);
    return;
  }
  pl_plan_time lo, hi;
  if (pl_plan_link_sensitivity(m, c, mc, LINK_FRAC, &lo, &hi) != PL_OK)
    return;
  fprintf(f,
          "  inter-node bandwidth -/+%.0f%% (ib_gbs %.4g / %.4g GB/s): step "
          "%.3f / %.3f s, %.0f / %.0f tok/s/GPU (%+.1f%% / %+.1f%%)\n",
          100 * LINK_FRAC, mc->ib_gbs * (1 - LINK_FRAC),
          mc->ib_gbs * (1 + LINK_FRAC), lo.step_s, hi.step_s, lo.tok_s_gpu,
          hi.tok_s_gpu, 100 * (lo.tok_s_gpu / t->tok_s_gpu - 1),
          100 * (hi.tok_s_gpu / t->tok_s_gpu - 1));
}

static void print_table(FILE *f, const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_machine *mc, const pl_plan_verdict *v,
                        const pl_plan_time *t, const pl_plan_search *s,
                        bool searched) {
  const pl_plan_mem *mem = &v->mem;
  const pl_model_params pc = pl_model_count(m);
  char a[32], b[32], cfg[256];
  const int gpn = mc->gpus_per_node < c->W ? mc->gpus_per_node : c->W;
  fprintf(f,
          "# plateau plan (a projection): %s, %.2f B parameters (%.2f B "
          "active per token), GQA attention\n",
          m->name, pc.total / 1e9, pc.active / 1e9);
  fprintf(f,
          "# %s on %d GPUs (%d per node), sequence %lld, %lld tokens per "
          "rank, %lld per step\n",
          pl_plan_system_name(c->system), c->W, mc->gpus_per_node,
          (long long)c->S, (long long)pl_plan_tokens_per_rank(c),
          (long long)pl_plan_tokens_per_step(c));
  fprintf(f, "# machine: %s; target %s\n", mc->source,
          mc->backend == PL_BACKEND_CUDA ? "cuda" : "cpu");
  pl_plan_cfg_str(c, cfg, sizeof cfg);
  if (searched)
    fprintf(f,
            "# configuration (chosen: %d tried, %d fit, %d skipped as slower "
            "at best): %s\n",
            s->tried, s->feasible, s->skipped, cfg);
  else
    fprintf(f, "# configuration: %s\n", cfg);
  if (searched && s->have_best && s->best.fill[0])
    fprintf(f, "# %s\n", s->best.fill);
  fprintf(f, "\nper-rank device memory at the peak (%s):\n", mem->peak_phase);
  fprintf(f, "  %-11s %12s %12s  %s\n", "term", "at peak", "own peak",
          "formula");
  for (int i = 0; i < PL_TERM_COUNT; i++) {
    if (!mem->term[i] && !mem->term_peak[i])
      continue;
    fprintf(f, "  %-11s %12s %12s  %s\n", pl_plan_term_name(i),
            pl__plan_hb((double)mem->term[i], a, sizeof a),
            pl__plan_hb((double)mem->term_peak[i], b, sizeof b),
            c->system == PL_PLAN_FSDP2 ? pl_plan_fsdp2_term_formula(i)
                                       : pl_plan_term_formula(i));
  }
  const double usable = pl_plan_hbm_usable(mc);
  fprintf(f, "  %-11s %12s of %s usable (HBM %s)\n", "total",
          pl__plan_hb((double)mem->dev_peak, a, sizeof a),
          pl__plan_hb(usable, b, sizeof b),
          pl__plan_hb(mc->hbm_bytes, cfg, sizeof cfg));
  if (c->system == PL_PLAN_PLATEAU) {
    print_adversarial(f, c, mem, usable);
    if (mem->dispatch_bound)
      fprintf(f,
              "  dispatch bound 2·Ep·k·c_eff·H·b = %s (K = %d, c_eff = %lld)\n",
              pl__plan_hb((double)mem->dispatch_bound, a, sizeof a), mem->K,
              (long long)mem->c_eff);
  }
  char live[1024];
  pl__plan_live_set(mem, false, live, sizeof live);
  fprintf(f, "  live set by allocator tag: %s\n", live);
  fprintf(f, "\nhost memory per node (%d ranks):\n", gpn);
  fprintf(f, "  optimizer state   %s per rank\n",
          pl__plan_hb((double)mem->host_optim, a, sizeof a));
  if (mem->host_sco)
    fprintf(f, "  SCO boundaries    %s per rank (|S| = %d)\n",
            pl__plan_hb((double)mem->host_sco, a, sizeof a), mem->sco_layers);
  fprintf(f, "  total             %s of %s usable\n",
          pl__plan_hb((double)mem->host_node, a, sizeof a),
          pl__plan_hb(mc->host_bytes - mc->host_reserve, b, sizeof b));
  fprintf(f, "\n%s", v->fits ? "fits" : "DOES NOT FIT");
  if (!v->fits)
    fprintf(f, " — binding term: %s (%s)", v->binding, v->why);
  else
    fprintf(f, ": %s device headroom",
            pl__plan_hb(usable - (double)mem->dev_peak, a, sizeof a));
  if (v->fits && c->system == PL_PLAN_PLATEAU)
    fprintf(f, " with balanced routing%s",
            v->fits_worst ? " (and with adversarial routing)"
                          : "; NOT with adversarial routing (above)");
  fprintf(f, "\n");
  if (!v->fits && (!searched || !s->have_best)) {
    if (searched && s->why_none[0])
      fprintf(f, "no configuration fits; %s\n", s->why_none);
    return;
  }
  fprintf(f,
          "\npredicted step: %.3f s, %.0f tok/s/GPU, %.0f TFLOP/s/GPU "
          "(model FLOPs), MFU %.0f%%\n",
          t->step_s, t->tok_s_gpu, t->tflops_gpu, 100 * t->mfu);
  fprintf(f, "  %-10s %10s %10s\n", "part", "exposed s", "hidden s");
  for (int i = 0; i < PL_TPART_COUNT; i++)
    if (t->part_s[i] > 0 || t->hidden_s[i] > 0)
      fprintf(f, "  %-10s %10.3f %10.3f\n", pl_plan_tpart_name(i), t->part_s[i],
              t->hidden_s[i]);
  print_link_sensitivity(f, m, c, mc, t);
  if (searched && s->why_ep[0])
    fprintf(f, "\nexpert groups: %s\n", s->why_ep);
  if (searched && s->have_runner_up)
    fprintf(f, "\nrunner-up: %s\n", s->why_lost);
}

void pl_plan_print_budget(FILE *f, const pl_model_cfg *m, const pl_plan_cfg *c,
                          const pl_plan_machine *mc, const pl_plan_verdict *v,
                          const pl_plan_time *t) {
  print_table(f, m, c, mc, v, t, NULL, false);
}

/* ---- main ------------------------------------------------------------------
 */

/* The model and the machine of the arguments. */
static pl_status model_machine(const pl_args *a, pl_model_cfg *m,
                               pl_plan_machine *mc) {
  PL_TRY(model_of(a, m));
  return machine_of(a, mc);
}

/* The plan of *c: searched first when a knob is free (*c becomes the
 * choice, or the closest to fitting), checked, timed if it fits. */
static pl_status plan_of(const pl_model_cfg *m, pl_plan_cfg *c,
                         const pl_plan_free *fr, const pl_plan_machine *mc,
                         bool searched, pl_plan_search *s, pl_plan_verdict *v,
                         pl_plan_time *t) {
  if (searched) {
    pl__ticker tk;
    const bool ticking =
        pl__ticker_start(&tk, "[plan] searching the configurations");
    pl_status st = pl_plan_auto(m, c, fr, mc, s);
    if (ticking)
      pl__ticker_stop(&tk);
    PL_TRY(st);
    *c = s->best.cfg;
  }
  PL_TRY(pl_plan_check(m, c, mc, v));
  if (v->fits)
    PL_TRY(pl_plan_time_predict(m, c, mc, t));
  return PL_OK;
}

static int plan_one(int argc, char **argv) {
  pl_args *a = NULL;
  bool help = false;
  pl_status st = pl_args_parse(plan_opts, argc - 1, argv + 1, 0, &a, &help);
  if (st != PL_OK) {
    fprintf(stderr, "plateau plan: %s\n", pl_last_error());
    return 2;
  }
  if (help) {
    usage(stdout);
    pl_args_free(a);
    return 0;
  }
  int code = 0;
  pl_model_cfg m;
  pl_plan_machine mc;
  if (model_machine(a, &m, &mc) != PL_OK) {
    code = bad(pl_last_error());
    goto out;
  }
  if (pl_args_flag(a, "machine")) {
    pl_plan_machine_print(&mc, stdout);
    goto out;
  }
  const bool tsv = pl_args_enum(a, "format") == 1;
  if (pl_args_given(a, "table")) {
    const char *dir = pl_args_str(a, "out");
    if (dir && pl_plan_table_check_out(dir) != PL_OK) {
      code = bad(pl_last_error());
      goto out;
    }
    code = pl_plan_table_paper(&mc, dir, tsv);
    goto out;
  }
  if (pl_args_given(a, "out")) {
    code = bad("--out: only with --table (a plan prints to stdout)");
    goto out;
  }
  pl_plan_cfg c;
  pl_plan_free fr;
  if (config_of(a, &m, &c, &fr) != PL_OK) {
    code = bad(pl_last_error());
    goto out;
  }
  const bool searched = fr.D || fr.P || fr.c || fr.beta || fr.sco || fr.optim ||
                        fr.cp || fr.ep || fr.ac || fr.offload || fr.resident ||
                        fr.keep;
  pl_plan_search *s = calloc(1, sizeof *s);
  pl_plan_verdict *v = calloc(1, sizeof *v);
  pl_plan_time t;
  memset(&t, 0, sizeof t);
  if (!s || !v) {
    free(s), free(v);
    code = 3;
    goto out;
  }
  const uint64_t t0 = pl_now_ns();
  st = plan_of(&m, &c, &fr, &mc, searched, s, v, &t);
  const double search_s = pl_elapsed_s(t0);
  if (st == PL_EINVAL || st == PL_EUNSUPPORTED) {
    code = bad(pl_last_error());
  } else if (st == PL_EINFEASIBLE) { /* beyond any device: a verdict */
    printf("plateau plan: %s\n", pl_last_error());
    code = 1;
  } else if (st != PL_OK) {
    fprintf(stderr, "plateau plan: %s\n", pl_last_error());
    code = 3;
  } else {
    if (tsv)
      pl__plan_print_tsv(stdout, &m, &c, &mc, v, &t);
    else
      print_table(stdout, &m, &c, &mc, v, &t, s, searched);
    if (!tsv)
      pl__plan_measured_print(stdout, &c, &mc, searched ? s : NULL, search_s);
    code = v->fits ? 0 : 1;
  }
  free(s);
  free(v);
out:
  pl_args_free(a);
  return code;
}

/* Is argv[i] option `--name` (as "--name=V" or "--name V")?  *v gets V and
 * *used the argv entries it takes (1 or 2). */
static bool opt_at(int argc, char **argv, int i, const char *name,
                   const char **v, int *used) {
  const size_t n = strlen(name);
  if (strncmp(argv[i], "--", 2) || strncmp(argv[i] + 2, name, n))
    return false;
  const char *rest = argv[i] + 2 + n;
  if (*rest == '=') {
    *v = rest + 1, *used = 1;
    return true;
  }
  if (*rest == '\0') {
    *v = i + 1 < argc ? argv[i + 1] : NULL, *used = 2;
    return true;
  }
  return false;
}

/* `--system plateau,fsdp2` (as `plateau bench train` takes it): the plan
 * of each system in turn, each given its own knobs and the shared ones;
 * the exit code is the worst of theirs (0 fits, 1 does not fit, 2, 3). */
int pl_plan_main(int argc, char **argv) {
  const char *list = NULL;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int used;
    if (!strcmp(argv[i], "--"))
      break;
    if (opt_at(argc, argv, i, "system", &v, &used) && v && strchr(v, ','))
      list = v;
  }
  if (!list) {
    const int code = plan_one(argc, argv);
    pl_finalize();
    return code;
  }
  const size_t ll = strlen(list);
  if (list[0] == ',' || list[ll - 1] == ',' || strstr(list, ",,"))
    return bad("--system: an empty element in the comma list");
  char names[256];
  snprintf(names, sizeof names, "%s", list);
  const char *sys[8];
  int ns = 0;
  for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ",")) {
    if (strcmp(tok, PL_PLAN_NAME_PLATEAU) && strcmp(tok, PL_PLAN_NAME_FSDP2))
      return bad("--system: each of a comma list must be " PL_PLAN_NAME_PLATEAU
                 " or " PL_PLAN_NAME_FSDP2);
    for (int j = 0; j < ns; j++)
      if (!strcmp(sys[j], tok))
        return bad("--system: a system named twice in the list");
    if (ns == 8)
      return bad("--system: too many systems in the list");
    sys[ns++] = tok;
  }
  if (ns == 0)
    return bad("--system: an empty list");
  for (int i = 1; i < argc; i++) {
    const char *v;
    int used;
    if (opt_at(argc, argv, i, "format", &v, &used) && v && !strcmp(v, "tsv"))
      return bad("--system with a list and --format=tsv: give one system "
                 "(one TSV header per output)");
    if (opt_at(argc, argv, i, "table", &v, &used))
      return bad("--system with a list and --table: give one system");
  }
  char **av = calloc((size_t)argc + 2, sizeof *av);
  if (!av)
    return 3;
  int worst = 0;
  for (int k = 0; k < ns; k++) {
    const bool fsdp2 = !strcmp(sys[k], PL_PLAN_NAME_FSDP2);
    int n = 0;
    av[n++] = argv[0];
    for (int i = 1; i < argc;) {
      const char *v;
      int used = 1;
      bool drop = opt_at(argc, argv, i, "system", &v, &used);
      for (const char *const *l = fsdp2 ? plateau_only : fsdp2_only;
           *l && !drop; l++)
        drop = opt_at(argc, argv, i, *l, &v, &used);
      if (!drop)
        used = 1;
      for (int j = 0; j < used && i + j < argc; j++)
        if (!drop)
          av[n++] = argv[i + j];
      i += used;
    }
    char opt[64];
    snprintf(opt, sizeof opt, "--system=%s", sys[k]);
    av[n++] = opt;
    av[n] = NULL;
    printf("%s== plateau plan --system=%s\n", k ? "\n" : "", sys[k]);
    fflush(stdout);
    const int code = plan_one(n, av);
    if (code > worst)
      worst = code;
  }
  free(av);
  pl_finalize();
  return worst;
}
