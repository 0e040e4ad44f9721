/* test_mpi_zero3.c — ZeRO-3 units (train/zero3.h) on the CPU backend under
 * mpirun -np 1..4:
 *  - gather: the full unit equals the parameters every rank's shard holds
 *    (f32 and bf16; numel not a multiple of the group; a unit over a
 *    sub-group, as the head over its replica ranks); with a virtual group
 *    the present ranks' block is tiled;
 *  - reduce-scatter: the shard gradient is the f32 sum over ranks of the
 *    full gradients (overwrite, then accumulate), the virtual ranks' blocks
 *    dropped;
 *  - the bound: a forward-then-backward walk over the units with the next
 *    unit prefetched keeps the tracked "zero3" peak at two gathered units and
 *    "zero3_grads" at one full f32 gradient plus a shard; a third resident
 *    unit is refused;
 *  - FSDP2's knobs (fp32_master, host_state, no residency bound): the fp32
 *    shard gathered as its weight-dtype cast, the unit copied out to numel
 *    elements, three units resident at once, the moments zeroed beside the
 *    shard, the shard state in the host arena with host_state, the
 *    reduce-scatter (overwrite, accumulate) as above, the transient tags
 *    back to zero; host_state without fp32_master refused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "plateau/host_device.h"
#include "train/zero3.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

static float val(int u, size_t i) {
  return (float)(u * 1000 + (int)(i % 997)) * 0.25f;
}

static void fill_shards(pl_zero3 *z, int u, size_t numel, pl_dtype dt) {
  void *w;
  size_t s, off;
  pl_zero3_shard(z, u, &w, NULL, &s, &off);
  for (size_t i = 0; i < s; i++) {
    float v = off + i < numel ? val(u, off + i) : 0.f;
    if (dt == PL_F32)
      ((float *)w)[i] = v;
    else
      ((pl_bf16 *)w)[i] = pl_f32_to_bf16(v);
  }
}

static void check_gather(pl_dtype dt, int vmul, pl_comm *grp) {
  pl_stream *s = pl_dev_stream(dev);
  const int G = grp ? pl_comm_size(grp) : 1;
  const size_t numel[3] = {1, 37, 1000};
  pl_zero3_unit_cfg uc[3];
  for (int u = 0; u < 3; u++)
    uc[u] = (pl_zero3_unit_cfg){"u", numel[u], grp, vmul * G};
  pl_zero3 *z;
  ck_assert_int_eq(pl_zero3_create(dev, dt, 3, uc, &z), PL_OK);
  for (int u = 0; u < 3; u++) {
    fill_shards(z, u, numel[u], dt);
    void *full;
    ck_assert_int_eq(pl_zero3_acquire(z, u, s, &full), PL_OK);
    size_t sh;
    pl_zero3_shard(z, u, NULL, NULL, &sh, NULL);
    const size_t blk = (size_t)G * sh;
    ck_assert_uint_eq(pl_zero3_full_numel(z, u), (size_t)vmul * blk);
    for (size_t i = 0; i < (size_t)vmul * blk; i++) {
      const size_t j = i % blk; /* tiled past the present ranks' block */
      float want = j < numel[u] ? val(u, j) : 0.f;
      if (dt == PL_BF16)
        want = pl_bf16_to_f32(pl_f32_to_bf16(want));
      float got = dt == PL_F32 ? ((float *)full)[i]
                               : pl_bf16_to_f32(((pl_bf16 *)full)[i]);
      ck_assert_msg(got == want, "unit %d elem %zu: %g != %g (G=%d vmul=%d)", u,
                    i, got, want, G, vmul);
    }
    pl_zero3_release(z, u, s);
    /* gradients: rank q contributes (q+1)·v(i) to every element */
    float *gf, *gs;
    ck_assert_int_eq(pl_zero3_grad_acquire(z, u, s, &gf), PL_OK);
    const int q = grp ? pl_comm_rank(grp) : 0;
    for (size_t i = 0; i < (size_t)vmul * blk; i++)
      gf[i] = (float)(q + 1) * val(u, i);
    ck_assert_int_eq(pl_zero3_grad_reduce(z, u, s, false), PL_OK);
    size_t off;
    pl_zero3_shard(z, u, NULL, &gs, &sh, &off);
    const float tri = (float)(G * (G + 1) / 2);
    for (size_t i = 0; i < sh; i++)
      ck_assert_float_eq(gs[i], tri * val(u, off + i));
    ck_assert_int_eq(pl_zero3_grad_acquire(z, u, s, &gf), PL_OK);
    for (size_t i = 0; i < (size_t)vmul * blk; i++)
      ck_assert_float_eq(gf[i], 0.f);
    for (size_t i = 0; i < (size_t)vmul * blk; i++)
      gf[i] = (float)(q + 1) * val(u, i);
    ck_assert_int_eq(pl_zero3_grad_reduce(z, u, s, true), PL_OK);
    ck_assert_int_eq(pl_zero3_sync(z, s), PL_OK);
    for (size_t i = 0; i < sh; i++)
      ck_assert_float_eq(gs[i], 2 * tri * val(u, off + i));
  }
  pl_zero3_destroy(z);
}

