/* train_args.c — `plateau bench train`'s command line: its option table
 * (with --help's groups and the presets) and the options into a
 * configuration (train_types.h): the model (a preset and its overridden sizes),
 * the layout, the contexts, the step's switches, fsdp2's knobs, the data, the
 * systems and the GEMM rate MFU is taken against; the planner's machine
 * and options; the points of the run (every context × system; --tune:
 * fsdp2 at every knob setting of pl_fsdp2_tune_points per context;
 * --points FILE: the points fsdp2 shares with the PyTorch peer; --config
 * auto: the planner's choice per context); every value checked before
 * anything runs (a bad one: PL_EINVAL naming it, exit 2, nothing written);
 * and --describe (the description and the planner's budget). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../baselines/train_baselines.h"
#include "report/report_util.h"
#include "results/results.h"
#include "train_args.h"
#include "train_plan.h"
#include "train_system.h"

/* The dense bf16 GEMM rate MFU is taken against when neither --gemm-tflops
 * nor --calib gives one: one H200's cuBLAS bf16 8192³ GEMM as
 * `plateau bench calib` measures it (the 8192³ gemm rows of
 * results/reference/h200x2/calib.20261130T05*.tsv: 685–788). */
#define PL_TRAIN_H200_GEMM_TFLOPS 790.0

static const char *const dtypes[] = {"bf16", "f32", NULL};
static const char *const configs[] = {"explicit", "auto", NULL};

/* ---- the options ------------------------------------------------------- */
const pl_opt pl__train_opts[] = {
    {"layers", 0, PL_OPT_INT, NULL, "decoder layers L", 1, 4096, NULL},
    {"hidden", 0, PL_OPT_INT, NULL, "hidden size H", 1, 1 << 20, NULL},
    {"dtype", 0, PL_OPT_ENUM, "bf16",
     "activation and weight storage (f32: --check's reference step)", 0, 0,
     dtypes},
    {"tokens", 0, PL_OPT_SIZE_LIST, NULL,
     "tokens per rank N instead of --seq (S = N·D; maxbatch's trials)", 1, 1e12,
     NULL},
    {"tune", 0, PL_OPT_FLAG, NULL,
     "fsdp2 at every knob setting a torchtitan user would try per context "
     "(cp, ep, AC full|selective, gpu|cpu optimizer; pl_fsdp2_tune_points): "
     "one row each; the report takes the fastest that fits (FSDP2-best)",
     0, 0, NULL},
    {"tune-micro", 0, PL_OPT_SIZE_LIST, NULL,
     "--tune: the micro-batch counts tried (default: --micro)", 1, 4096, NULL},
    {"tune-ep", 0, PL_OPT_SIZE_LIST, NULL,
     "--tune: only these EP degrees (default: every one that divides)", 1,
     1 << 20, NULL},
    {"tune-cp", 0, PL_OPT_SIZE_LIST, NULL,
     "--tune: only these CP degrees (default: every one that divides W, "
     "and in a proxy every virtual one: cp·W divides W_v)",
     1, 1 << 20, NULL},
    {"tune-ac", 0, PL_OPT_ENUM_LIST, "full,selective",
     "--tune: the AC modes tried (full, selective, none)", 0, 0,
     pl_plan_ac_names},
    {"tune-optim", 0, PL_OPT_ENUM_LIST, "gpu,cpu",
     "--tune: the optimizer placements tried (gpu, cpu)", 0, 0,
     pl_fsdp2_optim_names},
    {"points", 0, PL_OPT_STR, NULL,
     "a points file of fsdp2 and the PyTorch peer (peer: "
     "analysis/peers/fsdp2_points.tsv): its models, contexts and knobs "
     "instead of --seq",
     0, 0, NULL},
    {"verify", 0, PL_OPT_FLAG, NULL,
     "run the points the plan predicts not to fit (the prediction is "
     "recorded beside the measurement) instead of recording them as "
     "infeasible",
     0, 0, NULL},
    {"config", 0, PL_OPT_ENUM, "explicit",
     "explicit: the knobs as given; auto: the planner's choice per context of "
     "the knobs not given (plateau: D, P, chunk-cap, bucket, sco-budget, "
     "optim; fsdp2: cp, ep, ac, fsdp2-optim)",
     0, 0, configs},
    {"step-tokens", 0, PL_OPT_SIZE, NULL,
     "--config auto: tokens per step (micro·N·W_v) to keep; the micro-batches "
     "follow the chosen layout",
     1, 1e15, NULL},
    {"host-mem", 0, PL_OPT_SIZE, "0",
     "the host memory the plan takes as available to the run (0: this "
     "host's MemAvailable): plan another machine's points, e.g. with "
     "--dry-run; the pinned-host limit a point runs under is unchanged",
     0, 1e15, NULL},
    {"plan-set", 0, PL_OPT_STR, NULL,
     "the plan's machine, not this one's: K=V,... as `plateau plan --set`", 0,
     0, NULL},
#define OPT(name, short_name, kind, defval, help, lo, hi, choices)             \
  {name, short_name, kind, defval, help, lo, hi, choices},
#include "train_options.def"
#undef OPT
    {0},
};

