/* test_plan_room.c — the room a candidate's least form leaves
 * (plan/room.c), against the forms' own measured peaks: the least peak of
 * any keep prefix and resident amount (pl__plan_room_need), the bound
 * within it, and the floor a form takes from its siblings of a smaller
 * chunk cap or bucket (pl__plan_room_floor).  The FSDP2 search's floor
 * (lighter activation checkpointing or offloaded state) holds on the
 * baseline's dry measurement: baselines/fsdp2/test_fsdp2_planner.c. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "ops/stream_adamw.h"
#include "plan/plan.h"
#include "plan/plan_internal.h"
#include "train/step.h"

static pl_model_cfg preset(const char *n) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset(n, &m), PL_OK);
  return m;
}

/* The room a candidate's least form leaves (room.c, the search's pruning):
 * every form of the candidate — SCO counts, keep prefixes (attention, then
 * whole halves), resident buckets from none to all — peaks at least at
 * pl__plan_room_need, and the bound within that room (pl__plan_room_bound)
 * holds over the forms that fit the device; at 120b/16/128K (7 layers, the
 * fill partial), 241b/32/256K with D = 2, and 667b/64/1M (39 layers: bins
 * of two layers).  It is tighter than the bound without memory. */
START_TEST(room_need_holds) {
  const struct {
    const char *model;
    int W, D, Ep;
    int64_t S;
  } pts[] = {{"120b", 16, 1, 8, 128 << 10},
             {"241b", 32, 2, 8, 256 << 10},
             {"667b", 64, 32, 8, 1 << 20}};
  const pl_plan_machine mc = pl_plan_machine_default();
  const pl_plan_free fr = {.sco = true, .resident = true, .keep = true};
  pl_plan_mem *mem = malloc(2 * sizeof *mem), *y = mem + 1;
  ck_assert_ptr_nonnull(mem);
  for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++) {
    const pl_model_cfg m = preset(pts[k].model);
    pl_plan_cfg c = pl_plan_cfg_plateau(pts[k].W, pts[k].S);
    c.lc.D = pts[k].D, c.lc.Ep = pts[k].Ep;
    const size_t beta = c.sc.oo.bucket = 25000000;
    pl_plan_cfg least = c;
    least.sc.sco = (pl_sco_budget){true, 0};
    ck_assert_int_eq(pl__plan_memory(&m, &least, &mc, -1, true, y), PL_OK);
    pl__room room, room_w;
    pl__plan_room_of(&m, &fr, &c, y, true, &room);
    room_w = room; /* the same under adversarial routes */
    room_w.peak = (double)y->dev_worst, room_w.high = y->layer_high_worst;
    double u = 0, u0 = 0;
    ck_assert_int_eq(pl__plan_room_bound(&m, &fr, &mc, &c, y, true, &u), PL_OK);
    ck_assert_int_eq(pl__plan_time_bound(&m, &c, &mc, &u0), PL_OK);
    ck_assert_msg(u > 0 && u < u0, "%s: room bound %g, plain %g", pts[k].model,
                  u, u0);
    const int64_t N = y->N;
    const size_t th = (size_t)y->params_rank, nb = (th + beta - 1) / beta;
    const double nhb = (double)N * m.H * 2;
    int fit = 0, tight = 0, tight_w = 0;
    for (int s = 0; s <= 2; s++)
      for (int t = 0; t <= 2 * m.L; t += m.L > 8 ? 3 : 1)
        for (int q = 0; q <= 4; q++) {
          pl_plan_cfg x = c;
          x.sc.sco =
              s == 2 ? (pl_sco_budget){true, 0}
                     : (pl_sco_budget){false, (uint64_t)(s * m.L / 2 * nhb)};
          const int na = t < m.L ? t : m.L, nw = t > m.L ? t - m.L : 0;
          x.sc.keep = (pl_keep_budget){
              PL_KEEP_BYTES,
              pl_step_keep_bytes(&m, N, c.lc.D, c.sc.dt, na, nw)};
          const size_t n = nb * (size_t)q / 4, /* whole resident buckets */
              el = n == 0    ? 0
                   : n >= nb ? th
                             : th - beta * (nb - n);
          x.sc.oo.resident_bytes = 12 * (uint64_t)el;
          ck_assert_int_eq(pl__plan_memory(&m, &x, &mc, -1, true, mem), PL_OK);
          /* the resident bytes less the staging they save exactly (the
           * fill's reading; the room's own takes off the most) */
          const size_t str = th - el, nbs = nb - n;
          const double st0 = 12.0 * (double)(nb < 2 ? nb : 2) *
                             (double)(beta < th ? beta : th),
                       stn = 12.0 * (double)(nbs < 2 ? nbs : 2) *
                             (double)(beta < str ? beta : str),
                       r = 12.0 * el - (st0 - stn) + room.stage;
          const double need = pl__plan_room_need(&room, na, nw, r),
                       need_w = pl__plan_room_need(&room_w, na, nw, r);
          ck_assert_msg((double)mem->dev_peak >= need,
                        "%s: sco %d keep %d+%d resident %zu/%zu buckets "
                        "peaks at %zu, below the room's least %.0f",
                        pts[k].model, s, na, nw, n, nb, mem->dev_peak, need);
          ck_assert_msg((double)mem->dev_worst >= need_w,
                        "%s: sco %d keep %d+%d resident %zu/%zu buckets: "
                        "adversarial peak %zu, below the room's least %.0f",
                        pts[k].model, s, na, nw, n, nb, mem->dev_worst, need_w);
          tight_w += (double)mem->dev_worst < need_w * 1.01;
          if (s == 2) { /* the least form's SCO count: the fill's most */
            const double add = (double)x.sc.keep.bytes + 12.0 * el;
            ck_assert_msg((double)mem->dev_peak <= (double)y->dev_peak + add &&
                              (double)mem->dev_worst <=
                                  (double)y->dev_worst + add,
                          "%s: keep %d+%d resident %zu/%zu buckets peaks at "
                          "%zu (adversarial %zu), above the least form's "
                          "%zu (%zu) + %.0f kept and resident",
                          pts[k].model, na, nw, n, nb, mem->dev_peak,
                          mem->dev_worst, y->dev_peak, y->dev_worst, add);
          }
          tight += (double)mem->dev_peak < need * 1.01;
          if ((double)mem->dev_peak > pl__hbm_usable(&mc))
            continue;
          fit++;
          pl_plan_time tm;
          ck_assert_int_eq(pl_plan_time_predict(&m, &x, &mc, &tm), PL_OK);
          ck_assert_msg(tm.tok_s_gpu <= u,
                        "%s: sco %d keep %d+%d resident %zu/%zu fits at %.0f "
                        "tok/s/GPU above the room bound %.0f",
                        pts[k].model, s, na, nw, n, nb, tm.tok_s_gpu, u);
        }
    ck_assert_msg(fit > 0 && tight > 0 && tight_w > 0,
                  "%s: %d forms fit, %d within 1%% (adversarial: %d)",
                  pts[k].model, fit, tight, tight_w);
  }
  free(mem);
}
END_TEST

