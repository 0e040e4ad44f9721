/* maxbatch_args.c — `plateau bench maxbatch`'s command line beyond its
 * table (maxbatch_search.h): which given options are the target's (a search
 * forwards them; the other target's, the searched size and another bench's
 * preset are refused), the budgets searched (sco: --budgets; train: one
 * search per system of --system, each with --sco-budget) and the trials'
 * command (launcher, this program, the target, the options forwarded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "maxbatch_search.h"
#include "ops/sco.h"

static bool listed(const pl_opt *opts, const char *name) {
  for (int i = 0; opts && opts[i].name; i++)
    if (!strcmp(opts[i].name, name))
      return true;
  return false;
}

/* Every option given is maxbatch's own or the target's (not the other
 * target's), the preset is the target's, and the searched size is not
 * given (each trial gets its --tokens). */
pl_status pl__maxbatch_target_options(const pl_args *a, const pl_bench *target,
                                      const pl_opt *opts,
                                      const char *const *own) {
  for (int i = 0; opts[i].name; i++) {
    const char *n = opts[i].name;
    bool is_own = false;
    for (int k = 0; own[k]; k++)
      is_own |= !strcmp(own[k], n);
    if (is_own || !pl_args_given(a, n))
      continue;
    if (!listed(target->opts, n))
      return pl_set_error(PL_EINVAL,
                          "maxbatch: --%s is not an option of bench %s", n,
                          target->name);
    if (!strcmp(n, "tokens") || !strcmp(n, "seq"))
      return pl_set_error(PL_EINVAL,
                          "maxbatch: --%s is what the search sets (each "
                          "trial's --tokens); bound it with --start, --step "
                          "and --max-tokens",
                          n);
  }
  if (pl_args_given(a, "preset")) {
    const char *p = pl_args_enum_name(a, "preset");
    bool ok = !strcmp(p, "auto");
    for (int i = 0; target->presets && target->presets[i].name; i++)
      ok |= !strcmp(target->presets[i].name, p);
    if (!ok)
      return pl_set_error(PL_EINVAL,
                          "maxbatch: --preset=%s is not a preset of bench %s",
                          p, target->name);
  }
  return PL_OK;
}

pl_status pl__maxbatch_budgets(const pl_args *a, pl__maxbatch_search *s) {
  if (s->train) { /* one search per system; --sco-budget to the trials */
    pl_sco_budget b;
    char list[256], *save = NULL;
    const char *sl = pl_args_str(a, "system");
    if (sl[0] == ',' || sl[strlen(sl) - 1] == ',' || strstr(sl, ",,"))
      return pl_set_error(PL_EINVAL,
                          "--system=%s: empty list element (allowed: plateau, "
                          "fsdp2)",
                          sl);
    snprintf(list, sizeof list, "%s", pl_args_str(a, "system"));
    for (char *w = strtok_r(list, ",", &save); w && s->nb < PL_TRAIN_MAX_SYS;
         w = strtok_r(NULL, ",", &save)) {
      if (!pl__train_system_find(w))
        return pl_set_error(PL_EINVAL,
                            "--system=%s: '%s' is not a system of bench train "
                            "(plateau, fsdp2)",
                            pl_args_str(a, "system"), w);
      snprintf(s->systems[s->nb], sizeof s->systems[0], "%s", w);
      snprintf(s->budgets[s->nb], sizeof s->budgets[0], "%s",
               pl_args_str(a, "sco-budget"));
      PL_TRY(pl_sco_parse_budget("--sco-budget", s->budgets[s->nb++], &b));
    }
    if (!s->nb)
      return pl_set_error(PL_EINVAL, "--system: empty");
  }
  const char *list = s->train ? NULL : pl_args_str(a, "budgets");
  for (const char *p = list ? list : s->train ? NULL : "0"; p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    pl_sco_budget b;
    if (s->nb == 64)
      return pl_set_error(PL_EINVAL, "--budgets=%s: more than 64 budgets",
                          list);
    if (len == 0)
      return pl_set_error(PL_EINVAL,
                          "--budgets=%s: empty list element (allowed: 0, all, "
                          "or a size such as 12Gi)",
                          list);
    if (len >= sizeof s->budgets[0])
      return pl_set_error(PL_EINVAL,
                          "--budgets=%s: an entry of %zu characters (allowed: "
                          "0, all, or a size such as 12Gi)",
                          list, len);
    memcpy(s->budgets[s->nb], p, len);
    s->budgets[s->nb][len] = '\0';
    PL_TRY(pl_sco_parse_budget("--budgets", s->budgets[s->nb++], &b));
    p = comma ? comma + 1 : NULL;
  }
  return PL_OK;
}

/* The trials' command: launcher, this program, the target, our options. */
pl_status pl__maxbatch_base_argv(pl_bench_ctx *c, pl__maxbatch_search *s,
                                 const pl_opt *opts) {
  const pl_args *a = c->args;
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return pl_set_error(PL_ERUNTIME, "maxbatch: cannot find this program "
                                     "(/proc/self/exe)");
  exe[n] = '\0';
  snprintf(s->dir, sizeof s->dir, "%s",
           c->res ? pl_results_path(c->res) : "./x");
  *strrchr(s->dir, '/') = '\0';
  int tbe = pl_args_enum(a, "trial-backend");
  bool gpu =
      pl_backend_available(PL_BACKEND_CUDA) && pl_cuda_device_count() > 0;
  pl_argv *b = &s->base;
  if (pl_args_str(a, "launcher"))
    pl_argv_split(b, pl_args_str(a, "launcher"));
  pl_argv_add(b, "%s", exe);
  pl_argv_add(b, "bench");
  pl_argv_add(b, "%s", s->target->name);
  pl_argv_add(b, "--backend=%s",
              tbe == 1   ? "cpu"
              : tbe == 2 ? "cuda"
              : gpu      ? "cuda"
                         : "cpu");
  pl_argv_add(b, "-o");
  pl_argv_add(b, "%s", s->dir);
  pl_argv_add(b, "--no-check");
  if (s->train) /* a search measures: its trials run what the plan refuses */
    pl_argv_add(b, "--verify");
  pl_argv_add(b, "--iters=%d", pl_args_given(a, "iters") ? c->iters : 1);
  pl_argv_add(b, "--warmup=%d", pl_args_given(a, "warmup") ? c->warmup : 0);
  if (pl_args_given(a, "seed"))
    pl_argv_add(b, "--seed=%llu", (unsigned long long)c->seed);
  if (pl_args_given(a, "mem-limit"))
    pl_argv_add(b, "--mem-limit=%llu",
                (unsigned long long)pl_args_size(a, "mem-limit"));
  if (pl_args_given(a, "preset"))
    pl_argv_add(b, "--preset=%s", pl_args_enum_name(a, "preset"));
  /* not forwarded: what each trial sets, and the target's options that
   * maxbatch's table does not list (train's --tune, --points: several
   * points per context, which no search takes; never given here) */
  static const char *const per_trial[] = {"tokens", "budgets", "budget-steps",
                                          "system", NULL};
  const char *skip[128];
  int ns = 0;
  for (int i = 0; per_trial[i]; i++)
    skip[ns++] = per_trial[i];
  for (int i = 0; s->target->opts[i].name && ns < 127; i++)
    if (!listed(opts, s->target->opts[i].name))
      skip[ns++] = s->target->opts[i].name;
  skip[ns] = NULL;
  pl_argv_forward(b, a, s->target->opts, skip);
  return PL_OK;
}
