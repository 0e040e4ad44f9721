/* test_options.c — strict option parsing (sizes, integers, reals, enums,
 * lists and ranges), option tables, and the SCO host budget option. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "ops/sco.h"
#include "options.h"

START_TEST(sizes_accept) {
  static const struct {
    const char *s;
    uint64_t v;
  } ok[] = {{"0", 0},
            {"4096", 4096},
            {"1K", 1000},
            {"1Ki", 1024},
            {"64Ki", 65536},
            {"1.5Ki", 1536},
            {"2M", 2000000},
            {"3Mi", 3u << 20},
            {"1G", 1000000000ull},
            {"1Gi", 1ull << 30},
            {"2Ti", 2ull << 40},
            {"16GiB", 16ull << 30},
            {"65536", 65536}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    uint64_t v = 12345;
    ck_assert_msg(pl_parse_size("--x", ok[i].s, &v) == PL_OK, "%s: %s", ok[i].s,
                  pl_last_error());
    ck_assert_msg(v == ok[i].v, "%s -> %llu", ok[i].s, (unsigned long long)v);
  }
}
END_TEST

START_TEST(sizes_reject) {
  static const char *bad[] = {
      "",     "-1",  "+5",       " 5",
      "12Q",  "1.3", "1.0001Ki", "0x10",
      "1e3",  "inf", "nan",      "K",
      "5Kib", "5 K", "1Kii",     "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 7;
    pl_status st = pl_parse_size("--tokens", bad[i], &v);
    ck_assert_msg(st == PL_EINVAL, "'%s' accepted as %llu", bad[i],
                  (unsigned long long)v);
    ck_assert_msg(v == 7, "'%s' wrote the output on failure", bad[i]);
    ck_assert_msg(strstr(pl_last_error(), "--tokens") != NULL,
                  "message names the option: %s", pl_last_error());
  }
  pl_parse_size("--tokens", "12Q", &(uint64_t){0});
  ck_assert_msg(strstr(pl_last_error(), "12Q") && strstr(pl_last_error(), "Ki"),
                "message names the value and what is allowed: %s",
                pl_last_error());
}
END_TEST

/* Exact integer arithmetic: no size wraps or rounds.  Sizes are at most
 * INT64_MAX (every consumer stores them in int64_t or size_t); 2^64 - 1,
 * 2^64 (16777216Ti) and beyond are refused naming the allowed range. */
START_TEST(sizes_limits) {
  static const struct {
    const char *s;
    uint64_t v;
  } ok[] = {
      {"9223372036854775807", 9223372036854775807ull},
      {"9007199254740993", 9007199254740993ull}, /* 2^53 + 1: not a double */
      {"8388607Ti", 8388607ull << 40},
      {"0.5Ki", 512},
      {"1.000Ki", 1024},
      {"9223372036.854775807G", 9223372036854775807ull}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    uint64_t v = 12345;
    ck_assert_msg(pl_parse_size("--x", ok[i].s, &v) == PL_OK, "%s: %s", ok[i].s,
                  pl_last_error());
    ck_assert_msg(v == ok[i].v, "%s -> %llu", ok[i].s, (unsigned long long)v);
  }
  static const char *big[] = {"9223372036854775808",
                              "18446744073709551615",
                              "18446744073709551616",
                              "16777216Ti",
                              "8388608Ti",
                              "9223372036.854775808G",
                              "100000000000000000000000000000000000000000"};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    uint64_t v = 7;
    ck_assert_msg(pl_parse_size("--mem-limit", big[i], &v) == PL_EINVAL,
                  "'%s' accepted as %llu", big[i], (unsigned long long)v);
    ck_assert_uint_eq(v, 7);
    ck_assert_msg(
        strstr(pl_last_error(), "--mem-limit") &&
            strstr(pl_last_error(), big[i]) &&
            strstr(pl_last_error(), "9223372036854775807"),
        "message names the option, the value and the allowed range: %s",
        pl_last_error());
  }
  /* ranges: the factor and the step are named when they are wrong */
  uint64_t l[64];
  int n;
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1:1Gi:x1", l, 64, &n),
                   PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "factor") &&
                    strstr(pl_last_error(), "x1") &&
                    strstr(pl_last_error(), "x2..x1024"),
                "%s", pl_last_error());
  ck_assert_int_eq(
      pl_parse_size_list("--sizes", "1:8:x99999999999999999999", l, 64, &n),
      PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "factor"), "%s", pl_last_error());
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1:8:+0", l, 64, &n),
                   PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "step"), "%s", pl_last_error());
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1:8:+16777216Ti", l, 64, &n),
                   PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "step") &&
                    strstr(pl_last_error(), "9223372036854775807"),
                "%s", pl_last_error());
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1:16777216Ti:x2", l, 64, &n),
                   PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "16777216Ti"), "%s", pl_last_error());
  /* the largest range end does not wrap */
  ck_assert_int_eq(
      pl_parse_size_list(
          "--sizes", "4611686018427387904:9223372036854775807:x2", l, 64, &n),
      PL_OK);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(
      pl_parse_size_list(
          "--sizes", "9223372036854775800:9223372036854775807:+4", l, 64, &n),
      PL_OK);
  ck_assert_int_eq(n, 2);
  /* integers: the table's bounds are exact and never overflow */
  int64_t i;
  ck_assert_int_eq(
      pl_parse_i64("--seed", "9223372036854775808", 0, INT64_MAX, &i),
      PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "9223372036854775807"), "%s",
                pl_last_error());
  double d;
  ck_assert_int_eq(pl_parse_f64("--alpha", "1e999", 0, 1e30, &d), PL_EINVAL);
  ck_assert_int_eq(pl_parse_f64("--alpha", "-1e999", -1, 1e30, &d), PL_EINVAL);
}
END_TEST

