/* test_mpi_layout.c — the MoP rank layout (train/layout.h) under mpirun
 * -np 1..4: for every D and P dividing W the groups hold exactly the ranks
 * the layout says (D-groups and P-groups of consecutive ranks, the head
 * replica ranks ≡ r mod P, EP and ZeRO-3 over all ranks, self alone), the
 * token and vocabulary slices tile S and V; bad layouts are refused with a
 * message naming the values; virtual D- and P-groups beyond the ranks
 * present (each rank member 0 of its own group, a virtual communicator of
 * the group's size); the one-GPU proxy's arithmetic (120b on one process
 * playing one rank of 16; 667b at 1M with D = P = 8 of 64). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "train/layout.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

/* the world ranks of group c, in group order */
static int members(pl_comm *c, int64_t *out) {
  int64_t me = rank;
  ck_assert_int_eq(pl_host_allgather_i64(c, &me, 1, out), PL_OK);
  return pl_comm_size(c);
}

START_TEST(groups) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.n_q = 24, m.n_kv = 12; /* divisible by every D of W <= 4 */
  m.E = 12;                /* divisible by W = 1..4 */
  for (int D = 1; D <= size; D++)
    for (int P = 1; P <= size; P++) {
      if (size % D || size % P)
        continue;
      pl_layout_cfg c = {.D = D, .P = P, .W_v = 0};
      const int64_t S = 12 * D;
      pl_layout *l;
      ck_assert_int_eq(pl_layout_create(world, &m, &c, S, &l), PL_OK);
      const pl_layout_plan *p = &l->plan;
      ck_assert_int_eq(p->N, 12);
      ck_assert_int_eq(p->n_groups, size / D);
      ck_assert_int_eq(p->E_local, 12 / size);
      ck_assert_int_eq(p->E_route, 12);
      int64_t mem[8];
      if (D > 1) {
        ck_assert_int_eq(members(l->sp, mem), D);
        for (int j = 0; j < D; j++)
          ck_assert_int_eq(mem[j], (rank / D) * D + j);
        ck_assert_int_eq(pl_comm_rank(l->sp), p->d_rank);
      } else {
        ck_assert_ptr_null(l->sp);
      }
      ck_assert_int_eq(members(l->vp, mem), P);
      for (int j = 0; j < P; j++)
        ck_assert_int_eq(mem[j], (rank / P) * P + j);
      ck_assert_int_eq(pl_comm_rank(l->vp), p->p_rank);
      ck_assert_int_eq(members(l->hrep, mem), size / P);
      for (int j = 0; j < size / P; j++)
        ck_assert_int_eq(mem[j], rank % P + j * P);
      ck_assert_int_eq(members(l->ep, mem), size);
      ck_assert_int_eq(members(l->zero, mem), size);
      for (int j = 0; j < size; j++)
        ck_assert_int_eq(mem[j], j);
      ck_assert_int_eq(members(l->self, mem), 1);
      /* vocabulary shards of a P-group tile [0, V) */
      int64_t cols[2] = {p->v_col0, p->v_cols}, all[16];
      ck_assert_int_eq(pl_host_allgather_i64(l->vp, cols, 2, all), PL_OK);
      int64_t next = 0;
      for (int j = 0; j < P; j++) {
        ck_assert_int_eq(all[2 * j], next);
        next += all[2 * j + 1];
      }
      ck_assert_int_eq(next, m.V);
      pl_layout_destroy(l);
    }
}
END_TEST

static void refused(const pl_model_cfg *m, pl_layout_cfg c, int W, int64_t S,
                    const char *msg) {
  pl_layout_plan p;
  ck_assert_int_eq(pl_layout_plan_make(m, &c, W, 0, S, &p), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), msg), "message '%s' lacks '%s'",
                pl_last_error(), msg);
}

START_TEST(refusals) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK); /* n_q 4, n_kv 2, E 8 */
  refused(&m, (pl_layout_cfg){8, 1, 0, 0, 0}, 8, 64,
          "n_q=4 and n_kv=2 heads over a Ulysses group of D=8");
  refused(&m, (pl_layout_cfg){3, 1, 0, 0, 0}, 4, 60,
          "D=3: a real group must divide the W=4 ranks");
  refused(&m, (pl_layout_cfg){1, 3, 0, 0, 0}, 4, 60,
          "P=3: a real group must divide the W=4 ranks");
  /* a virtual group: W_v a multiple of D·W (P·W) */
  refused(&m, (pl_layout_cfg){4, 1, 4, 0, 0}, 2, 64,
          "W_v=4 to be a multiple of D·W=8");
  refused(&m, (pl_layout_cfg){1, 4, 6, 0, 0}, 2, 64,
          "W_v=6 to be a multiple of P·W=8");
  refused(&m, (pl_layout_cfg){1, 1, 3, 0, 0}, 2, 60,
          "W_v=3: must be a multiple of W=2");
  refused(&m, (pl_layout_cfg){2, 1, 0, 0, 0}, 2, 61, "S=61 over D=2");
  refused(&m, (pl_layout_cfg){1, 1, 16, 0, 0}, 1, 64,
          "E=8 experts over a virtual world of W_v=16");
  m.E = 12;
  refused(&m, (pl_layout_cfg){1, 1, 0, 0, 0}, 8, 64, "E=12 experts over W=8");
  /* fewer than k experts present: the router's slots, 2 per expert */
  m.E = 16, m.k = 4;
  pl_layout_plan q;
  ck_assert_int_eq(
      pl_layout_plan_make(&m, &(pl_layout_cfg){1, 1, 8, 0, 0}, 1, 0, 64, &q),
      PL_OK);
  ck_assert_int_eq(q.E_moe, 2);
  ck_assert_int_eq(q.E_route, 4);
  /* all layers dense: no expert constraint */
  m.E = 12, m.k = 2, m.dense_layers = m.L;
  pl_layout_plan p;
  ck_assert_int_eq(
      pl_layout_plan_make(&m, &(pl_layout_cfg){1, 1, 0, 0, 0}, 8, 3, 64, &p),
      PL_OK);
  ck_assert_int_eq(p.E_local, 0);
}
END_TEST