const pl_preset pl__train_presets[] = {PL_BENCH_TRAIN_AUTO_PRESETS,
                                       {NULL, NULL}};

/* --help's groups (bench.h): a new option goes into the group its list
 * names; one in no list is shown under "other" (test_cli.sh wants none). */
const char *const pl__train_groups[] = {
    "model: model layers hidden heads kv-heads head-dim experts topk "
    "expert-ffn shared-ffn dense-layers dense-ffn vocab dtype",
    "layout: system seq tokens micro virtual-world rank-view D P cp ep",
    "operators: dispatch chunk-cap lanes head sco-budget optim bucket slots "
    "optim-resident keep lr lr-warmup lr-decay lr-min lr-steps "
    "ac ac-freq fsdp2-optim",
    "run: preset data profile gemm-tflops calib describe verify config "
    "step-tokens host-mem plan-set tune tune-micro tune-ep tune-cp tune-ac "
    "tune-optim points",
    NULL};

/* The options that size the model (a --points point gives its own). */
static const char *const model_opts[] = {
    "model",     "layers",     "experts",      "topk",  "heads",
    "kv-heads",  "head-dim",   "hidden",       "vocab", "expert-ffn",
    "dense-ffn", "shared-ffn", "dense-layers", NULL};
/* fsdp2's knobs (--tune and --points set them per point). */
static const char *const fsdp2_knobs[] = {"cp", "ep", "ac", "fsdp2-optim",
                                          NULL};

/* The preset, then every size given on the command line. */
static pl_status model_of(const pl_args *a, pl_train_setup *u) {
  const char *name = pl_args_enum_name(a, "model");
  PL_TRY(pl_model_preset(name, &u->m));
  pl_model_cfg *m = &u->m;
  static const char *const ints[] = {"layers",      "experts",  "topk",
                                     "heads",       "kv-heads", "head-dim",
                                     "dense-layers"};
  int *const iv[] = {&m->L,    &m->E, &m->k,           &m->n_q,
                     &m->n_kv, &m->d, &m->dense_layers};
  bool custom = false;
  for (int i = 0; i < 7; i++)
    if (pl_args_given(a, ints[i]))
      *iv[i] = (int)pl_args_int(a, ints[i]), custom = true;
  static const char *const sizes[] = {"hidden", "vocab", "expert-ffn",
                                      "dense-ffn", "shared-ffn"};
  int64_t *const sv[] = {&m->H, &m->V, &m->I, &m->I_dense, &m->I_shared};
  for (int i = 0; i < 5; i++) {
    if (!pl_args_given(a, sizes[i]))
      continue;
    *sv[i] =
        i == 0 ? pl_args_int(a, sizes[i]) : (int64_t)pl_args_size(a, sizes[i]);
    custom = true;
  }
  if (pl_args_given(a, "shared-ffn"))
    m->n_shared = m->I_shared > 0;
  snprintf(u->model, sizeof u->model, "%s%s", custom ? "custom:" : "", name);
  return pl_model_cfg_check(m);
}

/* --optim-resident and --keep (auto: the planner fills them per point). */
static pl_status headroom_of(const pl_args *a, pl_train_setup *u) {
  pl_step_cfg *sc = &u->sc;
  const char *r = pl_args_str(a, "optim-resident"), *k = pl_args_str(a, "keep");
  if (!r || strlen(r) >= sizeof u->resident_text || !k ||
      strlen(k) >= sizeof u->keep_text)
    return pl_set_error(PL_EINVAL, "--optim-resident, --keep: empty or "
                                   "overlong");
  pl_headroom_mode md;
  uint64_t b;
  PL_TRY(pl_headroom_parse("--optim-resident", r, false, &md, &b));
  u->resident_auto = md == PL_HEADROOM_AUTO;
  sc->oo.resident_all = md == PL_HEADROOM_ALL;
  sc->oo.resident_bytes = b;
  if ((md == PL_HEADROOM_ALL || b) && !strcmp(u->optim, "cpu"))
    return pl_set_error(PL_EINVAL,
                        "--optim-resident=%s with --optim=cpu: the CPU update "
                        "needs its state on the host (allowed: stream, "
                        "hybrid)",
                        r);
  PL_TRY(pl_headroom_parse("--keep", k, true, &md, &b));
  u->keep_auto = md == PL_HEADROOM_AUTO;
  sc->keep = (pl_keep_budget){md == PL_HEADROOM_ATTN  ? PL_KEEP_ATTN
                              : md == PL_HEADROOM_ALL ? PL_KEEP_ALL
                                                      : PL_KEEP_BYTES,
                              b};
  snprintf(u->resident_text, sizeof u->resident_text, "%s", r);
  snprintf(u->keep_text, sizeof u->keep_text, "%s", k);
  return PL_OK;
}

/* AdamW's learning rate and its schedule (both systems' optimizers);
 * --lr-steps 0 stays 0 here: each point's steps (lr_steps_of). */
