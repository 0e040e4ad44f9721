/* machine.c — the machine the planner projects onto: the defaults of an
 * 8×H200 node, and the rates read from result files (`plateau bench calib`
 * for the ceilings; the attention, adam and moegemm benches for the kernel
 * rates), recognized by their `# bench:` metadata line and read by column
 * name, so files of either result-schema version work. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

pl_plan_machine pl_plan_machine_default(void) {
  pl_plan_machine m;
  memset(&m, 0, sizeof m);
  m.backend = PL_BACKEND_CUDA;
  m.gpus_per_node = 8;
  m.hbm_bytes = 150109880320.0; /* H200: 139.8 GiB the driver reports     */
  m.hbm_reserve = 4 * GIB;
  m.fill_reserve = 4 * GIB;
  m.host_bytes = 2048 * GIB; /* an 8×H200 server's 2 TiB                    */
  m.host_reserve = 64 * GIB;
  m.gemm_tflops = 793; /* cuBLAS bf16 8192³                              */
  m.hbm_gbs = 4100;    /* device copy, read + write                      */
  m.h2d_gbs = 55.4;
  m.d2h_gbs = 55.3;
  m.bidir_gbs = 101.6;
  m.nvl_gbs = 390;  /* cudaMemcpyPeer                                 */
  m.nccl_gbs = 358; /* NCCL per direction                             */
  m.a2a_gbs = 325;  /* NCCL all-to-all bus bandwidth                  */
  m.ib_gbs = 50;    /* 400 Gb/s per GPU                               */
  m.ib_lat_us = 5;
  m.nvl_lat_us = 3;
  m.host_dram_gbs = 450; /* two sockets of DDR5, achieved                  */
  m.attn_fwd_tflops = 540;
  m.attn_bwd_tflops = 405; /* fwd+bwd at 0.8× cuDNN's 545                  */
  m.attn_half_seq = 1024;
  m.expert_eff = 0.85;
  m.dense_eff = 0.9;
  m.head_eff = 0.85;
  m.mem_passes = 30;
  m.optim_gparam_s = 0;
  m.cpu_adam_gparam_s = 20;
  m.step_overhead_ms = 50;
  m.layer_overhead_ms = 1;
  m.coll_us = 20;
  m.fsdp2_attn_tflops = 545; /* PyTorch SDPA (cuDNN) fwd+bwd              */
  m.fsdp2_expert_eff = 0.6;
  m.fsdp2_cpu_adam_gparam_s = 20;
  snprintf(m.source, sizeof m.source, "defaults (8xH200, 400 Gb/s IB)");
  return m;
}

/* ---- key=value ---- */

