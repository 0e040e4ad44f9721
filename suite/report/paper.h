/* paper.h — the paper's printed figures (Pandit et al., arXiv 2609.14306;
 * DESIGN §1 and §1.5), one table of them (paper.c): every report that
 * prints a paper value beside ours, and the summary of the paper's claims
 * (report_summary.c), read them here, so a figure is written once.
 * Internal to suite/. */
#ifndef PLATEAU_SUITE_PAPER_H
#define PLATEAU_SUITE_PAPER_H

/* End to end (App. A): plateau's tok/s/GPU and TFLOP/s/GPU at 128K and 1M,
 * 120B / 241B / 667B on 16 / 32 / 64 H200 (pl_paper_ne2e points). */
typedef struct pl_paper_e2e_pt {
  const char *model;
  int gpus;
  double seq, tok, tflops;
} pl_paper_e2e_pt;
extern const pl_paper_e2e_pt pl_paper_e2e[];
extern const int pl_paper_ne2e;

/* FSDP2-best per model (120b, 241b, 667b, in that order): its longest
 * context (it runs out of memory past it), the throughput ratio plateau /
 * FSDP2-best at 120B/128K (NAN where none is printed), plateau's largest
 * global batch in tokens and its ratio to FSDP2-best's. */
typedef struct pl_paper_vs_fig {
  const char *model;
  int gpus;
  double fsdp2_reach, tok_ratio, batch, batch_ratio;
} pl_paper_vs_fig;
extern const pl_paper_vs_fig pl_paper_vs[3];
/* The longest context plateau trains on every model: 1M. */
extern const double pl_paper_reach;
/* How the end-to-end figures are labelled: "16–64 H200, different scale". */
extern const char *const pl_paper_scale;

/* The operators (Tables 2, 3, 4, 6, 13), each on the paper's hardware. */
typedef struct pl_paper_ops {
  /* PipelinedLLEP vs LLEP, 65K tokens/rank, H 7168, E 128, Ep 8, balanced */
  double dispatch_peak_pct, dispatch_speedup;
  /* Ring-DTP vs dense logits, P 8, H 7168, V 200,000, fp32: N 16K / 32K */
  double vocab_peak_pct[2], vocab_time_pct[2];
  /* SCO, gpt-oss-20b, host budget 0 → all: HBM peak and node RAM (GiB),
   * tok/s/GPU, largest batch (tokens) */
  double sco_hbm_gib[2], sco_ram_gib[2], sco_tok_s[2], sco_maxbatch[2];
  /* OffloadStreamAdamW vs ZeRO-Offload's CPU Adam, 2.625B params/rank:
   * step seconds, the speed-up, the staging GiB */
  double adam_params, adam_cpu_s, adam_stream_s, adam_speedup, adam_staging_gib;
} pl_paper_ops;
extern const pl_paper_ops pl_paper_op;

#endif
