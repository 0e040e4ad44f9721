/* machine.c — the machine the planner projects onto: the defaults of an
 * 8×H200 node, and the rates read from result files (`plateau bench calib`
 * for the ceilings; the attention, adam and moegemm benches and the
 * torch_adamw peer for the kernel rates), recognized by their `# bench:`
 * metadata line and read by column name, so files of either result-schema
 * version work. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"
#include "plateau/file.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

pl_plan_machine pl_plan_machine_default(void) {
  pl_plan_machine m;
  memset(&m, 0, sizeof m);
  m.backend = PL_BACKEND_CUDA;
  m.gpus_per_node = 8;
  m.hbm_bytes = 150109880320.0; /* H200: 139.8 GiB the driver reports     */
  m.hbm_reserve = 4 * GIB;
  m.hbm_alloc = 0;
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
  m.ib_gbs = 47;    /* one 400 Gb/s NIC per GPU (doc/DESIGN.md)        */
  m.ib_lat_us = 5;
  m.nvl_lat_us = 3;
  m.host_dram_gbs = 450; /* two sockets of DDR5, achieved                  */
  /* the engine's attention (AUTO: cuDNN's fused flash attention) at 128K,
   * causal GQA 64/8 heads, d 128: fwd 554, fwd+bwd 542 TFLOP/s */
  m.attn_fwd_tflops = 554;
  m.attn_bwd_tflops = 537;
  m.attn_half_seq = 1024;
  /* cuDNN's full mask at 16K (the ring's block length at the paper's
   * points), GQA 16/2 heads, d 128, H200 (test_attention_cuda) */
  m.attn_full_fwd_tflops = 678.5;
  m.attn_full_bwd_tflops = 593.7;
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

/* Every parameter with its unit, the values the models accept (lo < v when
 * lo_open, else lo <= v; v <= hi: a zero rate would divide by zero, a
 * capacity of 2^64 bytes is no machine) and its meaning, for --set's
 * checks and --machine's listing. */
