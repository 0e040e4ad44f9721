/* test_model.c — the model's presets, parameter counts and FLOP formula
 * (model/model.h):
 *  - the paper's presets, every layer MoE, untied embeddings: exact totals
 *    (122,499,736,576 / 242,132,265,984 / 669,391,299,584) and their
 *    composition by hand (embedding, head, attention, router, experts,
 *    shared expert, norms); active parameters per token;
 *  - gpt-oss-20b (our reading): 20.91 B total, 3.61 B active;
 *  - dense_layers and overrides change the counts as the formula says;
 *  - validation names the bad value;
 *  - the FLOP formula at the paper's 1M points (S = 2^20): its value, and the
 *    TFLOP/s it gives at the paper's tok/s/GPU beside the paper's TFLOP/s
 *    (printed; the ratio is bounded, not forced to 1). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/check_run.h"
#include "model/model.h"

static pl_model_cfg preset(const char *n) {
  pl_model_cfg c;
  ck_assert_int_eq(pl_model_preset(n, &c), PL_OK);
  ck_assert_int_eq(pl_model_cfg_check(&c), PL_OK);
  return c;
}

START_TEST(paper_counts) {
  const char *names[3] = {"120b", "241b", "667b"};
  const int L[3] = {7, 14, 39};
  const int64_t total[3] = {122499736576LL, 242132265984LL, 669391299584LL};
  for (int i = 0; i < 3; i++) {
    pl_model_cfg c = preset(names[i]);
    ck_assert_int_eq(c.L, L[i]);
    pl_model_params p = pl_model_count(&c);
    const int64_t H = 7168, V = 200000;
    const int64_t attn = H * (64 + 16) * 128 + 64 * 128 * H;
    const int64_t layer =
        attn + 2 * H + H * 384 + 384 * 3 * H * 2048 + 3 * H * 2048;
    ck_assert_int_eq(p.attn, attn);
    ck_assert_int_eq(p.layer_moe, layer);
    ck_assert_int_eq(p.total, 2 * V * H + H + L[i] * layer);
    ck_assert_int_eq(p.total, total[i]);
    const int64_t active =
        V * H + L[i] * (attn + H * 384 + 8 * 3 * H * 2048 + 3 * H * 2048);
    ck_assert_int_eq(p.active, active);
    ck_assert_int_eq(p.experts_total, (int64_t)L[i] * 384 * 3 * H * 2048);
    printf("%s: %.2f B total, %.2f B active per token\n", names[i],
           p.total / 1e9, p.active / 1e9);
  }
}
END_TEST

START_TEST(gpt_oss_and_overrides) {
  pl_model_cfg c = preset("gpt-oss-20b");
  pl_model_params p = pl_model_count(&c);
  ck_assert_msg(fabs(p.total / 1e9 - 20.91) < 0.01, "gpt-oss-20b total %.4f B",
                p.total / 1e9);
  ck_assert_msg(fabs(p.active / 1e9 - 3.61) < 0.01, "gpt-oss-20b active %.4f B",
                p.active / 1e9);
  /* the first layer dense: one MoE layer's parameters replaced by a dense one
   */
  pl_model_cfg d = preset("120b");
  pl_model_params p0 = pl_model_count(&d);
  d.dense_layers = 1;
  ck_assert_int_eq(pl_model_cfg_check(&d), PL_OK);
  pl_model_params p1 = pl_model_count(&d);
  ck_assert_int_eq(p1.layer_dense, p1.attn + 2 * d.H + 3 * d.H * 18432);
  ck_assert_int_eq(p1.total, p0.total - p0.layer_moe + p1.layer_dense);
  ck_assert_int_eq(p1.active, p0.active -
                                  (p0.router + 8 * p0.expert + p0.shared) +
                                  p1.dense_ffn);
  /* an override: more layers */
  d.L = 9;
  ck_assert_int_eq(pl_model_count(&d).total, p1.total + 2 * p0.layer_moe);
  pl_model_cfg t = preset("tiny");
  ck_assert_int_eq(t.dense_layers, 1);
  ck_assert(pl_model_layer_is_moe(&t, 1) && !pl_model_layer_is_moe(&t, 0));
}
END_TEST

START_TEST(validation) {
  pl_model_cfg c;
  ck_assert_int_eq(pl_model_preset("130b", &c), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "120b"));
  c = preset("tiny");
  c.n_kv = 3;
  ck_assert_int_eq(pl_model_cfg_check(&c), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "n_kv=3"));
  c = preset("tiny");
  c.k = 9;
  ck_assert_int_eq(pl_model_cfg_check(&c), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "k=9"));
  c = preset("tiny");
  c.dense_layers = 4;
  ck_assert_int_eq(pl_model_cfg_check(&c), PL_EINVAL);
  c.dense_layers = 3; /* all dense: no experts needed */
  c.E = 0;
  ck_assert_int_eq(pl_model_cfg_check(&c), PL_OK);
  ck_assert_int_eq(pl_model_count(&c).router, 0);
}
END_TEST

START_TEST(flops_at_paper_points) {
  const struct {
    const char *m;
    double tok_s, tflops;
    int L;
  } pts[3] = {
      {"120b", 642, 221, 7}, {"241b", 314, 213, 14}, {"667b", 124, 233, 39}};
  const int64_t S = 1 << 20;
  for (int i = 0; i < 3; i++) {
    pl_model_cfg c = preset(pts[i].m);
    const double mm = 6.0 * (double)pl_model_count(&c).active;
    const double at = 6.0 * (double)S * 128 * 64 * pts[i].L;
    ck_assert(fabs(pl_model_flops_per_token(&c, S) - (mm + at)) <=
              1e-6 * (mm + at));
    const double ours = pl_model_flops_per_token(&c, S) * pts[i].tok_s / 1e12;
    const double ratio = ours / pts[i].tflops;
    printf("%s at S = 2^20: %.1f GFLOP/token (matmuls %.1f, attention %.1f); "
           "%.0f tok/s/GPU x "
           "%.1f GFLOP = %.1f TFLOP/s against the paper's %.0f: ratio %.3f\n",
           pts[i].m, (mm + at) / 1e9, mm / 1e9, at / 1e9, pts[i].tok_s,
           (mm + at) / 1e9, ours, pts[i].tflops, ratio);
    ck_assert_msg(ratio > 1.10 && ratio < 1.18,
                  "%s: ratio %.3f outside [1.10, 1.18]", pts[i].m, ratio);
  }
}
END_TEST

int main(void) {
  const TTest *tests[] = {paper_counts, gpt_oss_and_overrides, validation,
                          flops_at_paper_points, NULL};
  return pl_check_suite("model", 60, tests, NULL, NULL, CK_FORK_GETENV, 0) ? 1
                                                                           : 0;
}