/* Virtual groups: D and P beyond the ranks present, each rank member 0 of
 * its own group; their communicators are virtual, of size D and P. */
START_TEST(virtual_groups) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.n_q = 8, m.n_kv = 4, m.dense_layers = m.L; /* D up to 4; no experts */
  const int D = 4, P = 2, Wv = 8 * size;
  pl_layout_cfg c = {.D = D, .P = P, .W_v = Wv};
  pl_layout *l;
  /* P = 2 is real where it divides W (np 2, 4) */
  ck_assert_int_eq(pl_layout_create(world, &m, &c, 64, &l), PL_OK);
  const pl_layout_plan *p = &l->plan;
  ck_assert_int_eq(p->d_virtual, size % D != 0);
  ck_assert_int_eq(p->p_virtual, size % P != 0);
  ck_assert_int_eq(p->N, 16);
  if (p->d_virtual) {
    ck_assert_int_eq(p->d_rank, 0);
    ck_assert_int_eq(p->d_group, rank);
    ck_assert_int_eq(p->n_groups, size);
    ck_assert(pl_comm_is_virtual(l->sp));
    ck_assert_int_eq(pl_comm_size(l->sp), D);
    ck_assert_int_eq(pl_comm_rank(l->sp), 0);
  }
  if (p->p_virtual) {
    ck_assert_int_eq(p->p_rank, 0);
    ck_assert_int_eq(p->v_col0, 0);
    ck_assert(pl_comm_is_virtual(l->vp));
    ck_assert_int_eq(pl_comm_size(l->vp), P);
    ck_assert_int_eq(pl_comm_size(l->hrep), size); /* all hold shard 0 */
  } else {
    ck_assert(!pl_comm_is_virtual(l->vp));
  }
  ck_assert_int_eq(p->head_vsize, Wv / P);
  ck_assert(!pl_comm_is_virtual(l->zero) && !pl_comm_is_virtual(l->ep));
  pl_layout_destroy(l);
  /* the 667B proxy of a 64-rank run at 1M: D 8, P 8 on one process */
  ck_assert_int_eq(pl_model_preset("667b", &m), PL_OK);
  pl_layout_plan q;
  ck_assert_int_eq(pl_layout_plan_make(&m, &(pl_layout_cfg){8, 8, 64, 0, 0}, 1,
                                       0, 1 << 20, &q),
                   PL_OK);
  ck_assert(q.d_virtual && q.p_virtual);
  ck_assert_int_eq(q.N, 131072);
  ck_assert_int_eq(q.E_local, 6);
  ck_assert_int_eq(q.E_moe, 6);    /* 6 present experts, k = 8: */
  ck_assert_int_eq(q.E_route, 12); /* 12 router slots             */
  ck_assert_int_eq(q.head_vsize, 8);
  ck_assert_int_eq(q.v_cols, 25000);
}
END_TEST

START_TEST(proxy_120b) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("120b", &m), PL_OK);
  pl_layout_plan p;
  ck_assert_int_eq(pl_layout_plan_make(&m, &(pl_layout_cfg){1, 1, 16, 0, 0}, 1,
                                       0, 131072, &p),
                   PL_OK);
  ck_assert_int_eq(p.E_local, 24);
  ck_assert_int_eq(p.E_route, 24);
  ck_assert_int_eq(p.zero_vsize, 16);
  ck_assert_int_eq(p.head_vsize, 16);
  ck_assert_int_eq(p.N, 131072);
  ck_assert_int_eq(p.v_cols, 200000);
  /* two processes of a 16-rank run: the router sees both ranks' experts */
  ck_assert_int_eq(pl_layout_plan_make(&m, &(pl_layout_cfg){2, 2, 16, 0, 0}, 2,
                                       1, 131072, &p),
                   PL_OK);
  ck_assert_int_eq(p.E_route, 48);
  ck_assert_int_eq(p.E_local, 24);
  ck_assert_int_eq(p.head_vsize, 8);
  ck_assert_int_eq(p.N, 65536);
  ck_assert_int_eq(p.v_col0, 100000);
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "layout", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {groups, refusals, virtual_groups, proxy_120b, NULL};
  return pl_check_world_close(dev, world,
                              pl_check_run("layout", 120, tests, rank, world));
}