static pl_status lr_of(const pl_args *a, pl_adamw_hparams *hp) {
  hp->lr = pl_args_f64(a, "lr");
  hp->warmup = pl_args_int(a, "lr-warmup");
  hp->decay = (pl_lr_decay)pl_args_enum(a, "lr-decay");
  hp->lr_min = pl_args_f64(a, "lr-min");
  hp->steps = pl_args_int(a, "lr-steps");
  if (hp->decay == PL_LR_CONSTANT) {
    static const char *const decay_only[] = {"lr-min", "lr-steps", NULL};
    for (int i = 0; decay_only[i]; i++)
      if (pl_args_given(a, decay_only[i]))
        return pl_set_error(PL_EINVAL,
                            "--%s: a setting of the decay, and --lr-decay is "
                            "constant (allowed: --lr-decay linear or cosine, "
                            "or drop --%s)",
                            decay_only[i], decay_only[i]);
    hp->lr_min = 0, hp->steps = 0;
    return PL_OK;
  }
  if (hp->steps && hp->steps <= hp->warmup)
    return pl_set_error(PL_EINVAL,
                        "--lr-steps=%lld: the %s decay needs more steps than "
                        "--lr-warmup=%lld",
                        (long long)hp->steps, pl_lr_decay_names[hp->decay],
                        (long long)hp->warmup);
  if (hp->lr_min > hp->lr)
    return pl_set_error(PL_EINVAL,
                        "--lr-min=%g: above --lr=%g (allowed: 0..%g)",
                        hp->lr_min, hp->lr, hp->lr);
  return PL_OK;
}

/* A decay without --lr-steps ends at the point's last step: its warm-ups
 * and timed steps (a --points point's own, else the command line's). */
static pl_status lr_steps_of(pl_adamw_hparams *hp, bool given, int64_t steps,
                             const char *point) {
  if (hp->decay == PL_LR_CONSTANT || given)
    return PL_OK;
  hp->steps = steps;
  if (steps > hp->warmup)
    return PL_OK;
  return pl_set_error(PL_EINVAL,
                      "--lr-warmup=%lld: the %s decay needs steps after the "
                      "warm-up, and %s%s runs %lld (warm-ups + timed; "
                      "allowed: --lr-steps above %lld)",
                      (long long)hp->warmup, pl_lr_decay_names[hp->decay],
                      point[0] ? "point " : "the point", point,
                      (long long)steps, (long long)hp->warmup);
}

static pl_status step_of(pl_bench_ctx *c, const pl_args *a, pl_train_setup *u) {
  pl_step_cfg *sc = &u->sc;
  *sc = pl_step_cfg_default();
  PL_TRY(lr_of(a, &sc->hp));
  PL_TRY(lr_steps_of(&sc->hp,
                     pl_args_given(a, "lr-steps") || pl_args_given(a, "points"),
                     (int64_t)c->warmup + c->iters, ""));
  sc->dt = strcmp(pl_args_enum_name(a, "dtype"), "f32") ? PL_BF16 : PL_F32;
  sc->dispatch = (pl_moe_variant)pl_args_enum(a, "dispatch");
  sc->moe_c = (int64_t)pl_args_size(a, "chunk-cap");
  sc->moe_lanes = (int)pl_args_int(a, "lanes");
  u->dispatch = pl_args_enum_name(a, "dispatch");
  u->head = pl_args_enum_name(a, "head");
  u->optim = pl_args_enum_name(a, "optim");
  PL_TRY(pl_train_head_parse(u->head, &sc->head));
  PL_TRY(pl_train_optim_parse(u->optim, &sc->optim));
  sc->oo.bucket = (size_t)pl_args_size(a, "bucket");
  sc->oo.slots = (int)pl_args_int(a, "slots");
  const char *b = pl_args_str(a, "sco-budget");
  if (!b || strlen(b) >= sizeof u->sco_text)
    return pl_set_error(PL_EINVAL, "--sco-budget: empty or overlong");
  PL_TRY(pl_sco_parse_budget("--sco-budget", b, &sc->sco));
  snprintf(u->sco_text, sizeof u->sco_text, "%s", b);
  PL_TRY(headroom_of(a, u));
  sc->micro = (int)pl_args_int(a, "micro");
  sc->profile = pl_args_flag(a, "profile");
  sc->seed = c->seed;
  return PL_OK;
}

/* A knob only one system reads, given on the command line, while that
 * system is not in --system's list, is a contradiction: the user asked for
 * a setting no point would use. */
static const char *const f2_only[] = {"cp", "ac", "ac-freq", "fsdp2-optim",
                                      NULL};
static const char *const pl_only[] = {
    "D",         "P",      "head",  "dispatch",       "sco-budget", "optim",
    "chunk-cap", "bucket", "slots", "optim-resident", "keep",       NULL};

const char *pl__train_knob_owner(const char *name) {
  for (int i = 0; f2_only[i]; i++)
    if (!strcmp(name, f2_only[i]))
      return PL_PLAN_NAME_FSDP2;
  for (int i = 0; pl_only[i]; i++)
    if (!strcmp(name, pl_only[i]))
      return PL_PLAN_NAME_PLATEAU;
  return NULL;
}

