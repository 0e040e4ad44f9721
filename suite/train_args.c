/* train_args.c — `plateau bench train`'s command line into a configuration
 * (bench_train.h): the model (a preset and its overridden sizes), the
 * layout, the contexts, the step's switches, the data, the systems and the
 * GEMM rate MFU is taken against; every value checked before anything runs
 * (a bad one: PL_EINVAL naming it, exit 2, nothing written); and
 * --describe. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../baselines/train_baselines.h"
#include "bench_train.h"
#include "results.h"

const char *const pl__train_dispatch_names[] = {"ep", "llep", "pllep", NULL};
const char *const pl__train_head_names[] = {"ring", "fused", "dense", "vp",
                                            NULL};
const char *const pl__train_optim_names[] = {"stream", "hybrid", "cpu", NULL};

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

static pl_status step_of(pl_bench_ctx *c, const pl_args *a, pl_train_setup *u) {
  pl_step_cfg *sc = &u->sc;
  *sc = pl_step_cfg_default();
  sc->dt = strcmp(pl_args_enum_name(a, "dtype"), "f32") ? PL_BF16 : PL_F32;
  static const pl_moe_variant dv[] = {PL_MOE_EP, PL_MOE_LLEP, PL_MOE_PIPELINED};
  sc->dispatch = dv[pl_args_enum(a, "dispatch")];
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
  sc->micro = (int)pl_args_int(a, "micro");
  sc->profile = pl_args_flag(a, "profile");
  sc->seed = c->seed;
  return PL_OK;
}

/* --system: a comma list of registered systems, each once. */
static pl_status systems_of(const pl_args *a, pl__train_args *t) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", pl_args_str(a, "system"));
  char *save = NULL;
  for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    const pl_train_system *s = pl__train_system_find(w);
    if (!s)
      return pl_set_error(PL_EINVAL,
                          "--system=%s: '%s' is not a system of this bench "
                          "(built in: plateau%s)",
                          pl_args_str(a, "system"), w,
                          strcmp(w, "fsdp2") ? ""
                                             : "; the FSDP2 baseline is not "
                                               "plugged in yet");
    for (int i = 0; i < t->nsys; i++)
      if (t->sys[i] == s)
        return pl_set_error(PL_EINVAL, "--system: '%s' twice", w);
    if (t->nsys == PL_TRAIN_MAX_SYS)
      return pl_set_error(PL_EINVAL, "--system: at most %d", PL_TRAIN_MAX_SYS);
    t->sys[t->nsys++] = s;
  }
  if (!t->nsys)
    return pl_set_error(PL_EINVAL, "--system: empty (built in: plateau)");
  return PL_OK;
}

/* The best ok bf16 gemm row of a calib result file (a directory: its newest
 * calib.*.tsv by name, which starts with the UTC time). */
static pl_status calib_rate(const char *arg, double *out, char *src, size_t n) {
  char path[2048];
  snprintf(path, sizeof path, "%s", arg);
  DIR *d = opendir(arg);
  if (d) {
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
    snprintf(path, sizeof path, "%s/%s", arg, best);
  }
  pl_table t;
  if (pl_table_read(path, &t) != PL_OK) { /* the message names the file */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    return pl_set_error(PL_EINVAL, "--calib: %s", msg);
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

pl_status pl__train_parse(pl_bench_ctx *c, pl__train_args *t) {
  const pl_args *a = c->args;
  pl_train_setup *u = &t->u;
  memset(t, 0, sizeof *t);
  PL_TRY(model_of(a, u));
  PL_TRY(step_of(c, a, u));
  u->lc = (pl_layout_cfg){(int)pl_args_int(a, "D"), (int)pl_args_int(a, "P"),
                          (int)pl_args_int(a, "virtual-world")};
  PL_TRY(systems_of(a, t));
  t->describe = pl_args_flag(a, "describe");
  PL_TRY(gemm_of(c, a, t));
  /* the contexts: --seq, or --tokens per rank (S = N·D; maxbatch's trials) */
  uint64_t v[PL_OPT_LIST_MAX];
  const bool by_tokens = pl_args_given(a, "tokens");
  if (by_tokens && pl_args_given(a, "seq"))
    return pl_set_error(PL_EINVAL, "give --seq (contexts) or --tokens (per "
                                   "rank), not both");
  t->nseq =
      pl_args_size_list(a, by_tokens ? "tokens" : "seq", v, PL_OPT_LIST_MAX);
  for (int i = 0; i < t->nseq; i++)
    t->seq[i] = (int64_t)v[i] * (by_tokens ? u->lc.D : 1);
  /* the layout with a context every D divides: a bad D, P, W_v or model is
   * a usage error; a context D does not divide is an infeasible point */
  for (int i = 0; i < t->nsys; i++) {
    u->S = u->lc.D;
    PL_TRY(t->sys[i]->validate(u, c->size));
  }
  u->S = 0;
  if (t->describe)
    return PL_OK;
  const char *data = pl_args_str(a, "data");
  pl_status st = !data || !strcmp(data, "synthetic")
                     ? pl_data_synthetic(u->m.V, c->seed, &t->data)
                     : pl_data_open(data, u->m.V, &t->data);
  if (st != PL_OK) { /* the message names the file */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    return pl_set_error(PL_EINVAL, "--data: %s", msg);
  }
  return PL_OK;
}

pl_status pl__train_describe(pl_bench_ctx *c, const pl__train_args *t,
                             FILE *f) {
  pl_train_setup u = t->u;
  for (int i = 0; i < t->nseq; i++)
    for (int k = 0; k < t->nsys; k++) {
      u.S = t->seq[i];
      fprintf(f, "## system %s, model %s, S=%lld (rank %d of %d)\n",
              t->sys[k]->name, u.model, (long long)u.S, c->rank, c->size);
      if (!t->sys[k]->describe) {
        fprintf(f, "# no description for this system\n");
        continue;
      }
      pl_train_desc d;
      pl_status st = t->sys[k]->validate(&u, c->size);
      if (st == PL_OK)
        st =
            t->sys[k]->describe(&u, c->size, c->rank,
                                c->cuda ? PL_BACKEND_CUDA : PL_BACKEND_CPU, &d);
      if (st != PL_OK)
        fprintf(f, "# infeasible: %s\n", pl_last_error());
      else
        pl_train_desc_print(&d, f);
    }
  return PL_OK;
}
