/* report_vocab.h — the vocab bench's report (suite/report_vocab.c): the
 * paper's Table 2 beside ours, from the result files of `plateau bench vocab`
 * (and the PyTorch peer's, analysis/peers/torch_ce.py) in a run directory.
 * Not part of the contract; `plateau report` calls it:
 *   OPERATOR_REPORT(report_vocab, pl_report_vocab) and {"vocab", report_vocab}
 * in report.c's hooks[]. */
#ifndef PLATEAU_SUITE_REPORT_VOCAB_H
#define PLATEAU_SUITE_REPORT_VOCAB_H

#include "plateau/status.h"

/* Reads every *.tsv in run_dir and its direct subdirectories (not report/)
 * whose metadata says bench: vocab; writes out_dir/vocab.md, the chart data
 * out_dir/vocab-chart.tsv and the chart out_dir/vocab.{svg,png}
 * (analysis/vocab.gp; skipped with a warning when gnuplot or analysis/ is
 * missing) and prints each path written.  PL_EIO when there are no vocab
 * rows. */
pl_status pl_report_vocab(const char *run_dir, const char *out_dir);

#endif