static pl_status knobs_of_systems(const pl_args *a, const char *list,
                                  bool fsdp2, bool plateau) {
  for (int i = 0; !fsdp2 && f2_only[i]; i++)
    if (pl_args_given(a, f2_only[i]))
      return pl_set_error(PL_EINVAL,
                          "--%s: a knob of fsdp2, which is not in --system=%s "
                          "(allowed: add fsdp2 to the list, or drop --%s)",
                          f2_only[i], list, f2_only[i]);
  for (int i = 0; !plateau && pl_only[i]; i++)
    if (pl_args_given(a, pl_only[i]))
      return pl_set_error(PL_EINVAL,
                          "--%s: a knob of plateau, which is not in "
                          "--system=%s (allowed: add plateau to the list, or "
                          "drop --%s)",
                          pl_only[i], list, pl_only[i]);
  return PL_OK;
}

/* --system: a comma list of registered systems, each once (not given:
 * plateau; with --tune plateau,fsdp2; with --points fsdp2). */
static pl_status systems_of(const pl_args *a, bool tune, bool points,
                            pl__train_args *t) {
  const bool given = pl_args_given(a, "system");
  const char *list = given    ? pl_args_str(a, "system")
                     : tune   ? "plateau,fsdp2"
                     : points ? PL_PLAN_NAME_FSDP2
                              : pl_args_str(a, "system");
  char buf[256];
  if (strlen(list) >= sizeof buf)
    return pl_set_error(PL_EINVAL,
                        "--system: %zu characters (allowed: at "
                        "most %zu)",
                        strlen(list), sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", list);
  for (char *w = buf, *next; w; w = next) {
    next = strchr(w, ',');
    if (next)
      *next++ = 0;
    if (!*w) /* ",plateau", "plateau,,fsdp2", "plateau," */
      return pl_set_error(PL_EINVAL,
                          "--system=%s: empty list element (allowed: "
                          "plateau, fsdp2)",
                          list);
    const pl_train_system *s = pl__train_system_find(w);
    if (!s)
      return pl_set_error(PL_EINVAL,
                          "--system=%s: '%s' is not a system of this bench "
                          "(built in: plateau, fsdp2)",
                          list, w);
    for (int i = 0; i < t->nsys; i++)
      if (t->sys[i] == s)
        return pl_set_error(PL_EINVAL, "--system: '%s' twice", w);
    if (t->nsys == PL_TRAIN_MAX_SYS)
      return pl_set_error(PL_EINVAL, "--system: at most %d", PL_TRAIN_MAX_SYS);
    t->sys[t->nsys++] = s;
  }
  if (!t->nsys)
    return pl_set_error(PL_EINVAL, "--system: empty (built in: plateau, "
                                   "fsdp2)");
  bool f2 = false, pl = false;
  for (int i = 0; i < t->nsys; i++) {
    f2 |= !strcmp(t->sys[i]->name, PL_PLAN_NAME_FSDP2);
    pl |= !strcmp(t->sys[i]->name, PL_PLAN_NAME_PLATEAU);
  }
  if ((tune || points) && !f2)
    return pl_set_error(PL_EINVAL,
                        "--system=%s: %s sets the knobs of fsdp2, which is not "
                        "in the list",
                        list, tune ? "--tune" : "--points");
  return knobs_of_systems(a, list, f2, pl);
}

/* fsdp2's knobs from the command line. */
static pl_status fsdp2_of(const pl_args *a, pl_train_setup *u) {
  u->f2 = pl_fsdp2_cfg_default();
  u->f2.cp = (int)pl_args_int(a, "cp");
  u->f2.ep = pl_args_given(a, "ep") ? (int)pl_args_int(a, "ep") : 1;
  u->f2.ac_freq = (int)pl_args_int(a, "ac-freq");
  PL_TRY(pl_fsdp2_ac_parse(pl_args_enum_name(a, "ac"), &u->f2.ac));
  return pl_fsdp2_optim_parse(pl_args_enum_name(a, "fsdp2-optim"),
                              &u->f2.optim);
}

/* --tune and --points exclude each other and the options they set. */
static pl_status modes_check(const pl_args *a, bool tune, const char *points) {
  if (tune && points)
    return pl_set_error(PL_EINVAL, "give --tune (fsdp2's knobs swept at the "
                                   "contexts) or --points (the file's "
                                   "points), not both");
  static const char *const tune_opts[] = {"tune-micro", "tune-ep",    "tune-cp",
                                          "tune-ac",    "tune-optim", NULL};
  for (int i = 0; !tune && tune_opts[i]; i++)
    if (pl_args_given(a, tune_opts[i]))
      return pl_set_error(PL_EINVAL, "--%s: only with --tune", tune_opts[i]);
  if (tune && pl_args_given(a, "tokens"))
    return pl_set_error(PL_EINVAL, "--tune: give the contexts with --seq "
                                   "(the tokens per rank differ with cp)");
  for (int i = 0; (tune || points) && fsdp2_knobs[i]; i++)
    if (pl_args_given(a, fsdp2_knobs[i]))
      return pl_set_error(PL_EINVAL,
                          "--%s: %s sets fsdp2's cp, ep, ac and "
                          "optimizer per point; give none of them",
                          fsdp2_knobs[i], tune ? "--tune" : "--points");
  if (!points)
    return PL_OK;
  if (pl_args_given(a, "seq") || pl_args_given(a, "tokens") ||
      pl_args_given(a, "micro"))
    return pl_set_error(PL_EINVAL, "--points: the file gives every point's "
                                   "context and micro-batches (no --seq, "
                                   "--tokens or --micro)");
  for (int i = 0; model_opts[i]; i++)
    if (pl_args_given(a, model_opts[i]))
      return pl_set_error(PL_EINVAL, "--%s: --points gives every point's model",
                          model_opts[i]);
  return PL_OK;
}

/* --calib's file: the argument, or of a directory its newest calib.*.tsv
 * by name (which starts with the UTC time). */
static pl_status calib_file(const char *arg, char *path, size_t n) {
  snprintf(path, n, "%s", arg);
  DIR *d = opendir(arg);
  if (!d)
    return PL_OK;
  char best[512] = "";
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (!strncmp(e->d_name, "calib.", 6) && l > 4 &&
        !strcmp(e->d_name + l - 4, ".tsv") && strcmp(e->d_name, best) > 0)
      snprintf(best, sizeof best, "%s", e->d_name);
  }
  closedir(d);
  if (!best[0])
    return pl_set_error(PL_EINVAL, "--calib=%s: no calib.*.tsv in it", arg);
  snprintf(path, n, "%s/%s", arg, best);
  return PL_OK;
}

