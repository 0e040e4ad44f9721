/* paper.c — the paper's printed figures (paper.h): arXiv 2609.14306, as
 * quoted in DESIGN §1.1–1.5. */
#include "paper.h"

#include <math.h>

const pl_paper_e2e_pt pl_paper_e2e[] = {
    {"120b", 16, 131072, 1355, 91}, {"120b", 16, 1048576, 642, 221},
    {"241b", 32, 131072, 866, 110}, {"241b", 32, 1048576, 314, 213},
    {"667b", 64, 131072, 316, 107}, {"667b", 64, 1048576, 124, 233}};
const int pl_paper_ne2e = (int)(sizeof pl_paper_e2e / sizeof pl_paper_e2e[0]);

const pl_paper_vs_fig pl_paper_vs[3] = {{"120b", 16, 131072, 7.6, 1.5e6, 12},
                                        {"241b", 32, 32768, NAN, 1.8e6, 7},
                                        {"667b", 64, 65536, NAN, 3e6, 3}};
const double pl_paper_reach = 1048576;
const char *const pl_paper_scale = "16–64 H200, different scale";

const pl_paper_ops pl_paper_op = {.dispatch_peak_pct = -59.3,
                                  .dispatch_speedup = 1.10,
                                  .vocab_peak_pct = {-82.8, -86.6},
                                  .vocab_time_pct = {5.1, 4.4},
                                  .sco_hbm_gib = {139.79, 123.73},
                                  .sco_ram_gib = {402.5, 593.4},
                                  .sco_tok_s = {2641, 2687},
                                  .sco_maxbatch = {557056, 655360},
                                  .adam_params = 2.625e9,
                                  .adam_cpu_s = 3.95,
                                  .adam_stream_s = 1.93,
                                  .adam_speedup = 2.05,
                                  .adam_staging_gib = 4.23};