typedef struct field {
  const char *key;
  size_t off;
  const char *unit;
  double lo, hi;
  bool lo_open;
  const char *meaning;
} field;
#define FD(k, unit, lo, hi, open, meaning)                                     \
  { #k, offsetof(pl_plan_machine, k), unit, lo, hi, open, meaning }
#define RATE 1e6 /* the largest rate accepted (any unit): a sanity bound */
#define BYTES 1e15
static const field fields[] = {
    FD(hbm_bytes, "B", 0, BYTES, true, "device memory per GPU"),
    FD(hbm_reserve, "B", 0, BYTES, false,
       "of which held back (context, NCCL, the pool's fragmentation)"),
    FD(hbm_alloc, "B", 0, BYTES, false,
       "allocatable ceiling measured (calib alloc; 0: not measured, "
       "hbm_bytes - hbm_reserve)"),
    FD(fill_reserve, "B", 0, BYTES, false,
       "of the usable device memory, left free by the headroom fill"),
    FD(host_bytes, "B", 0, BYTES, true, "host RAM per node"),
    FD(host_reserve, "B", 0, BYTES, false,
       "of which held back (OS, processes, page cache)"),
    FD(gemm_tflops, "TFLOP/s", 0, RATE, true, "dense bf16 GEMM (calib gemm)"),
    FD(hbm_gbs, "GB/s", 0, RATE, true,
       "device memory copy, read + write counted (calib d2d)"),
    FD(h2d_gbs, "GB/s", 0, RATE, true, "pinned host to device per GPU"),
    FD(d2h_gbs, "GB/s", 0, RATE, true, "device to pinned host per GPU"),
    FD(bidir_gbs, "GB/s", 0, RATE, true, "both directions at once per GPU"),
    FD(nvl_gbs, "GB/s", 0, RATE, true, "NVLink point-to-point per direction"),
    FD(nccl_gbs, "GB/s", 0, RATE, true,
       "intra-node ring collectives, bus bandwidth"),
    FD(a2a_gbs, "GB/s", 0, RATE, true, "intra-node all-to-all, bus bandwidth"),
    FD(ib_gbs, "GB/s", 0, RATE, true, "inter-node per GPU per direction"),
    FD(ib_lat_us, "us", 0, RATE, false, "latency per message across nodes"),
    FD(nvl_lat_us, "us", 0, RATE, false, "latency per message inside a node"),
    FD(host_dram_gbs, "GB/s", 0, RATE, true,
       "host memory bandwidth per node (calib mem_copy)"),
    FD(attn_fwd_tflops, "TFLOP/s", 0, RATE, true,
       "the engine's attention forward at long context (cuDNN's where built)"),
    FD(attn_bwd_tflops, "TFLOP/s", 0, RATE, true,
       "the engine's attention backward"),
    FD(attn_half_seq, "tokens", 0, 1e12, false,
       "context at which attention runs at half its long-context rate"),
    FD(attn_full_fwd_tflops, "TFLOP/s", 0, RATE, false,
       "the full mask's forward, every score counted, flat in the block "
       "length (ring attention's full blocks; 0 here or in the backward's: "
       "the causal rates)"),
    FD(attn_full_bwd_tflops, "TFLOP/s", 0, RATE, false,
       "the full mask's backward (0: the causal rates)"),
    FD(expert_eff, "x gemm", 0, 2, true,
       "expert GEMMs as a fraction of gemm_tflops"),
    FD(dense_eff, "x gemm", 0, 2, true,
       "dense layer GEMMs as a fraction of gemm_tflops"),
    FD(head_eff, "x gemm", 0, 2, true,
       "vocabulary head GEMMs as a fraction of gemm_tflops"),
    FD(mem_passes, "passes", 0, 1e4, false,
       "elementwise passes over N*H*b per layer and step"),
    FD(optim_gparam_s, "Gparam/s", 0, RATE, false,
       "streamed optimizer per GPU (0: from the host link)"),
    FD(cpu_adam_gparam_s, "Gparam/s", 0, RATE, true,
       "SIMD CPU AdamW per node, all cores"),
    FD(cpu_update_gparam_s, "Gparam/s", 0, RATE, false,
       "the SIMD CPU AdamW update alone per node, no staging (the FSDP2 "
       "baseline; 0: cpu_adam_gparam_s)"),
    FD(step_overhead_ms, "ms", 0, RATE, false,
       "per step: host waits, launches, small ops"),
    FD(coll_us, "us", 0, RATE, false,
       "per collective call: launch, agreement, the slowest rank"),
    FD(layer_overhead_ms, "ms", 0, RATE, false, "per layer and pass"),
    FD(fsdp2_attn_tflops, "TFLOP/s", 0, RATE, true,
       "PyTorch's FSDP2 (plan --table paper): SDPA forward + backward; "
       "our baseline's ring attention runs at attn_(full_)fwd/bwd_tflops"),
    FD(fsdp2_expert_eff, "x gemm", 0, 2, true,
       "FSDP2: grouped expert GEMMs as a fraction of gemm_tflops"),
    FD(fsdp2_cpu_adam_gparam_s, "Gparam/s", 0, RATE, true,
       "PyTorch's FSDP2 (plan --table paper): torch fused CPU AdamW per "
       "node; our baseline's runs at cpu_update_gparam_s")};
#define NFIELDS (sizeof fields / sizeof fields[0])

static pl_status set_other(pl_plan_machine *m, const char *key, const char *v) {
  if (!strcmp(key, "backend")) {
    if (!strcmp(v, "cuda"))
      m->backend = PL_BACKEND_CUDA;
    else if (!strcmp(v, "cpu"))
      m->backend = PL_BACKEND_CPU;
    else
      return pl_set_error(PL_EINVAL,
                          "machine: backend=%s: not allowed (allowed: cuda | "
                          "cpu)",
                          v);
    return PL_OK;
  }
  char *end = NULL;
  long n = strtol(v, &end, 10);
  if (!*v || *end || n < 1 || n > 1024)
    return pl_set_error(PL_EINVAL,
                        "machine: gpus_per_node=%s: out of range (allowed: "
                        "an integer 1..1024)",
                        v);
  m->gpus_per_node = (int)n;
  return PL_OK;
}

/* "12.5", "80Gi", "2T": a number with an optional size suffix, K M G T
 * (1000s) or Ki Mi Gi Ti (1024s); false when it is not one. */
static bool parse_value(const char *s, double *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s)
    return false;
  if (*end) {
    const char *u = "KMGT", *q = strchr(u, *end);
    if (!q)
      return false;
    const double base = end[1] == 'i' ? 1024 : 1000;
    v *= pow(base, (double)(q - u + 1));
    end += end[1] == 'i' ? 2 : 1;
  }
  *out = v;
  return !*end;
}