/* The best ok bf16 gemm row of a calib result file (or directory). */
static pl_status calib_rate(const char *arg, double *out, char *src, size_t n) {
  char path[2048];
  PL_TRY(calib_file(arg, path, sizeof path));
  pl_table t;
  if (pl_table_read(path, &t) != PL_OK) { /* the message names the file */
    return pl_error_prefix(PL_EINVAL, "--calib: ");
  }
  const int cv = pl_table_col(&t, "variant"), cs = pl_table_col(&t, "status"),
            cd = pl_table_col(&t, "dtype"), ct = pl_table_col(&t, "tflops");
  double best = 0;
  for (int r = 0; cv >= 0 && cs >= 0 && cd >= 0 && ct >= 0 && r < t.nrows; r++)
    if (!strcmp(t.rows[r][cv], "gemm") && !strcmp(t.rows[r][cs], "ok") &&
        !strcmp(t.rows[r][cd], "bf16"))
      best = fmax(best, atof(t.rows[r][ct]));
  pl_table_free(&t);
  if (!(best > 0))
    return pl_set_error(PL_EINVAL, "--calib=%s: no ok bf16 gemm row", path);
  const char *base = strrchr(path, '/');
  snprintf(src, n, "calib %.*s", (int)(n > 8 ? n - 8 : 0),
           base ? base + 1 : path);
  *out = best;
  return PL_OK;
}

static pl_status gemm_of(pl_bench_ctx *c, const pl_args *a, pl__train_args *t) {
  t->gemm_tflops = pl_args_f64(a, "gemm-tflops");
  if (t->gemm_tflops > 0) {
    snprintf(t->gemm_src, sizeof t->gemm_src, "--gemm-tflops");
  } else if (pl_args_str(a, "calib")) {
    PL_TRY(calib_rate(pl_args_str(a, "calib"), &t->gemm_tflops, t->gemm_src,
                      sizeof t->gemm_src));
  } else if (c->cuda) {
    t->gemm_tflops = PL_TRAIN_H200_GEMM_TFLOPS;
    snprintf(t->gemm_src, sizeof t->gemm_src, "the H200 default (no --calib)");
  }
  return PL_OK;
}

/* The planner's options and the run's machine (collective: every rank
 * parses the same command line up to here). */