/* The floor a candidate's least form takes from its siblings
 * (pl__plan_room_floor): a smaller chunk cap c or bucket β, or the other
 * optimizer, never raises the device peak nor any layer_high.  Checked over
 * every cap, bucket, optimizer and P the search tries, at 120b/16 at 128K
 * (D = 1) and 1M (D = 8) and 241b/32/256K (D = 2), Ep both ways (each form
 * measured: the grid stays small for the sanitizer build); the
 * floor the search reads (measured sibling or not) is at most the form's own;
 * and the fill settled by the room (least given) equals the fill without it. */
static bool mem_below(const pl_plan_mem *a, const pl_plan_mem *b) {
  if (a->dev_peak > b->dev_peak)
    return false;
  for (int i = 0; i <= PL_PLAN_BINS; i++)
    if (a->layer_high[i] > b->layer_high[i])
      return false;
  return true;
}

/* The fill of c (keep free; resident too where resident) settles the same
 * with the room of its least form mem as without. */
static void fills_agree(const pl_model_cfg *m, const pl_plan_machine *mc,
                        const pl_plan_cfg *c, const pl_plan_mem *mem,
                        bool resident) {
  pl_plan_cfg f1 = *c, f2 = *c;
  ck_assert_int_eq(
      pl__plan_fill_memo(NULL, m, mc, resident, true, NULL, &f1, NULL, 0),
      PL_OK);
  ck_assert_int_eq(
      pl__plan_fill_memo(NULL, m, mc, resident, true, mem, &f2, NULL, 0),
      PL_OK);
  ck_assert(!memcmp(&f1, &f2, sizeof f1));
}

