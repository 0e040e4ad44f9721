# train-maxbatch.gp — end to end: the largest global batch (tokens per step
# over all GPUs) that completes a step vs GPU count, ours from
# `plateau bench maxbatch --bench train` (one line per model:system), with
# the paper's plateau (1.5M / 1.8M / 3M tokens on 16 / 32 / 64 GPUs) and
# FSDP2-best (12x / 7x / 3x fewer) batches.
#
# usage: gnuplot -c analysis/train-maxbatch.gp train-maxbatch.tsv out.svg|out.png SERIES [LABEL]
#   train-maxbatch.tsv: written by `plateau report RUN_DIR`
#     (suite/bench/train/report_train.c): '#' comments, a tab-separated header with at
#     least series, gpus, tokens (picked by name), one line per point.
#   SERIES: the series to draw, separated by blanks; "paper:" ones are the
#     paper's printed figures.  LABEL: the paper's scale, in the title.
if (ARGC < 3) {
  print "usage: gnuplot -c train-maxbatch.gp train-maxbatch.tsv out.svg|out.png SERIES [LABEL]"
  exit status 2
}
data = ARG1
out = ARG2
series = ARG3
label = (ARGC >= 4) ? ARG4 : "paper: a different scale"
ext = out[strlen(out)-2:strlen(out)]
if (ext ne "svg" && ext ne "png") {
  print "train-maxbatch.gp: output must end in .svg or .png: ", out
  exit status 2
}
term = (ext eq "svg") ? 'svg size 900,560 dynamic enhanced font "Helvetica,13" background rgb "white"' \
                      : 'pngcairo size 1000,640 enhanced font "Helvetica,13" background rgb "white"'
set terminal @term
set output out
dir = ""; do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq "/") { dir = ARG0[1:i] } }
load dir."series.gp"
set datafile separator "\t"
set datafile missing "-"
set datafile commentschars "#"
set datafile columnheaders
# one x: a range around it (autoscale of a single value would warn)
stats data using "gpus" nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set key outside bottom center horizontal noenhanced
set grid xtics ytics lc rgb "#dddddd"
set logscale xy 2
set format y "%.0b%B"
set xlabel "GPUs (of the run; W_v for a proxy)"
set ylabel "largest global batch (tokens per step)"
# no point on the frame
set offsets graph 0.05, graph 0.05, 0, 0
is_paper(s) = strstrt(s, "paper:") == 1
mine(s) = strcol("series") eq s
set title "Largest batch vs GPU count (ours)\n".label noenhanced
# one style per series (its place in SERIES); the paper's open and dashed
pt_of(s) = is_paper(s) ? pl_pt_open(pl_index(series, s)) : pl_pt(pl_index(series, s))
plot for [s in series] data using (mine(s) ? column("gpus") : NaN):(column("tokens")) \
       with linespoints lw (is_paper(s) ? 1.5 : 2) dt 1+is_paper(s) pt pt_of(s) ps 1.4 \
       lc rgb pl_lc(pl_index(series, s)) title s