/* An option table whose bounds are beyond int64 (a size option's hi of 1e30)
 * clamps them: no undefined conversion, every value in range exact. */
static const pl_opt wide[] = {
    {"big", 0, PL_OPT_SIZE, NULL, "a size", 0, 1e30, NULL},
    {"n", 0, PL_OPT_INT, NULL, "an int", -1e30, 1e30, NULL},
    {"list", 0, PL_OPT_SIZE_LIST, NULL, "sizes", 1, 1e30, NULL},
    {"out", 'o', PL_OPT_STR, NULL, "output dir", 0, 0, NULL},
    {"flag", 0, PL_OPT_FLAG, NULL, "a flag", 0, 0, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL}};

START_TEST(table_limits) {
  pl_args *a = NULL;
  bool help;
  char *ok[] = {"--big=9223372036854775807", "--n=-9223372036854775808",
                "--list=1,9223372036854775807"};
  ck_assert_msg(pl_args_parse(wide, 3, ok, 0, &a, &help) == PL_OK, "%s",
                pl_last_error());
  ck_assert_uint_eq(pl_args_size(a, "big"), 9223372036854775807ull);
  ck_assert(pl_args_int(a, "n") == INT64_MIN);
  pl_args_free(a);
  char *bad[][1] = {{"--big=16777216Ti"},
                    {"--big=18446744073709551615"},
                    {"--list=1,16777216Ti"}};
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(pl_args_parse(wide, 1, bad[k], 0, &a, &help), PL_EINVAL);
    ck_assert_msg(strstr(pl_last_error(), "9223372036854775807"), "%s",
                  pl_last_error());
  }
  /* an option-looking word is not taken as the previous option's value */
  char *ol[] = {"--out", "--flag"};
  ck_assert_int_eq(pl_args_parse(wide, 2, ol, 0, &a, &help), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "--out") &&
                    strstr(pl_last_error(), "--flag") &&
                    strstr(pl_last_error(), "--out=--flag"),
                "%s", pl_last_error());
  char *ol2[] = {"-o", "-x"};
  ck_assert_int_eq(pl_args_parse(wide, 2, ol2, 0, &a, &help), PL_EINVAL);
  char *eq[] = {"--out=--flag", "--n",
                "-5"}; /* explicit, and a negative number */
  ck_assert_msg(pl_args_parse(wide, 3, eq, 0, &a, &help) == PL_OK, "%s",
                pl_last_error());
  ck_assert_str_eq(pl_args_str(a, "out"), "--flag");
  ck_assert_int_eq(pl_args_int(a, "n"), -5);
  pl_args_free(a);
}
END_TEST