static pl_status plan_of(pl_bench_ctx *c, const pl_args *a, bool tune,
                         const char *points, pl__train_args *t) {
  t->verify = pl_args_flag(a, "verify");
  t->auto_cfg = !strcmp(pl_args_enum_name(a, "config"), "auto");
  /* a proxy preset's config=auto yields to what sets the knobs itself */
  const bool set_elsewhere = tune || points || pl_args_given(a, "tokens");
  if (t->auto_cfg && !pl_args_given(a, "config") && set_elsewhere)
    t->auto_cfg = false;
  t->step_tokens = pl_args_given(a, "step-tokens")
                       ? (int64_t)pl_args_size(a, "step-tokens")
                       : 0;
  if (t->auto_cfg && (tune || points || pl_args_given(a, "tokens")))
    return pl_set_error(PL_EINVAL,
                        "--config auto chooses the knobs per context: not "
                        "with --%s",
                        tune     ? "tune"
                        : points ? "points"
                                 : "tokens");
  if (t->step_tokens && !t->auto_cfg)
    return pl_set_error(PL_EINVAL, "--step-tokens: only with --config auto "
                                   "(else --micro sets the micro-batches)");
  if (t->step_tokens && pl_args_given(a, "micro"))
    return pl_set_error(PL_EINVAL, "--step-tokens and --micro: give one (the "
                                   "tokens per step set the micro-batches)");
  const int Wv = t->u.lc.W_v ? t->u.lc.W_v : c->size;
  if (t->step_tokens && (Wv % c->size || t->step_tokens % (Wv / c->size)))
    return pl_set_error(PL_EINVAL,
                        "--step-tokens=%lld: must be a multiple of W_v / W "
                        "= %d / %d",
                        (long long)t->step_tokens, Wv, c->size);
  const char *calib = pl_args_str(a, "calib");
  char path[2048];
  if (calib) { /* a result file of a schema this build reads (also with
                  --gemm-tflops, when calib_rate has not read it) */
    PL_TRY(calib_file(calib, path, sizeof path));
    pl_table tb;
    if (pl_table_read(path, &tb) != PL_OK) {
      return pl_error_prefix(PL_EINVAL, "--calib: ");
    }
    pl_table_free(&tb);
  }
  return pl__train_machine(c, calib ? path : NULL, &t->mc);
}

/* Append a point (the points array grows by doubling). */
static pl_status add_point(pl__train_args *t, int *cap,
                           const pl_train_system *sys, const pl_train_setup *u,
                           int warmup, int iters) {
  if (t->npts == *cap) {
    *cap = *cap ? 2 * *cap : 16;
    pl__train_point *p = realloc(t->pts, sizeof *p * (size_t)*cap);
    if (!p)
      return pl_set_error(PL_ENOMEM, "train: host points");
    t->pts = p;
  }
  t->pts[t->npts++] = (pl__train_point){sys, *u, warmup, iters};
  return PL_OK;
}

/* Is v one of the n values of list (n = 0: no list, every value)? */
static bool listed_int(const int *list, int n, int v) {
  for (int i = 0; i < n; i++)
    if (list[i] == v)
      return true;
  return n == 0;
}

/* The knob settings --tune tries at u (pl_fsdp2_tune_points at W ranks and
 * u's W_v, the --tune-micro counts) narrowed to --tune-cp, --tune-ep,
 * --tune-ac and --tune-optim; *out malloc'd. */
static pl_status tune_list(pl_bench_ctx *c, const pl_args *a,
                           const pl_train_setup *u, pl_fsdp2_cfg **out,
                           int *nout) {
  int micros[PL_OPT_LIST_MAX], nmicro = 1, eps[PL_OPT_LIST_MAX], neps = 0;
  int cps[PL_OPT_LIST_MAX], ncps = 0;
  int acs[PL_OPT_LIST_MAX], opts[PL_OPT_LIST_MAX];
  uint64_t v[PL_OPT_LIST_MAX];
  micros[0] = u->sc.micro;
  if (pl_args_given(a, "tune-micro")) {
    nmicro = pl_args_size_list(a, "tune-micro", v, PL_OPT_LIST_MAX);
    for (int i = 0; i < nmicro; i++)
      micros[i] = (int)v[i];
  }
  if (pl_args_given(a, "tune-ep")) {
    neps = pl_args_size_list(a, "tune-ep", v, PL_OPT_LIST_MAX);
    for (int i = 0; i < neps; i++)
      eps[i] = (int)v[i];
  }
  if (pl_args_given(a, "tune-cp")) {
    ncps = pl_args_size_list(a, "tune-cp", v, PL_OPT_LIST_MAX);
    for (int i = 0; i < ncps; i++)
      cps[i] = (int)v[i];
  }
  /* the enum lists' indices are the pl_fsdp2_ac / pl_fsdp2_optim values */
  const int nac = pl_args_enum_list(a, "tune-ac", acs, PL_OPT_LIST_MAX);
  const int nopt = pl_args_enum_list(a, "tune-optim", opts, PL_OPT_LIST_MAX);
  const bool none = listed_int(acs, nac, PL_FSDP2_AC_NONE) && nac > 0;
  const pl_fsdp2_cfg base = pl__train_fsdp2_cfg(u);
  const int n = pl_fsdp2_tune_points(&u->m, c->size, u->S, &base, micros,
                                     nmicro, none, NULL, 0);
  pl_fsdp2_cfg *cf = calloc((size_t)n + 1, sizeof *cf);
  if (!cf)
    return pl_set_error(PL_ENOMEM, "train: host points");
  pl_fsdp2_tune_points(&u->m, c->size, u->S, &base, micros, nmicro, none, cf,
                       n);
  int k = 0;
  for (int j = 0; j < n; j++)
    if (listed_int(eps, neps, cf[j].ep) && listed_int(cps, ncps, cf[j].cp) &&
        listed_int(acs, nac, cf[j].ac) && listed_int(opts, nopt, cf[j].optim))
      cf[k++] = cf[j];
  *out = cf, *nout = k;
  return PL_OK;
}