pl_status pl_plan_machine_set(pl_plan_machine *m, const char *kv) {
  const char *eq = strchr(kv, '=');
  char key[48];
  size_t kl = eq ? (size_t)(eq - kv) : strlen(kv);
  if (kl >= sizeof key)
    kl = sizeof key - 1;
  memcpy(key, kv, kl);
  key[kl] = 0;
  const bool other = !strcmp(key, "gpus_per_node") || !strcmp(key, "backend");
  const field *fd = NULL;
  for (size_t i = 0; i < NFIELDS && !fd; i++)
    if (!strcmp(key, fields[i].key))
      fd = &fields[i];
  if (!other && !fd) {
    char allowed[1024] = "backend, gpus_per_node";
    for (size_t i = 0; i < NFIELDS; i++) {
      strncat(allowed, ", ", sizeof allowed - strlen(allowed) - 1);
      strncat(allowed, fields[i].key, sizeof allowed - strlen(allowed) - 1);
    }
    return pl_set_error(PL_EINVAL, "machine: unknown key '%s' (allowed: %s)",
                        key, allowed);
  }
  if (!eq || !eq[1])
    return pl_set_error(PL_EINVAL,
                        "machine: '%s': need key=value (a number; sizes may "
                        "end in K M G T or Ki Mi Gi Ti)",
                        kv);
  if (other)
    return set_other(m, key, eq + 1);
  double v;
  if (!parse_value(eq + 1, &v) || !isfinite(v))
    return pl_set_error(PL_EINVAL,
                        "machine: %s=%s: not a finite number (sizes may end "
                        "in K M G T or Ki Mi Gi Ti)",
                        key, eq + 1);
  const bool above = fd->lo_open ? v > fd->lo : v >= fd->lo;
  if (!above || !(v <= fd->hi))
    return pl_set_error(PL_EINVAL,
                        "machine: %s=%s: out of range (allowed: %s%.16g up "
                        "to %.16g %s: %s)",
                        key, eq + 1, fd->lo_open ? "above " : "", fd->lo,
                        fd->hi, fd->unit, fd->meaning);
  *(double *)((char *)m + fd->off) = v;
  return PL_OK;
}

