/* report_attention.h — attention's report (suite/report_attention.c): ours vs
 * PyTorch SDPA (flash, cuDNN) per sequence length, from the result files of
 * `plateau bench attention` and analysis/peers/torch_sdpa.py in a run
 * directory.  Not part of the contract; `plateau report` calls it. */
#ifndef PLATEAU_SUITE_REPORT_ATTENTION_H
#define PLATEAU_SUITE_REPORT_ATTENTION_H

#include "plateau/status.h"

/* Reads run_dir/attention.*.tsv (single-rank rows) and
 * run_dir/peer_torch_sdpa.tsv; writes out_dir/attention.md,
 * out_dir/attention_tflops.dat and the chart attention_tflops.{svg,png}
 * (analysis/attention.gp; skipped with a message when gnuplot fails) and
 * prints each path.  PL_OK with a message when there are no rows. */
pl_status pl_report_attention(const char *run_dir, const char *out_dir);

#endif