typedef struct field {
  const char *key;
  size_t off;
} field;
#define FD(k)                                                                  \
  { #k, offsetof(pl_plan_machine, k) }
static const field fields[] = {FD(hbm_bytes),
                               FD(hbm_reserve),
                               FD(fill_reserve),
                               FD(host_bytes),
                               FD(host_reserve),
                               FD(gemm_tflops),
                               FD(hbm_gbs),
                               FD(h2d_gbs),
                               FD(d2h_gbs),
                               FD(bidir_gbs),
                               FD(nvl_gbs),
                               FD(nccl_gbs),
                               FD(a2a_gbs),
                               FD(ib_gbs),
                               FD(ib_lat_us),
                               FD(nvl_lat_us),
                               FD(host_dram_gbs),
                               FD(attn_fwd_tflops),
                               FD(attn_bwd_tflops),
                               FD(attn_half_seq),
                               FD(expert_eff),
                               FD(dense_eff),
                               FD(head_eff),
                               FD(mem_passes),
                               FD(optim_gparam_s),
                               FD(cpu_adam_gparam_s),
                               FD(step_overhead_ms),
                               FD(coll_us),
                               FD(layer_overhead_ms),
                               FD(fsdp2_attn_tflops),
                               FD(fsdp2_expert_eff),
                               FD(fsdp2_cpu_adam_gparam_s)};
#define NFIELDS (sizeof fields / sizeof fields[0])

pl_status pl_plan_machine_set(pl_plan_machine *m, const char *kv) {
  const char *eq = strchr(kv, '=');
  char key[48];
  size_t kl = eq ? (size_t)(eq - kv) : strlen(kv);
  if (kl >= sizeof key)
    kl = sizeof key - 1;
  memcpy(key, kv, kl);
  key[kl] = 0;
  if (!strcmp(key, "gpus_per_node") || !strcmp(key, "backend")) {
    char *end = NULL;
    if (!eq)
      goto bad_value;
    if (!strcmp(key, "backend")) {
      if (!strcmp(eq + 1, "cuda"))
        m->backend = PL_BACKEND_CUDA;
      else if (!strcmp(eq + 1, "cpu"))
        m->backend = PL_BACKEND_CPU;
      else
        return pl_set_error(PL_EINVAL, "machine: backend=%s: cpu or cuda",
                            eq + 1);
      return PL_OK;
    }
    long v = strtol(eq + 1, &end, 10);
    if (!*(eq + 1) || *end || v < 1 || v > 1024)
      return pl_set_error(PL_EINVAL,
                          "machine: gpus_per_node=%s: an integer in 1..1024",
                          eq + 1);
    m->gpus_per_node = (int)v;
    return PL_OK;
  }
  for (size_t i = 0; i < NFIELDS; i++) {
    if (strcmp(key, fields[i].key))
      continue;
    char *end = NULL;
    if (!eq || !*(eq + 1))
      goto bad_value;
    double v = strtod(eq + 1, &end);
    if (*end) { /* a size suffix: K M G T (1000s), Ki Mi Gi Ti (1024s) */
      const char *u = "KMGT", *q = strchr(u, *end);
      if (!q || !*end)
        goto bad_value;
      const double base = end[1] == 'i' ? 1024 : 1000;
      v *= pow(base, (double)(q - u + 1));
      end += end[1] == 'i' ? 2 : 1;
    }
    if (*end || !isfinite(v) || v < 0)
      goto bad_value;
    *(double *)((char *)m + fields[i].off) = v;
    return PL_OK;
  }
  {
    char allowed[1024] = "backend, gpus_per_node";
    for (size_t i = 0; i < NFIELDS; i++) {
      strncat(allowed, ", ", sizeof allowed - strlen(allowed) - 1);
      strncat(allowed, fields[i].key, sizeof allowed - strlen(allowed) - 1);
    }
    return pl_set_error(PL_EINVAL, "machine: unknown key '%s' (allowed: %s)",
                        key, allowed);
  }
bad_value:
  return pl_set_error(PL_EINVAL,
                      "machine: '%s': need key=value with a number >= 0 "
                      "(sizes may end in K M G T or Ki Mi Gi Ti)",
                      kv);
}

void pl_plan_machine_print(const pl_plan_machine *m, FILE *f) {
  fprintf(f, "# machine: %s\n", m->source);
  fprintf(f, "#   backend=%s gpus_per_node=%d\n",
          m->backend == PL_BACKEND_CUDA ? "cuda" : "cpu", m->gpus_per_node);
  for (size_t i = 0; i < NFIELDS; i++)
    fprintf(f, "#   %s=%g\n", fields[i].key,
            *(const double *)((const char *)m + fields[i].off));
}

/* ---- result files ---- */

#define MAXCOL 64

typedef struct tsv {
  FILE *f;
  const char *path;
  int line, ncol;
  char bench[32];
  char *hdr[MAXCOL];
  char hbuf[4096], buf[8192];
  char *val[MAXCOL];
} tsv;

static int split(char *s, char **out, int max) {
  int n = 0;
  for (char *p = s; n < max;) {
    out[n++] = p;
    char *t = strchr(p, '\t');
    if (!t)
      break;
    *t = 0;
    p = t + 1;
  }
  char *nl = strchr(out[n - 1], '\n');
  if (nl)
    *nl = 0;
  nl = strchr(out[n - 1], '\r');
  if (nl)
    *nl = 0;
  return n;
}

/* The header (after the # lines, which give the bench). */
static pl_status tsv_open(tsv *t, const char *path) {
  memset(t, 0, sizeof *t);
  t->path = path;
  t->f = fopen(path, "r");
  if (!t->f)
    return pl_set_error(PL_EINVAL, "machine: cannot open '%s'", path);
  while (fgets(t->hbuf, sizeof t->hbuf, t->f)) {
    t->line++;
    if (t->hbuf[0] == '#') {
      if (!strncmp(t->hbuf, "# bench: ", 9)) {
        snprintf(t->bench, sizeof t->bench, "%s", t->hbuf + 9);
        char *nl = strchr(t->bench, '\n');
        if (nl)
          *nl = 0;
      }
      continue;
    }
    t->ncol = split(t->hbuf, t->hdr, MAXCOL);
    return PL_OK;
  }
  fclose(t->f);
  t->f = NULL;
  return pl_set_error(PL_EINVAL, "machine: '%s': no header line", path);
}

/* The next data row; 0 at the end.  Torn and # lines are skipped. */
static int tsv_row(tsv *t) {
  while (fgets(t->buf, sizeof t->buf, t->f)) {
    t->line++;
    if (t->buf[0] == '#' || t->buf[0] == '\n')
      continue;
    int n = split(t->buf, t->val, MAXCOL);
    if (n != t->ncol)
      continue;
    return 1;
  }
  return 0;
}

static const char *col(const tsv *t, const char *name) {
  for (int i = 0; i < t->ncol; i++)
    if (!strcmp(t->hdr[i], name))
      return t->val[i];
  return NULL;
}

static double num(const tsv *t, const char *name) {
  const char *v = col(t, name);
  if (!v || !*v || !strcmp(v, "-"))
    return NAN;
  char *end;
  double d = strtod(v, &end);
  return *end ? NAN : d;
}

static bool row_ok(const tsv *t) {
  const char *s = col(t, "status");
  return !s || !strcmp(s, "ok");
}

static void note_source(pl_plan_machine *m, const char *path) {
  if (!strncmp(m->source, "defaults", 8))
    snprintf(m->source, sizeof m->source, "%s", path);
  else if (strlen(m->source) + strlen(path) + 3 < sizeof m->source) {
    strcat(m->source, ", ");
    strcat(m->source, path);
  }
}

/* calib: the row of the largest bytes of each test that is ok.  mem_copy
 * (loads and stores of the host's memory by all cores, bytes counted read +
 * write) is the host memory bandwidth the optimizer's floor divides by. */
static void load_calib(pl_plan_machine *m, tsv *t) {
  static const char *const tests[] = {
      "gemm",      "h2d",      "d2h",      "bidir",    "d2d",
      "allreduce", "alltoall", "sendrecv", "mem_copy", NULL};
  enum { NT = 9 };
  double best[NT], size[NT];
  for (int i = 0; i < NT; i++)
    best[i] = NAN, size[i] = -1;
  while (tsv_row(t)) {
    if (!row_ok(t))
      continue;
    const char *name = col(t, "variant");
    if (!name || !*name || !strcmp(name, "-"))
      name = col(t, "test");
    if (!name)
      continue;
    for (int i = 0; tests[i]; i++) {
      if (strcmp(name, tests[i]))
        continue;
      double sz = i == 0 ? num(t, "mnk") : num(t, "bytes");
      double v = i == 0             ? num(t, "tflops")
                 : i <= 4 || i == 8 ? num(t, "algbw_gbs")
                                    : num(t, "busbw_gbs");
      if (isnan(sz))
        sz = 0;
      if (!isnan(v) && sz >= size[i])
        size[i] = sz, best[i] = v;
    }
  }
  double *dst[NT] = {&m->gemm_tflops, &m->h2d_gbs,  &m->d2h_gbs,
                     &m->bidir_gbs,   &m->hbm_gbs,  &m->nccl_gbs,
                     &m->a2a_gbs,     &m->nvl_gbs,  &m->host_dram_gbs};
  for (int i = 0; i < NT; i++)
    if (!isnan(best[i]) && best[i] > 0)
      *dst[i] = best[i];
}

/* attention: long-context rates from the longest seq's fwd and fwdbwd
 * rows; the half-rate context from the shortest fwd row */
static void load_attention(pl_plan_machine *m, tsv *t) {
  double sf = -1, rf = NAN, sb = -1, rb = NAN, s0 = 1e30, r0 = NAN;
  while (tsv_row(t)) {
    if (!row_ok(t))
      continue;
    const char *pass = col(t, "pass");
    double s = num(t, "seq"), r = num(t, "tflops");
    if (!pass || isnan(s) || isnan(r))
      continue;
    if (!strcmp(pass, "fwd")) {
      if (s > sf)
        sf = s, rf = r;
      if (s < s0)
        s0 = s, r0 = r;
    } else if (!strcmp(pass, "fwdbwd") && s > sb) {
      sb = s, rb = r;
    }
  }
  if (!isnan(rf) && rf > 0)
    m->attn_fwd_tflops = rf;
  if (!isnan(rb) && rb > 0 && !isnan(rf)) {
    /* fwd+bwd = 3.5 F at rb; the backward's 2.5 F in the rest */
    double tb = 3.5 / rb - 1.0 / rf;
    if (tb > 0)
      m->attn_bwd_tflops = 2.5 / tb;
  }
  if (!isnan(r0) && !isnan(rf) && s0 < sf && r0 < rf)
    m->attn_half_seq = s0 * (rf / r0 - 1);
}

static void load_adam(pl_plan_machine *m, tsv *t) {
  double ps = -1, pc = -1, rs = NAN, rc = NAN;
  while (tsv_row(t)) {
    if (!row_ok(t))
      continue;
    const char *v = col(t, "variant");
    if (!v || !*v || !strcmp(v, "-"))
      v = col(t, "mode");
    double p = num(t, "params"), r = num(t, "gparam_s"), n = num(t, "ranks");
    if (!v || isnan(p) || isnan(r))
      continue;
    if (!strcmp(v, "stream") && p > ps)
      ps = p, rs = r;
    if (!strcmp(v, "cpu") && p > pc) {
      int g = isnan(n) ? 1 : (int)n;
      if (g > m->gpus_per_node)
        g = m->gpus_per_node;
      pc = p, rc = r * g;
    }
  }
  if (!isnan(rs) && rs > 0)
    m->optim_gparam_s = rs;
  if (!isnan(rc) && rc > 0)
    m->cpu_adam_gparam_s = rc;
}

static void load_moegemm(pl_plan_machine *m, tsv *t) {
  double sum = 0;
  int n = 0;
  while (tsv_row(t)) {
    if (!row_ok(t))
      continue;
    double r = num(t, "tflops");
    if (isnan(r))
      r = num(t, "grouped_tflops");
    if (!isnan(r) && r > 0)
      sum += r, n++;
  }
  if (n && m->gemm_tflops > 0)
    m->expert_eff = sum / n / m->gemm_tflops;
}

pl_status pl_plan_machine_load(pl_plan_machine *m, const char *path) {
  tsv *t = malloc(sizeof *t);
  if (!t)
    return pl_set_error(PL_ENOMEM, "machine: host");
  pl_status st = tsv_open(t, path);
  if (st != PL_OK) {
    free(t);
    return st;
  }
  if (!strcmp(t->bench, "calib"))
    load_calib(m, t);
  else if (!strcmp(t->bench, "attention"))
    load_attention(m, t);
  else if (!strcmp(t->bench, "adam"))
    load_adam(m, t);
  else if (!strcmp(t->bench, "moegemm"))
    load_moegemm(m, t);
  else
    st = pl_set_error(PL_EINVAL,
                      "machine: '%s': bench '%s' (line 'bench:' of its "
                      "metadata): the planner reads calib, attention, adam "
                      "and moegemm result files",
                      path, t->bench[0] ? t->bench : "?");
  fclose(t->f);
  free(t);
  if (st == PL_OK)
    note_source(m, path);
  return st;
}
