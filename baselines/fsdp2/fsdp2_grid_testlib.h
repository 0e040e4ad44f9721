/* fsdp2_grid_testlib.h — the grid of small FSDP2 configurations the
 * planner's memory of the baseline is checked on (tiny-like models over the
 * ranks of mpirun -np 1..4: see test_mpi_fsdp2_plan.c for what each point
 * exercises), shared by the check of the dry measurement against the real
 * CPU step (test_mpi_fsdp2_plan.c) and the one of one measured step against
 * two (test_mpi_fsdp2_dry.c).  Included by test files only. */
#ifndef PLATEAU_BASELINES_FSDP2_FSDP2_GRID_TESTLIB_H
#define PLATEAU_BASELINES_FSDP2_FSDP2_GRID_TESTLIB_H

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "fsdp2.h"

typedef struct point {
  char name[64];
  pl_model_cfg m;
  pl_fsdp2_cfg c;
  int64_t S;
} point;

static inline point base(const char *name) {
  point p;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "%s", name);
  ck_assert_int_eq(pl_model_preset("tiny", &p.m), PL_OK);
  p.m.E = 12;  /* divides by 1..4 ranks */
  p.m.V = 128; /* the peak in the layers; the head's at V = 509, 512 */
  p.c = pl_fsdp2_cfg_default();
  p.c.moe_lanes = 0;
  p.S = 256;
  return p;
}

/* The grid; every point valid for 1..4 ranks (cp = 2 only when W is even,
 * cp = W only when W > 1).  ep = W is the EP a torchtitan user takes with
 * cp 1; the proxy's ep spans its virtual world. */
static inline int grid(point *g, int size) {
  int n = 0;
  g[n++] = base("cp1 ep1 AC full, gpu optimizer");
  point p = base("ep=W, AC full");
  p.c.ep = size;
  g[n++] = p;
  p = base("ep=W, AC selective");
  p.c.ep = size, p.c.ac = PL_FSDP2_AC_SELECTIVE;
  g[n++] = p;
  p = base("ep=W, AC none");
  p.c.ep = size, p.c.ac = PL_FSDP2_AC_NONE;
  g[n++] = p;
  p = base("ep=W, cpu optimizer, micro 2");
  p.c.ep = size, p.c.optim = PL_FSDP2_OPTIM_CPU, p.c.micro = 2;
  g[n++] = p;
  p = base("ep=1, gpu optimizer, micro 2, selective");
  p.c.micro = 2, p.c.ac = PL_FSDP2_AC_SELECTIVE;
  g[n++] = p;
  if (size % 2 == 0) {
    p = base("cp=2, ep=W, S=512");
    p.c.cp = 2, p.c.ep = size, p.S = 512;
    g[n++] = p;
  }
  if (size > 1) {
    p = base("cp=W ring, AC none, S=768");
    p.c.cp = size, p.c.ac = PL_FSDP2_AC_NONE, p.S = 768;
    g[n++] = p;
  }
  p = base("f32, V=509, H=96, selective freq 3");
  p.c.dt = PL_F32, p.m.V = 509, p.m.H = 96;
  p.c.ac = PL_FSDP2_AC_SELECTIVE, p.c.ac_freq = 3;
  p.m.L = 4;
  g[n++] = p;
  p = base("E=24, k=4, all MoE, ep=W");
  p.m.E = 24, p.m.k = 4, p.m.dense_layers = 0, p.c.ep = size;
  g[n++] = p;
  p = base("proxy W_v=2W, ep=2W, E=24, cpu optimizer");
  p.m.E = 24, p.c.W_v = 2 * size, p.c.ep = 2 * size;
  p.c.optim = PL_FSDP2_OPTIM_CPU;
  g[n++] = p;
  p = base("dense model, V=512, S=1024");
  p.m.dense_layers = p.m.L, p.m.V = 512, p.S = 1024;
  g[n++] = p;
  return n;
}

#endif