START_TEST(room_floor_holds) {
  const struct {
    const char *model;
    int W;
    int64_t S;
    int D; /* 0: every D the search tries */
  } pts[] = {{"120b", 16, 128 << 10, 1},
             {"120b", 16, 1 << 20, 8},
             {"241b", 32, 256 << 10, 2}};
  const pl_plan_machine mc = pl_plan_machine_default();
  const pl_plan_free fr = {.sco = true,
                           .resident = true,
                           .keep = true,
                           .c = true,
                           .beta = true,
                           .optim = true};
  pl_plan_mem *mem = malloc(3 * sizeof *mem), *sib = mem + 1, *lb = mem + 2;
  ck_assert_ptr_nonnull(mem);
  const pl_optim_ops *opts[2] = {&pl_optim_stream, &pl_optim_hybrid};
  int checked = 0, floors = 0, fills = 0;
  for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++) {
    const pl_model_cfg m = preset(pts[k].model);
    for (int D = 1; D <= pts[k].W; D *= 2) {
      if (pts[k].D && D != pts[k].D)
        continue;
      for (int P = 1; P <= 4; P *= 4)
        for (int e = 0; e < 2; e++)
          for (int o = 0; o < 2; o++) {
            pl_plan_cfg c = pl_plan_cfg_plateau(pts[k].W, pts[k].S);
            c.lc.D = D, c.lc.P = P, c.lc.Ep = e ? pts[k].W : 8;
            c.sc.keep = (pl_keep_budget){PL_KEEP_BYTES, 0};
            c.sc.oo.resident_all = false, c.sc.oo.resident_bytes = 0;
            c.sc.head = P > 1 ? &pl_head_ring : &pl_head_fused;
            c.sc.optim = opts[o];
            c.sc.sco = (pl_sco_budget){true, 0};
            int64_t cs[PL__PLAN_CAPS];
            const int nc = pl__plan_chunk_caps(pts[k].S / D, cs);
            pl__plan_memo *mm = pl__plan_memo_new();
            ck_assert_ptr_nonnull(mm);
            for (int i = 0; i < nc; i++)
              for (int j = 0; j < 2; j++) {
                pl_plan_cfg x = c;
                x.sc.moe_c = cs[i], x.sc.oo.bucket = pl__plan_buckets[j];
                if (pl__plan_memory(&m, &x, &mc, -1, false, mem) != PL_OK) {
                  pl_clear_error();
                  continue;
                }
                /* every sibling of a smaller cap or bucket lies below */
                for (int i2 = i; i2 < nc; i2++)
                  for (int j2 = j; j2 < 2; j2++) {
                    pl_plan_cfg y = x;
                    y.sc.moe_c = cs[i2], y.sc.oo.bucket = pl__plan_buckets[j2];
                    if ((i2 == i && j2 == j) ||
                        pl__plan_memory(&m, &y, &mc, -1, false, sib) != PL_OK) {
                      pl_clear_error();
                      continue;
                    }
                    ck_assert_msg(mem_below(sib, mem),
                                  "%s D %d P %d Ep %d %s: c %lld beta %zu "
                                  "peaks %zu, above c %lld beta %zu's %zu",
                                  pts[k].model, D, P, c.lc.Ep, opts[o]->name,
                                  (long long)cs[i2], pl__plan_buckets[j2],
                                  sib->dev_peak, (long long)cs[i],
                                  pl__plan_buckets[j], mem->dev_peak);
                    checked++;
                  }
                /* the other optimizer's form lies below too */
                pl_plan_cfg z = x;
                z.sc.optim = opts[1 - o];
                ck_assert_int_eq(pl__plan_memory(&m, &z, &mc, -1, false, sib),
                                 PL_OK);
                ck_assert_msg(mem_below(sib, mem),
                              "%s D %d P %d: %s's form peaks %zu, above %s's "
                              "%zu",
                              pts[k].model, D, P, opts[1 - o]->name,
                              sib->dev_peak, opts[o]->name, mem->dev_peak);
                /* the search's floor: from the memo, else measured */
                bool have = false;
                ck_assert_int_eq(
                    pl__plan_room_floor(mm, &m, &mc, &fr, &x, true, &have, lb),
                    PL_OK);
                if (have) {
                  floors++;
                  ck_assert(mem_below(lb, mem));
                }
                ck_assert_int_eq(pl__plan_mem_eval(mm, &m, &x, &mc, false, sib),
                                 PL_OK);
                /* the fill with the room settles what it did without */
                if ((i + j) % 5 || (double)mem->dev_peak > pl__hbm_usable(&mc))
                  continue;
                fills_agree(&m, &mc, &x, mem, true);
                /* and with a fixed amount resident, the keep alone filled;
                 * a form holding resident state takes no floor */
                pl_plan_cfg g1 = x;
                g1.sc.oo.resident_bytes = (uint64_t)8 << 30;
                ck_assert_int_eq(pl__plan_memory(&m, &g1, &mc, -1, false, sib),
                                 PL_OK);
                fills_agree(&m, &mc, &g1, sib, false);
                ck_assert_int_eq(
                    pl__plan_room_floor(mm, &m, &mc, &fr, &g1, true, &have, lb),
                    PL_OK);
                ck_assert(!have);
                fills++;
              }
            pl__plan_memo_free(mm);
          }
    }
  }
  ck_assert_msg(checked > 500 && floors > 100 && fills > 10,
                "%d sibling pairs, %d floors, %d fills", checked, floors,
                fills);
  free(mem);
}
END_TEST

