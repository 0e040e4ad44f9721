/* fsdp2_points.c — the points the FSDP2 baseline shares with the PyTorch
 * peer (fsdp2.h: pl_fsdp2_points_read; the model's name from an optional
 * "model" column), read from the TSV both use
 * (analysis/peers/fsdp2_points.tsv), so the bench runs exactly the shapes
 * the peer measures. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp2.h"
#include "plateau/file.h"

enum {
  C_POINT,
  C_HIDDEN,
  C_LAYERS,
  C_NQ,
  C_NKV,
  C_HEAD_DIM,
  C_VOCAB,
  C_EXPERTS,
  C_TOPK,
  C_EXPERT_WIDTH,
  C_SHARED_WIDTH,
  C_DENSE_WIDTH,
  C_DENSE_LAYERS,
  C_ROPE,
  C_SEQ,
  C_CP,
  C_EP,
  C_AC,
  C_OPTIM,
  C_MICRO,
  C_WARMUP,
  C_STEPS,
  C_N
};
static const char *const cols[C_N] = {
    "point",        "hidden",      "layers",       "n_q",        "n_kv",
    "head_dim",     "vocab",       "experts",      "topk",       "expert_width",
    "shared_width", "dense_width", "dense_layers", "rope_theta", "seq",
    "cp",           "ep",          "ac",           "optim",      "micro",
    "warmup",       "steps"};

/* Split line at tabs in place into at most max fields. */
static int split(char *line, char **f, int max) {
  int n = 0;
  char *p = line;
  while (n < max) {
    f[n++] = p;
    char *t = strchr(p, '\t');
    if (!t)
      break;
    *t = 0;
    p = t + 1;
  }
  return n;
}

static pl_status num(const char *s, double *out, int line, const char *col) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  if (errno || end == s || *end)
    return pl_set_error(PL_EINVAL,
                        "fsdp2 points: line %d column %s: '%s' is "
                        "not a number",
                        line, col, s);
  return PL_OK;
}

/* The header's fields: at[c] the field of column c, *at_model the field of
 * "model" (if any). */
static pl_status header(const char *path, char **fl, int nf, int *at,
                        int *at_model) {
  pl_status st = PL_OK;
  for (int c = 0; c < C_N; c++) {
    at[c] = -1;
    for (int i = 0; i < nf; i++)
      if (!strcmp(fl[i], cols[c]))
        at[c] = i;
    if (at[c] < 0)
      st = pl_set_error(PL_EINVAL, "fsdp2 points: %s: no column %s", path,
                        cols[c]);
  }
  for (int i = 0; i < nf; i++)
    if (!strcmp(fl[i], "model"))
      *at_model = i;
  return st;
}

/* The point's activation checkpointing, optimizer and model checked. */
static pl_status point_cfg(const char *ac, const char *optim,
                           pl_fsdp2_point *p) {
  PL_TRY(pl_fsdp2_ac_parse(ac, &p->c.ac));
  PL_TRY(pl_fsdp2_optim_parse(optim, &p->c.optim));
  return pl_model_cfg_check(&p->m);
}

/* Point p from the fields of line `line`; pts[0, n) the points before it. */
static pl_status row(const char *path, int line, char **fl, int nf,
                     const int *at, int at_model, const pl_fsdp2_point *pts,
                     int n, pl_fsdp2_point *p) {
  memset(p, 0, sizeof *p);
  double v[C_N] = {0};
  for (int c = 0; c < C_N; c++) {
    if (at[c] >= nf)
      return pl_set_error(PL_EINVAL, "fsdp2 points: line %d: no %s", line,
                          cols[c]);
    if (c != C_POINT && c != C_AC && c != C_OPTIM)
      PL_TRY(num(fl[at[c]], &v[c], line, cols[c]));
  }
  snprintf(p->name, sizeof p->name, "%s", fl[at[C_POINT]]);
  for (int j = 0; j < n; j++) /* a name is a row's key */
    if (!strcmp(pts[j].name, p->name))
      return pl_set_error(PL_EINVAL,
                          "fsdp2 points: %s line %d: point '%s' is named "
                          "twice (also point %d of the file; allowed: "
                          "each name once)",
                          path, line, p->name, j + 1);
  pl_model_cfg *m = &p->m;
  pl_model_preset("tiny", m); /* the rest of the fields */
  snprintf(m->name, sizeof m->name, "%.31s",
           at_model >= 0 && at_model < nf ? fl[at_model] : p->name);
  m->H = (int64_t)v[C_HIDDEN], m->L = (int)v[C_LAYERS];
  m->n_q = (int)v[C_NQ], m->n_kv = (int)v[C_NKV], m->d = (int)v[C_HEAD_DIM];
  m->V = (int64_t)v[C_VOCAB];
  m->E = (int)v[C_EXPERTS], m->k = (int)v[C_TOPK];
  m->I = (int64_t)v[C_EXPERT_WIDTH];
  m->I_shared = (int64_t)v[C_SHARED_WIDTH], m->n_shared = m->I_shared > 0;
  m->I_dense = (int64_t)v[C_DENSE_WIDTH];
  m->dense_layers = (int)v[C_DENSE_LAYERS];
  m->rope_theta = v[C_ROPE];
  m->bias_gamma = 1e-3f;
  p->c = pl_fsdp2_cfg_default();
  p->c.cp = (int)v[C_CP], p->c.ep = (int)v[C_EP];
  p->c.micro = (int)v[C_MICRO];
  p->seq = (int64_t)v[C_SEQ];
  p->warmup = (int)v[C_WARMUP], p->steps = (int)v[C_STEPS];
  pl_status st = point_cfg(fl[at[C_AC]], fl[at[C_OPTIM]], p);
  return st == PL_OK ? st
                     : pl_error_prefix(
                           PL_EINVAL, "fsdp2 points: %s line %d: ", path, line);
}

pl_status pl_fsdp2_points_read(const char *path, pl_fsdp2_point **out, int *n) {
  *out = NULL, *n = 0;
  FILE *f;
  pl_status ost = pl_fopen_regular(path, &f); /* a FIFO would block */
  if (ost != PL_OK) {
    return pl_error_prefix(ost, "fsdp2 points: cannot open ");
  }
  char buf[4096], *fl[64];
  int at[C_N], at_model = -1, have_hdr = 0, line = 0, cap = 0;
  pl_fsdp2_point *pts = NULL;
  pl_status st = PL_OK;
  while (fgets(buf, sizeof buf, f)) {
    line++;
    buf[strcspn(buf, "\r\n")] = 0;
    if (!buf[0] || buf[0] == '#')
      continue;
    const int nf = split(buf, fl, 64);
    if (!have_hdr) {
      PL_TRY_GOTO(st, done, header(path, fl, nf, at, &at_model));
      have_hdr = 1;
      continue;
    }
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      pl_fsdp2_point *p = realloc(pts, (size_t)cap * sizeof *p);
      if (!p)
        PL_TRY_GOTO(st, done, pl_set_error(PL_ENOMEM, "fsdp2 points: host"));
      pts = p;
    }
    PL_TRY_GOTO(st, done,
                row(path, line, fl, nf, at, at_model, pts, *n, &pts[*n]));
    (*n)++;
  }
  if (!have_hdr)
    st = pl_set_error(PL_EINVAL, "fsdp2 points: %s: no header", path);
done:
  fclose(f);
  if (st != PL_OK) {
    free(pts);
    *n = 0;
    return st;
  }
  *out = pts;
  return PL_OK;
}