START_TEST(ints_floats_enums) {
  int64_t i;
  ck_assert_int_eq(pl_parse_i64("--n", "17", 1, 100, &i), PL_OK);
  ck_assert_int_eq(i, 17);
  ck_assert_int_eq(pl_parse_i64("--n", "0", 1, 100, &i), PL_EINVAL);
  ck_assert_int_eq(pl_parse_i64("--n", "101", 1, 100, &i), PL_EINVAL);
  ck_assert_int_eq(pl_parse_i64("--n", "abc", 1, 100, &i), PL_EINVAL);
  ck_assert_int_eq(pl_parse_i64("--n", "5x", 1, 100, &i), PL_EINVAL);
  ck_assert_int_eq(pl_parse_i64("--n", "", 1, 100, &i), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "1..100"));
  double d;
  ck_assert_int_eq(pl_parse_f64("--alpha", "1.1", 0.5, 2, &d), PL_OK);
  ck_assert(fabs(d - 1.1) < 1e-15);
  ck_assert_int_eq(pl_parse_f64("--alpha", "2.5", 0.5, 2, &d), PL_EINVAL);
  ck_assert_int_eq(pl_parse_f64("--alpha", "nan", 0, 2, &d), PL_EINVAL);
  ck_assert_int_eq(pl_parse_f64("--alpha", "1.0.0", 0, 2, &d), PL_EINVAL);
  static const char *const names[] = {"ep", "llep", "pipelined_llep", NULL};
  int e;
  ck_assert_int_eq(pl_parse_enum("--variant", "llep", names, &e), PL_OK);
  ck_assert_int_eq(e, 1);
  ck_assert_int_eq(pl_parse_enum("--variant", "LLEP", names, &e), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "ep | llep | pipelined_llep") != NULL,
                "%s", pl_last_error());
  int el[8], n;
  ck_assert_int_eq(
      pl_parse_enum_list("--variant", "ep,pipelined_llep", names, el, 8, &n),
      PL_OK);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(el[1], 2);
  ck_assert_int_eq(
      pl_parse_enum_list("--variant", "ep,,llep", names, el, 8, &n), PL_EINVAL);
  ck_assert_int_eq(pl_parse_enum_list("--variant", "ep,x", names, el, 8, &n),
                   PL_EINVAL);
}
END_TEST

START_TEST(size_lists) {
  uint64_t v[64];
  int n;
  ck_assert_int_eq(pl_parse_size_list("--sizes", "4Ki:64Ki:x2", v, 64, &n),
                   PL_OK);
  ck_assert_int_eq(n, 5);
  ck_assert_uint_eq(v[0], 4096);
  ck_assert_uint_eq(v[4], 65536);
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1K,2K,16Ki", v, 64, &n),
                   PL_OK);
  ck_assert_int_eq(n, 3);
  ck_assert_uint_eq(v[2], 16384);
  ck_assert_int_eq(pl_parse_size_list("--sizes", "0:10:+5", v, 64, &n), PL_OK);
  ck_assert_int_eq(n, 3);
  ck_assert_uint_eq(v[2], 10);
  ck_assert_int_eq(pl_parse_size_list("--sizes", "64:4:x2", v, 64, &n),
                   PL_EINVAL);
  ck_assert_int_eq(pl_parse_size_list("--sizes", "0:4:x2", v, 64, &n),
                   PL_EINVAL);
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1:4:y2", v, 64, &n),
                   PL_EINVAL);
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1,,2", v, 64, &n), PL_EINVAL);
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1:1G:+1", v, 64, &n),
                   PL_EINVAL);
  ck_assert_int_eq(pl_parse_size_list("--sizes", "1,2Q", v, 64, &n), PL_EINVAL);
}
END_TEST

static const char *const modes[] = {"cpu", "stream", "hybrid", NULL};
static const pl_opt table[] = {
    {"iters", 'n', PL_OPT_INT, "5", "timed iterations", 1, 1000, NULL},
    {"tokens", 0, PL_OPT_SIZE, "64Ki", "tokens per rank", 0, 1e9, NULL},
    {"alpha", 0, PL_OPT_F64, "1.0", "capacity factor", 0.5, 4, NULL},
    {"mode", 0, PL_OPT_ENUM, "stream", "update mode", 0, 0, modes},
    {"check", 0, PL_OPT_FLAG, NULL, "compare with the reference", 0, 0, NULL},
    {"out", 'o', PL_OPT_STR, NULL, "output dir", 0, 0, NULL},
    {"sizes", 0, PL_OPT_SIZE_LIST, "1K,2K", "sweep", 1, 1e12, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL}};