/* The SCO counts' room (pl__plan_room_sco): every count of boundaries
 * offloaded peaks between the least and the most the form with all of them
 * offloaded gives, at 120b/16 and 241b/32 at 128K and 1M over D, P and Ep,
 * and 667b/64/1M at D = 32; the least within 3% at some count of each. */
START_TEST(room_sco_holds) {
  const struct {
    const char *model;
    int W, D;
    int64_t S;
  } pts[] = {{"120b", 16, 1, 128 << 10},
             {"120b", 16, 8, 1 << 20},
             {"241b", 32, 2, 128 << 10},
             {"241b", 32, 16, 1 << 20},
             {"667b", 64, 32, 1 << 20}};
  const pl_plan_machine mc = pl_plan_machine_default();
  const pl_plan_free fr = {.sco = true, .resident = true, .keep = true};
  pl_plan_mem *y = malloc(2 * sizeof *y), *mem = y + 1;
  ck_assert_ptr_nonnull(y);
  for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++)
    for (int P = 1; P <= 4; P *= 4)
      for (int e = 0; e < 2; e++) {
        const pl_model_cfg m = preset(pts[k].model);
        pl_plan_cfg c = pl_plan_cfg_plateau(pts[k].W, pts[k].S);
        c.lc.D = pts[k].D, c.lc.P = P, c.lc.Ep = e ? pts[k].W : 8;
        c.sc.head = P > 1 ? &pl_head_ring : &pl_head_fused;
        c.sc.keep = (pl_keep_budget){PL_KEEP_BYTES, 0};
        c.sc.oo.resident_all = false, c.sc.oo.resident_bytes = 0;
        pl_plan_cfg least = c;
        least.sc.sco = (pl_sco_budget){true, 0};
        if (pl__plan_memory(&m, &least, &mc, -1, false, y) != PL_OK) {
          pl_clear_error();
          continue;
        }
        pl__room room;
        pl__plan_room_of(&m, &fr, &least, y, false, &room);
        const double nhb = (double)y->N * m.H * 2;
        int tight = 0;
        for (int u = 0; u<m.L; u += m.L> 8 ? 3 : 1) {
          pl_plan_cfg x = c;
          x.sc.sco = (pl_sco_budget){false, (uint64_t)(u * nhb)};
          ck_assert_int_eq(pl__plan_memory(&m, &x, &mc, -1, false, mem), PL_OK);
          double most = 0;
          const double need = pl__plan_room_sco(&room, nhb, u, &most);
          ck_assert_msg((double)mem->dev_peak >= need &&
                            (double)mem->dev_peak <= most,
                        "%s D %d P %d Ep %d: %d of %d boundaries offloaded "
                        "peaks at %zu, outside [%.0f, %.0f]",
                        pts[k].model, pts[k].D, P, c.lc.Ep, u, m.L,
                        mem->dev_peak, need, most);
          tight += (double)mem->dev_peak < need * 1.03;
        }
        ck_assert_msg(tight > 0, "%s D %d: the least never within 3%%",
                      pts[k].model, pts[k].D);
      }
  free(y);
}
END_TEST

int main(void) {
  const TTest *tests[] = {room_need_holds, room_floor_holds, room_sco_holds,
                          NULL};
  return pl_check_suite("plan_room", 300, tests, NULL, NULL, CK_FORK_GETENV, 0)
             ? 1
             : 0;
}