START_TEST(gather_and_reduce) {
  check_gather(PL_F32, 1, world);
  check_gather(PL_BF16, 1, world);
  check_gather(PL_F32, 3, world); /* a proxy: 3x virtual ranks */
  check_gather(PL_F32, 1, NULL);
  /* a sub-group: the ranks of the same parity (a head's replica ranks) */
  pl_comm *sub;
  ck_assert_int_eq(pl_comm_split(world, rank % 2, rank, &sub), PL_OK);
  check_gather(PL_BF16, 2, sub);
  pl_comm_destroy(sub);
}
END_TEST

START_TEST(two_units_bound) {
  pl_stream *s = pl_dev_stream(dev);
  const int n = 5;
  const size_t numel[5] = {400, 120, 120, 90, 400};
  pl_zero3_unit_cfg uc[5];
  for (int u = 0; u < n; u++)
    uc[u] = (pl_zero3_unit_cfg){"u", numel[u], world, 2 * size};
  pl_zero3 *z;
  ck_assert_int_eq(pl_zero3_create(dev, PL_BF16, n, uc, &z), PL_OK);
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  void *full;
  /* forward: use u, prefetch u+1, release u */
  for (int u = 0; u < n; u++) {
    ck_assert_int_eq(pl_zero3_acquire(z, u, s, &full), PL_OK);
    if (u + 1 < n)
      ck_assert_int_eq(pl_zero3_prefetch(z, u + 1, s), PL_OK);
    if (u + 1 < n) {
      /* a third resident unit is refused */
      const int other = u + 2 < n ? u + 2 : -1;
      if (other >= 0) {
        ck_assert_int_eq(pl_zero3_prefetch(z, other, s), PL_EINVAL);
        ck_assert_ptr_nonnull(strstr(pl_last_error(), "at most 2"));
      }
    }
    if (u < n - 1)
      pl_zero3_release(z, u, s);
  }
  /* backward: the last unit is still resident; gradients reduced as we go */
  for (int u = n - 1; u >= 0; u--) {
    ck_assert_int_eq(pl_zero3_acquire(z, u, s, &full), PL_OK);
    if (u > 0)
      ck_assert_int_eq(pl_zero3_prefetch(z, u - 1, s), PL_OK);
    float *gf;
    ck_assert_int_eq(pl_zero3_grad_acquire(z, u, s, &gf), PL_OK);
    pl_zero3_release(z, u, s);
    ck_assert_int_eq(pl_zero3_grad_reduce(z, u, s, u % 2 == 1), PL_OK);
  }
  ck_assert_int_eq(pl_zero3_sync(z, s), PL_OK);
  const size_t two = 2 * pl_zero3_max_unit_bytes(z);
  const size_t zg = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "zero3");
  const size_t zgg = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "zero3_grads");
  size_t sh;
  pl_zero3_shard(z, 0, NULL, NULL, &sh, NULL);
  ck_assert_msg(zg <= two && zg > two / 2, "zero3 peak %zu vs two units %zu",
                zg, two);
  ck_assert_msg(zgg <= pl_zero3_max_grad_bytes(z) + sh * 4,
                "zero3_grads peak %zu vs %zu", zgg,
                pl_zero3_max_grad_bytes(z) + sh * 4);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "zero3"), 0);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "zero3_grads"), 0);
  pl_zero3_destroy(z);
}
END_TEST

