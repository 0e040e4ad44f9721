# train-gpus.gp — end to end: tokens/s per GPU and TFLOP/s per GPU vs GPU
# count (the GPUs of the run; W_v for a one-GPU proxy), one line per
# system:context[:proxy] of ours, the paper's points per context overlaid
# (paper:128K, paper:1M: 120B on 16, 241B on 32, 667B on 64 GPUs).
#
# usage: gnuplot -c analysis/train-gpus.gp train-gpus.tsv out.svg|out.png SERIES [LABEL]
#   train-gpus.tsv: written by `plateau report RUN_DIR` (suite/bench/train/report_train.c):
#     '#' comment lines, then a tab-separated header with at least series,
#     gpus, tok_s_gpu, tflops (picked by name), one line per point; a series'
#     points are consecutive, by GPU count.
#   SERIES: the series to draw, separated by blanks; "paper:" ones are the
#     paper's printed figures.  LABEL: the paper's scale, in the title.
if (ARGC < 3) {
  print "usage: gnuplot -c train-gpus.gp train-gpus.tsv out.svg|out.png SERIES [LABEL]"
  exit status 2
}
data = ARG1
out = ARG2
series = ARG3
label = (ARGC >= 4) ? ARG4 : "paper: a different scale"
ext = out[strlen(out)-2:strlen(out)]
if (ext ne "svg" && ext ne "png") {
  print "train-gpus.gp: output must end in .svg or .png: ", out
  exit status 2
}
term = (ext eq "svg") ? 'svg size 960,820 dynamic enhanced font "Helvetica,13" background rgb "white"' \
                      : 'pngcairo size 1280,1100 enhanced font "Helvetica,13" background rgb "white"'
set terminal @term
set output out
set datafile separator "\t"
set datafile missing "-"
set datafile commentschars "#"
set datafile columnheaders
# one x: a range around it (autoscale of a single value would warn)
stats data using "gpus" nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set key outside bottom center horizontal noenhanced
set grid xtics ytics lc rgb "#dddddd"
set logscale x 2
set xlabel "GPUs (of the run; W_v for a proxy)"
# no point on the frame
set offsets graph 0.05, graph 0.05, 0, 0
is_paper(s) = strstrt(s, "paper:") == 1
mine(s) = strcol("series") eq s

set multiplot layout 2,1 title "End to end vs GPU count (ours) — ".label noenhanced
set ylabel "tokens/s per GPU"
set yrange [0:*]
plot for [s in series] data using (mine(s) ? column("gpus") : NaN):(column("tok_s_gpu")) \
       with linespoints lw (is_paper(s) ? 1 : 2) dt 1+is_paper(s) pt (is_paper(s) ? 6 : 7) ps 1.2 title s
set ylabel "TFLOP/s per GPU (model FLOPs)"
set yrange [0:*]
plot for [s in series] data using (mine(s) ? column("gpus") : NaN):(column("tflops")) \
       with linespoints lw (is_paper(s) ? 1 : 2) dt 1+is_paper(s) pt (is_paper(s) ? 6 : 7) ps 1.2 title s
unset multiplot