/* Every context × system; with --tune fsdp2 at each knob setting of
 * tune_list per context. */
static pl_status context_points(pl_bench_ctx *c, const pl_args *a, bool tune,
                                bool by_tokens, pl__train_args *t, int *cap) {
  for (int i = 0; i < t->nseq; i++)
    for (int k = 0; k < t->nsys; k++) {
      pl_train_setup u = t->u;
      u.S = t->seq[i] * (by_tokens ? t->sys[k]->seq_ranks(&u) : 1);
      if (t->auto_cfg)
        PL_TRY(pl__train_auto(t, a, t->sys[k], &u, c->size));
      else if ((u.resident_auto || u.keep_auto) &&
               !strcmp(t->sys[k]->name, PL_PLAN_NAME_PLATEAU))
        PL_TRY(pl__train_fill(t, t->sys[k], &u, c->size));
      if (!tune || strcmp(t->sys[k]->name, PL_PLAN_NAME_FSDP2)) {
        PL_TRY(add_point(t, cap, t->sys[k], &u, -1, -1));
        continue;
      }
      pl_fsdp2_cfg *cf = NULL;
      int n = 0;
      PL_TRY(tune_list(c, a, &u, &cf, &n));
      pl_status st = n ? PL_OK
                       : pl_set_error(PL_EINVAL,
                                      "--tune: no knob setting of fsdp2 at "
                                      "S=%lld is left (--tune-ep, --tune-ac, "
                                      "--tune-optim)",
                                      (long long)u.S);
      for (int j = 0; j < n && st == PL_OK; j++) {
        pl_train_setup w = u;
        w.f2.cp = cf[j].cp, w.f2.ep = cf[j].ep;
        w.f2.ac = cf[j].ac, w.f2.optim = cf[j].optim;
        w.sc.micro = cf[j].micro;
        w.kind = "tune";
        st = add_point(t, cap, t->sys[k], &w, -1, -1);
      }
      free(cf);
      PL_TRY(st);
    }
  return PL_OK;
}

/* --points FILE ("peer": analysis/peers/fsdp2_points.tsv): each point of
 * the file for each system, its model, context, micro-batches and fsdp2
 * knobs; its warm-up and timed steps unless -w / -n are given. */
static pl_status file_points(pl_bench_ctx *c, const pl_args *a, const char *arg,
                             pl__train_args *t, int *cap) {
  char path[4096];
  snprintf(path, sizeof path, "%s", arg);
  if (!strcmp(arg, "peer")) {
    const char *dir = pl_rep_analysis_dir();
    if (!dir)
      return pl_set_error(PL_EINVAL, "--points=peer: no analysis/ directory "
                                     "found (set PLATEAU_ROOT)");
    snprintf(path, sizeof path, "%s/peers/fsdp2_points.tsv", dir);
  }
  pl_fsdp2_point *fp = NULL;
  int n = 0;
  if (pl_fsdp2_points_read(path, &fp, &n) != PL_OK) {
    return pl_error_prefix(PL_EINVAL, "--points: ");
  }
  pl_status st =
      n ? PL_OK : pl_set_error(PL_EINVAL, "--points=%s: no points", path);
  /* the peer's shapes are one real GPU's: a preset's W_v does not apply */
  if (!pl_args_given(a, "virtual-world"))
    t->u.lc.W_v = 0;
  for (int i = 0; i < n && st == PL_OK; i++) {
    const pl_fsdp2_point *q = &fp[i];
    pl_train_setup u = t->u;
    u.m = q->m;
    snprintf(u.model, sizeof u.model, "%s", q->m.name);
    u.S = q->seq;
    u.sc.micro = q->c.micro;
    u.f2.cp = q->c.cp, u.f2.ep = q->c.ep;
    u.f2.ac = q->c.ac, u.f2.optim = q->c.optim;
    u.kind = "peer";
    snprintf(u.point, sizeof u.point, "%s", q->name);
    if (q->steps < 1 || q->warmup < 0) {
      st = pl_set_error(PL_EINVAL,
                        "--points=%s: point %s: warmup %d, steps %d (steps "
                        ">= 1)",
                        path, q->name, q->warmup, q->steps);
      break;
    }
    st = lr_steps_of(
        &u.sc.hp, pl_args_given(a, "lr-steps"),
        (int64_t)(pl_args_given(a, "warmup") ? c->warmup : q->warmup) +
            (pl_args_given(a, "iters") ? c->iters : q->steps),
        q->name);
    for (int k = 0; k < t->nsys && st == PL_OK; k++) {
      st = t->sys[k]->validate(&u, c->size);
      if (st == PL_EINFEASIBLE) { /* this point's row says it */
        pl_clear_error();
        st = PL_OK;
      } else if (st != PL_OK) {
        st = pl_error_prefix(PL_EINVAL, "--points=%s: point %s: ", path,
                             q->name);
        break;
      }
      st = add_point(t, cap, t->sys[k], &u,
                     pl_args_given(a, "warmup") ? -1 : q->warmup,
                     pl_args_given(a, "iters") ? -1 : q->steps);
    }
  }
  free(fp);
  return st;
}