static void check_fsdp2_knobs(pl_dtype dt, bool host, int vmul) {
  pl_stream *s = pl_dev_stream(dev);
  const pl_zero3_opts o = {
      .fp32_master = true, .host_state = host, .max_resident = 0};
  const size_t numel[3] = {1, 37, 1000};
  pl_zero3_unit_cfg uc[3];
  for (int u = 0; u < 3; u++)
    uc[u] = (pl_zero3_unit_cfg){"u", numel[u], world, vmul * size};
  pl_zero3 *z;
  ck_assert_int_eq(pl_zero3_create_opts(dev, dt, &o, 3, uc, &z), PL_OK);
  const pl_arena state = host ? PL_ARENA_HOST : PL_ARENA_DEVICE;
  ck_assert_uint_gt(pl_mem_tag_current(dev, state, "weights"), 0);
  ck_assert_uint_gt(pl_mem_tag_current(dev, state, "optim"), 0);
  void *full[3];
  for (int u = 0; u < 3; u++) {
    fill_shards(z, u, numel[u], PL_F32); /* the fp32 master */
    float *m, *v;
    size_t sh;
    pl_zero3_moments(z, u, &m, &v);
    pl_zero3_shard(z, u, NULL, NULL, &sh, NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < sh; i++)
      ck_assert(m[i] == 0.f && v[i] == 0.f);
    ck_assert_int_eq(pl_zero3_acquire(z, u, s, &full[u]), PL_OK);
  }
  ck_assert_int_eq(pl_zero3_sync(z, s), PL_OK);
  for (int u = 0; u < 3; u++) { /* all three resident: no bound */
    ck_assert(pl_zero3_resident(z, u));
    ck_assert_uint_eq(pl_zero3_full_numel(z, u), numel[u]);
    size_t sh;
    pl_zero3_shard(z, u, NULL, NULL, &sh, NULL);
    const size_t blk = (size_t)size * sh; /* the present ranks' block */
    for (size_t i = 0; i < numel[u]; i++) {
      float want = i % blk < numel[u] ? val(u, i % blk) : 0.f;
      if (dt == PL_BF16)
        want = pl_bf16_to_f32(pl_f32_to_bf16(want));
      const float got = dt == PL_F32 ? ((float *)full[u])[i]
                                     : pl_bf16_to_f32(((pl_bf16 *)full[u])[i]);
      ck_assert_msg(got == want, "unit %d elem %zu: %g != %g (vmul=%d)", u, i,
                    got, want, vmul);
    }
  }
  for (int u = 0; u < 3; u++) {
    pl_zero3_release(z, u, s);
    float *gf, *gs;
    size_t sh, off;
    pl_zero3_shard(z, u, NULL, &gs, &sh, &off);
    const size_t n = (size_t)vmul * size * sh;
    for (int acc = 0; acc < 2; acc++) {
      ck_assert_int_eq(pl_zero3_grad_acquire(z, u, s, &gf), PL_OK);
      for (size_t i = 0; i < n; i++)
        gf[i] = (float)(rank + 1) * val(u, i);
      ck_assert_int_eq(pl_zero3_grad_reduce(z, u, s, acc), PL_OK);
      ck_assert_int_eq(pl_zero3_sync(z, s), PL_OK);
      ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
      const float tri = (float)(size * (size + 1) / 2);
      for (size_t i = 0; i < sh; i++)
        ck_assert_float_eq(gs[i], (acc + 1) * tri * val(u, off + i));
    }
  }
  const char *tags[] = {"zero3", "fsdp_ag", "zero3_grads"};
  for (int i = 0; i < 3; i++)
    ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, tags[i]), 0);
  pl_zero3_destroy(z);
}

START_TEST(fsdp2_knobs) {
  check_fsdp2_knobs(PL_BF16, false, 1);
  check_fsdp2_knobs(PL_F32, false, 2);
  check_fsdp2_knobs(PL_BF16, true, 1);
  check_fsdp2_knobs(PL_BF16, true, 3);
  const pl_zero3_opts bad = {.fp32_master = false, .host_state = true};
  const pl_zero3_unit_cfg uc = {"u", 8, world, 0};
  pl_zero3 *z;
  ck_assert_int_eq(pl_zero3_create_opts(dev, PL_BF16, &bad, 1, &uc, &z),
                   PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "host_state"));
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "zero3", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {gather_and_reduce, two_units_bound, fsdp2_knobs,
                          NULL};
  return pl_check_world_close(dev, world,
                              pl_check_run("zero3", 120, tests, rank, world));
}