START_TEST(option_tables) {
  char *argv[] = {
      "--iters=7", "--tokens",      "32Ki",    "-o",
      "dir",       "--mode=hybrid", "--check", "--sizes=4Ki:16Ki:x2"};
  pl_args *a = NULL;
  bool help = true;
  ck_assert_int_eq(pl_args_parse(table, 8, argv, 0, &a, &help), PL_OK);
  ck_assert(!help);
  ck_assert_int_eq(pl_args_int(a, "iters"), 7);
  ck_assert_uint_eq(pl_args_size(a, "tokens"), 32768);
  ck_assert(fabs(pl_args_f64(a, "alpha") - 1.0) < 1e-12);
  ck_assert_int_eq(pl_args_enum(a, "mode"), 2);
  ck_assert_str_eq(pl_args_enum_name(a, "mode"), "hybrid");
  ck_assert(pl_args_flag(a, "check"));
  ck_assert(pl_args_given(a, "tokens"));
  ck_assert(!pl_args_given(a, "alpha"));
  ck_assert_str_eq(pl_args_str(a, "out"), "dir");
  uint64_t s[8];
  ck_assert_int_eq(pl_args_size_list(a, "sizes", s, 8), 3);
  ck_assert_uint_eq(s[2], 16384);
  pl_args_free(a);

  /* every kind of bad input is refused, nothing is returned */
  char *bad1[] = {"--iters=0"}, *bad2[] = {"--tokens=12Q"},
       *bad3[] = {"--mode=gpu"}, *bad4[] = {"--nope"}, *bad5[] = {"--iters"},
       *bad6[] = {"stray"}, *bad7[] = {"--check=1"}, *bad8[] = {"--alpha=5"};
  char **bads[] = {bad1, bad2, bad3, bad4, bad5, bad6, bad7, bad8};
  for (int i = 0; i < 8; i++) {
    a = (pl_args *)0x1;
    ck_assert_msg(pl_args_parse(table, 1, bads[i], 0, &a, &help) == PL_EINVAL,
                  "accepted %s", bads[i][0]);
    ck_assert_ptr_null(a);
    ck_assert_msg(strlen(pl_last_error()) > 0, "no message for %s", bads[i][0]);
  }
  char *h[] = {"--help"};
  ck_assert_int_eq(pl_args_parse(table, 1, h, 0, &a, &help), PL_OK);
  ck_assert(help);
  pl_args_free(a);
  char *neg[] = {"--check", "--no-check", "pos1"};
  ck_assert_int_eq(pl_args_parse(table, 3, neg, 1, &a, &help), PL_OK);
  ck_assert(!pl_args_flag(a, "check"));
  ck_assert_int_eq(pl_args_npositional(a), 1);
  ck_assert_str_eq(pl_args_positional(a, 0), "pos1");
  pl_args_free(a);
}
END_TEST

START_TEST(sco_budgets) {
  pl_sco_budget b;
  ck_assert_int_eq(pl_sco_parse_budget("--host-budget", "all", &b), PL_OK);
  ck_assert(b.all);
  ck_assert_int_eq(pl_sco_parse_budget("--host-budget", "0", &b), PL_OK);
  ck_assert(!b.all && b.bytes == 0);
  ck_assert_int_eq(pl_sco_parse_budget("--host-budget", "12Gi", &b), PL_OK);
  ck_assert(!b.all && b.bytes == 12ull << 30);
  ck_assert_int_eq(pl_sco_parse_budget("--host-budget", "12Q", &b), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "0, all, or a size"));
}
END_TEST

int main(void) {
  const TTest *tests[] = {sizes_accept,  sizes_reject,      sizes_limits,
                          table_limits,  ints_floats_enums, size_lists,
                          option_tables, sco_budgets,       NULL};
  return pl_check_suite("options", 0, tests, NULL, NULL, CK_FORK_GETENV, 0) ? 1
                                                                            : 0;
}