pl_status pl__train_parse(pl_bench_ctx *c, pl__train_args *t) {
  const pl_args *a = c->args;
  pl_train_setup *u = &t->u;
  memset(t, 0, sizeof *t);
  const bool tune = pl_args_flag(a, "tune");
  const char *points = pl_args_str(a, "points");
  PL_TRY(modes_check(a, tune, points));
  PL_TRY(model_of(a, u));
  PL_TRY(step_of(c, a, u));
  PL_TRY(fsdp2_of(a, u));
  u->kind = "run";
  /* --ep: fsdp2's degree, plateau's expert group (not given: the world) */
  u->lc =
      (pl_layout_cfg){(int)pl_args_int(a, "D"), (int)pl_args_int(a, "P"),
                      (int)pl_args_int(a, "virtual-world"),
                      pl_args_given(a, "ep") ? (int)pl_args_int(a, "ep") : 0,
                      pl_args_flag(a, "rank-view")};
  PL_TRY(systems_of(a, tune, points != NULL, t));
  t->describe = pl_args_flag(a, "describe");
  PL_TRY(gemm_of(c, a, t));
  PL_TRY(plan_of(c, a, tune, points, t));
  /* the contexts: --seq, or --tokens per rank (S = N·D, N·cp for fsdp2;
   * maxbatch's trials) */
  uint64_t v[PL_OPT_LIST_MAX];
  const bool by_tokens = pl_args_given(a, "tokens");
  if (by_tokens && pl_args_given(a, "seq"))
    return pl_set_error(PL_EINVAL, "give --seq (contexts) or --tokens (per "
                                   "rank), not both");
  t->nseq =
      pl_args_size_list(a, by_tokens ? "tokens" : "seq", v, PL_OPT_LIST_MAX);
  for (int i = 0; i < t->nseq; i++)
    t->seq[i] = (int64_t)v[i];
  /* the layout with a context every layout divides: a bad D, P, W_v, knob
   * or model is a usage error; a context D (or 2·cp) does not divide is an
   * infeasible point */
  for (int i = 0; i < t->nsys && !points; i++) {
    u->S = 2 * (int64_t)u->lc.D * u->f2.cp;
    PL_TRY(t->sys[i]->validate(u, c->size));
  }
  u->S = 0;
  int cap = 0;
  PL_TRY(points ? file_points(c, a, points, t, &cap)
                : context_points(c, a, tune, by_tokens, t, &cap));
  if (t->describe || !t->npts)
    return PL_OK;
  /* the stream of the first point's vocabulary, and for every point its
   * window and vocabulary: a bad --data (an empty or short shard, a token
   * outside a point's vocabulary) exits 2 before anything is written */
  pl_status st = pl__train_data(c, t, t->pts[0].u.m.V);
  for (int i = 0; st == PL_OK && i < t->npts; i++)
    st = pl_data_check(t->data, t->pts[i].u.S, t->pts[i].u.m.V);
  if (st != PL_OK) {
    return pl_error_prefix(PL_EINVAL, "--data: ");
  }
  return PL_OK;
}

pl_status pl__train_data(pl_bench_ctx *c, pl__train_args *t, int64_t V) {
  if (t->data && t->data_V == V)
    return PL_OK;
  pl_data_close(t->data);
  t->data = NULL;
  const char *data = pl_args_str(c->args, "data");
  PL_TRY(!data || !strcmp(data, "synthetic")
             ? pl_data_synthetic(V, c->seed, &t->data)
             : pl_data_open(data, V, &t->data)); /* the message names it */
  t->data_V = V;
  return PL_OK;
}

void pl__train_args_free(pl__train_args *t) {
  pl_data_close(t->data);
  free(t->pts);
  t->data = NULL, t->pts = NULL, t->npts = 0;
}

pl_status pl__train_describe(pl_bench_ctx *c, const pl__train_args *t,
                             FILE *f) {
  for (int i = 0; i < t->npts; i++) {
    const pl__train_point *p = &t->pts[i];
    fprintf(f, "## system %s, model %s, S=%lld (rank %d of %d)\n", p->sys->name,
            p->u.model, (long long)p->u.S, c->rank, c->size);
    if (p->u.chosen[0])
      fprintf(f, "# %s\n", p->u.chosen);
    pl_train_desc d;
    pl_status st = p->sys->validate(&p->u, c->size);
    if (st == PL_OK && p->sys->describe)
      st = p->sys->describe(&p->u, c->size, c->rank,
                            c->cuda ? PL_BACKEND_CUDA : PL_BACKEND_CPU, &d);
    if (st != PL_OK) {
      fprintf(f, "# infeasible: %s\n", pl_last_error());
      continue;
    }
    if (p->sys->describe)
      pl_train_desc_print(&d, f);
    pl__train_plan_describe(t, p->sys, &p->u, c->size, f);
  }
  return PL_OK;
}