void pl_plan_machine_print(const pl_plan_machine *m, FILE *f) {
  fprintf(f, "# machine: %s\n", m->source);
  fprintf(f, "#   %-32s %-9s %s\n", "key=value (--set key=value)", "unit",
          "meaning");
  char kv[96];
  snprintf(kv, sizeof kv, "backend=%s",
           m->backend == PL_BACKEND_CUDA ? "cuda" : "cpu");
  fprintf(f, "#   %-32s %-9s %s\n", kv, "-",
          "the target device: cuda (projections) or cpu");
  snprintf(kv, sizeof kv, "gpus_per_node=%d", m->gpus_per_node);
  fprintf(f, "#   %-32s %-9s %s\n", kv, "GPUs", "GPUs (ranks) per node");
  for (size_t i = 0; i < NFIELDS; i++) {
    const double v = *(const double *)((const char *)m + fields[i].off);
    snprintf(kv, sizeof kv, "%s=%.15g", fields[i].key, v);
    if (!strcmp(fields[i].unit, "B"))
      fprintf(f, "#   %-32s %-9s %s: %.2f GiB\n", kv, "bytes",
              fields[i].meaning, v / GIB);
    else
      fprintf(f, "#   %-32s %-9s %s\n", kv, fields[i].unit, fields[i].meaning);
  }
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

/* The header (after the # lines, which give the bench).  Only a regular
 * file is opened (a FIFO would wait for a writer forever). */
static pl_status tsv_open(tsv *t, const char *path) {
  memset(t, 0, sizeof *t);
  t->path = path;
  if (pl_fopen_regular(path, &t->f) != PL_OK) {
    return pl_error_prefix(PL_EINVAL, "machine: cannot open ");
  }
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

/* The value of column name in the current row: NAN when the file has no
 * such column or the row leaves it empty ('-'); PL_EINVAL naming the file,
 * line, column and value when it is not a finite number (nan, inf, text),
 * or for a rate (rate: true) when it is not > 0 — a rate the planner would
 * otherwise skip in silence, falling back to a default. */
static pl_status num(const tsv *t, const char *name, bool rate, double *out) {
  *out = NAN;
  const char *v = col(t, name);
  if (!v || !*v || !strcmp(v, "-"))
    return PL_OK;
  char *end;
  const double d = strtod(v, &end);
  if (*end || end == v || !isfinite(d) || (rate ? !(d > 0) : d < 0))
    return pl_set_error(PL_EINVAL,
                        "machine: '%s' line %d: column %s is '%s' (allowed: "
                        "%s, or '-' for none)",
                        t->path, t->line, name, v,
                        rate ? "a finite number > 0" : "a finite number >= 0");
  *out = d;
  return PL_OK;
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
 * write) is the host memory bandwidth the optimizer's floor divides by;
 * alloc's bytes (the smallest of its rows: every rank's) the allocatable
 * ceiling. */
static pl_status load_calib(pl_plan_machine *m, tsv *t) {
  static const char *const tests[] = {
      "gemm",      "h2d",      "d2h",      "bidir",    "d2d",
      "allreduce", "alltoall", "sendrecv", "mem_copy", NULL};
  enum { NT = 9 };
  double best[NT], size[NT];
  for (int i = 0; i < NT; i++)
    best[i] = NAN, size[i] = -1;
  double ceiling = NAN;
  while (tsv_row(t)) {
    if (!row_ok(t))
      continue;
    const char *name = col(t, "variant");
    if (!name || !*name || !strcmp(name, "-"))
      name = col(t, "test");
    if (!name)
      continue;
    if (!strcmp(name, "alloc")) {
      double b;
      PL_TRY(num(t, "bytes", false, &b));
      if (!isnan(b) && b > 0 && !(b >= ceiling))
        ceiling = b;
      continue;
    }
    for (int i = 0; tests[i]; i++) {
      if (strcmp(name, tests[i]))
        continue;
      double sz, v;
      PL_TRY(num(t, i == 0 ? "mnk" : "bytes", false, &sz));
      PL_TRY(num(t,
                 i == 0             ? "tflops"
                 : i <= 4 || i == 8 ? "algbw_gbs"
                                    : "busbw_gbs",
                 true, &v));
      if (isnan(sz))
        sz = 0;
      if (!isnan(v) && sz >= size[i])
        size[i] = sz, best[i] = v;
    }
  }
  double *dst[NT] = {&m->gemm_tflops, &m->h2d_gbs, &m->d2h_gbs,
                     &m->bidir_gbs,   &m->hbm_gbs, &m->nccl_gbs,
                     &m->a2a_gbs,     &m->nvl_gbs, &m->host_dram_gbs};
  for (int i = 0; i < NT; i++)
    if (!isnan(best[i]) && best[i] > 0)
      *dst[i] = best[i];
  if (!isnan(ceiling))
    m->hbm_alloc = ceiling;
  return PL_OK;
}

/* attention: long-context rates from the longest seq's causal fwd and
 * fwdbwd rows, the half-rate context from the shortest causal fwd row; the
 * full mask's rates (rows with mask full: measure them at the ring's block
 * length) from its longest rows alike, or, causal rows without full ones
 * in any file read, 0 (the causal rates: the defaults' are another
 * kernel's) */
static pl_status load_attention(pl_plan_machine *m, tsv *t) {
  /* [causal, full]: longest fwd seq and rate, longest fwdbwd seq and rate */
  double sf[2] = {-1, -1}, rf[2] = {NAN, NAN}, sb[2] = {-1, -1},
         rb[2] = {NAN, NAN}, s0 = 1e30, r0 = NAN;
  while (tsv_row(t)) {
    if (!row_ok(t))
      continue;
    const char *pass = col(t, "pass"), *mask = col(t, "mask");
    const int k = mask && !strcmp(mask, "full");
    double s, r;
    PL_TRY(num(t, "seq", false, &s));
    PL_TRY(num(t, "tflops", true, &r));
    if (!pass || isnan(s) || isnan(r))
      continue;
    if (!strcmp(pass, "fwd")) {
      if (s > sf[k])
        sf[k] = s, rf[k] = r;
      if (!k && s < s0)
        s0 = s, r0 = r;
    } else if (!strcmp(pass, "fwdbwd") && s > sb[k]) {
      sb[k] = s, rb[k] = r;
    }
  }
  double *fwd[2] = {&m->attn_fwd_tflops, &m->attn_full_fwd_tflops},
         *bwd[2] = {&m->attn_bwd_tflops, &m->attn_full_bwd_tflops};
  for (int k = 0; k < 2; k++) {
    if (!isnan(rf[k]) && rf[k] > 0)
      *fwd[k] = rf[k];
    if (!isnan(rb[k]) && rb[k] > 0 && !isnan(rf[k])) {
      /* fwd+bwd = 3.5 F at rb; the backward's 2.5 F in the rest */
      double tb = 3.5 / rb[k] - 1.0 / rf[k];
      if (tb > 0)
        *bwd[k] = 2.5 / tb;
    }
  }
  if (!isnan(rf[1]))
    m->attn_full_read = true;
  else if (!isnan(rf[0]) && !m->attn_full_read) /* the defaults' full rates */
    m->attn_full_fwd_tflops = m->attn_full_bwd_tflops = 0; /* are another's */
  if (!isnan(r0) && !isnan(rf[0]) && s0 < sf[0] && r0 < rf[0])
    m->attn_half_seq = s0 * (rf[0] / r0 - 1);
  return PL_OK;
}

/* The adam bench and the torch_adamw peer: the rate (gparam_s, Gparam/s) of
 * the largest params' row of each of nk kinds, NAN where none.  kinds[i]
 * names the rows' variant (their mode where the variant is empty or '-');
 * NULL takes every row.  node[i]: the rate is the node's, the row's times
 * its ranks (their sum; at most a node's), else the row's own. */
static pl_status largest_rates(const pl_plan_machine *m, tsv *t, int nk,
                               const char *const kinds[], const bool node[],
                               double rate[]) {
  double best[4];
  PL_ASSERT(nk >= 1 && nk <= 4);
  for (int i = 0; i < nk; i++)
    best[i] = -1, rate[i] = NAN;
  while (tsv_row(t)) {
    if (!row_ok(t))
      continue;
    const char *v = col(t, "variant");
    if (!v || !*v || !strcmp(v, "-"))
      v = col(t, "mode");
    double p, r, n;
    PL_TRY(num(t, "params", false, &p));
    PL_TRY(num(t, "gparam_s", true, &r));
    PL_TRY(num(t, "ranks", true, &n));
    if (isnan(p) || isnan(r))
      continue;
    int g = isnan(n) ? 1 : (int)n;
    if (g > m->gpus_per_node)
      g = m->gpus_per_node;
    for (int i = 0; i < nk; i++)
      if ((!kinds[i] || (v && !strcmp(v, kinds[i]))) && p > best[i])
        best[i] = p, rate[i] = node[i] ? r * g : r;
  }
  return PL_OK;
}

/* adam: the streamed optimizer's rate on the device; the CPU Adam's and the
 * host update's per node */
static pl_status load_adam(pl_plan_machine *m, tsv *t) {
  static const char *const kinds[3] = {"stream", "cpu", "update"};
  static const bool node[3] = {false, true, true};
  double r[3];
  PL_TRY(largest_rates(m, t, 3, kinds, node, r));
  if (!isnan(r[0]) && r[0] > 0)
    m->optim_gparam_s = r[0];
  if (!isnan(r[1]) && r[1] > 0)
    m->cpu_adam_gparam_s = r[1];
  if (!isnan(r[2]) && r[2] > 0)
    m->cpu_update_gparam_s = r[2];
  return PL_OK;
}

/* torch_adamw (analysis/peers): PyTorch's fused CPU AdamW per node */
static pl_status load_torch_adamw(pl_plan_machine *m, tsv *t) {
  static const char *const kinds[1] = {NULL};
  static const bool node[1] = {true};
  double r;
  PL_TRY(largest_rates(m, t, 1, kinds, node, &r));
  if (!isnan(r) && r > 0)
    m->fsdp2_cpu_adam_gparam_s = r;
  return PL_OK;
}

static pl_status load_moegemm(pl_plan_machine *m, tsv *t) {
  double sum = 0;
  int n = 0;
  while (tsv_row(t)) {
    if (!row_ok(t))
      continue;
    double r;
    PL_TRY(num(t, "tflops", true, &r));
    if (isnan(r))
      PL_TRY(num(t, "grouped_tflops", true, &r));
    if (!isnan(r) && r > 0)
      sum += r, n++;
  }
  if (n && m->gemm_tflops > 0)
    m->expert_eff = sum / n / m->gemm_tflops;
  return PL_OK;
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
  /* into a copy: a file refused halfway changes nothing */
  pl_plan_machine c = *m;
  if (!strcmp(t->bench, "calib"))
    st = load_calib(&c, t);
  else if (!strcmp(t->bench, "attention"))
    st = load_attention(&c, t);
  else if (!strcmp(t->bench, "adam"))
    st = load_adam(&c, t);
  else if (!strcmp(t->bench, "moegemm"))
    st = load_moegemm(&c, t);
  else if (!strcmp(t->bench, "torch_adamw"))
    st = load_torch_adamw(&c, t);
  else
    st = pl_set_error(PL_EINVAL,
                      "machine: '%s': bench '%s' (line 'bench:' of its "
                      "metadata): the planner reads calib, attention, adam, "
                      "moegemm and torch_adamw result files",
                      path, t->bench[0] ? t->bench : "?");
  fclose(t->f);
  free(t);
  /* what the file set is held to --set's bounds: a rate of 1e308 from a
   * hand-edited file is no machine either */
  PL_TRY(st);
  for (size_t i = 0; i < NFIELDS; i++) {
    const field *fd = &fields[i];
    const double v = *(const double *)((const char *)&c + fd->off),
                 was = *(const double *)((const char *)m + fd->off);
    if (v == was)
      continue;
    const bool above = fd->lo_open ? v > fd->lo : v >= fd->lo;
    if (!above || !(v <= fd->hi))
      return pl_set_error(PL_EINVAL,
                          "machine: '%s': %s=%.6g from the file: out of range "
                          "(allowed: %s%.16g up to %.16g %s: %s)",
                          path, fd->key, v, fd->lo_open ? "above " : "", fd->lo,
                          fd->hi, fd->unit, fd->meaning);
  }
  *m = c;
  note_source(m, path);
  return PL_OK;
}

/* ---- the machine's costs (plan_internal.h): usable memory, collectives
 * over a group, attention's rate at a context ---- */

double pl_plan_hbm_usable(const pl_plan_machine *mc) {
  return pl__hbm_usable(mc);
}
double pl__hbm_usable(const pl_plan_machine *mc) {
  const double u = mc->hbm_bytes - mc->hbm_reserve;
  return mc->hbm_alloc > 0 && mc->hbm_alloc < u ? mc->hbm_alloc : u;
}
double pl__host_usable(const pl_plan_machine *mc) {
  return mc->host_bytes - mc->host_reserve;
}

void pl__link_of(const pl_plan_machine *mc, int G, double intra_gbs, double *bw,
                 double *lat) {
  if (G <= mc->gpus_per_node) {
    *bw = intra_gbs * 1e9;
    *lat = mc->nvl_lat_us * 1e-6;
  } else {
    *bw = (mc->ib_gbs < intra_gbs ? mc->ib_gbs : intra_gbs) * 1e9;
    *lat = mc->ib_lat_us * 1e-6;
  }
}

double pl__t_ring(const pl_plan_machine *mc, int G, double bytes) {
  if (G <= 1 || bytes <= 0)
    return 0;
  double bw, lat;
  pl__link_of(mc, G, mc->nccl_gbs, &bw, &lat);
  return bytes * (G - 1) / G / bw + (G - 1) * lat;
}

double pl__t_a2a(const pl_plan_machine *mc, int G, double bytes) {
  if (G <= 1 || bytes <= 0)
    return 0;
  const int g = mc->gpus_per_node < G ? mc->gpus_per_node : G;
  const double out = bytes * (G - 1) / G; /* leaves the rank */
  const double local = bytes * (g - 1) / G, remote = out - local;
  double t = local / (mc->a2a_gbs * 1e9) + (g - 1) * mc->nvl_lat_us * 1e-6;
  if (remote > 0) {
    const double tr = remote / (mc->ib_gbs * 1e9) +
                      (G - g) / (double)g * mc->ib_lat_us * 1e-6;
    t = t > tr ? t : tr; /* NVLink and the NIC in parallel */
  }
  return t;
}

double pl__attn_rate(const pl_plan_machine *mc, double rate, int64_t S) {
  const double h = mc->attn_half_seq > 0 ? mc->attn_half_seq : 0;
  return rate * (double)S / ((double)S + h);
}
