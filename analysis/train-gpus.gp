# train-gpus.gp — end to end: tokens/s per GPU and TFLOP/s per GPU vs GPU
# count (the GPUs of the run; W_v for a one-GPU proxy), one line per
# system:context[:proxy] of ours on the paper's models (one model per GPU
# count, as in the paper), the paper's points per context overlaid
# (paper:128K, paper:1M: 120B on 16, 241B on 32, 667B on 64 GPUs; open
# symbols, dashed).  Other models (peers, custom shapes, named
# model:system:context[:proxy]: another scale) get a column of panels of
# their own; tok/s above TFLOP/s, each column's legend in a strip below it,
# so that no key covers a point.
#
# usage: gnuplot -c analysis/train-gpus.gp train-gpus.tsv out.svg|out.png SERIES [LABEL [OTHERS]]
#   train-gpus.tsv: written by `plateau report RUN_DIR` (suite/bench/train/report_train.c):
#     '#' comment lines, then a tab-separated header with at least series,
#     gpus, tok_s_gpu, tflops (picked by name), one line per point; a series'
#     points are consecutive, by GPU count.
#   SERIES: the series of the paper's models to draw, separated by blanks
#     (may be empty); "paper:" ones are the paper's printed figures.
#   LABEL: the paper's scale, in the title.
#   OTHERS: the series of other models, drawn in their own column.
# The terminal follows the output's extension (svg, png via pngcairo).
if (ARGC < 3) {
  print "usage: gnuplot -c train-gpus.gp train-gpus.tsv out.svg|out.png SERIES [LABEL [OTHERS]]"
  exit status 2
}
data = ARG1
out = ARG2
series = ARG3
label = (ARGC >= 4) ? ARG4 : "paper: a different scale"
others = (ARGC >= 5) ? ARG5 : ""
ext = out[strlen(out)-2:strlen(out)]
if (ext ne "svg" && ext ne "png") {
  print "train-gpus.gp: output must end in .svg or .png: ", out
  exit status 2
}
if (words(series) + words(others) == 0) {
  print "train-gpus.gp: no series to draw"
  exit status 2
}
dir = ""; do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq "/") { dir = ARG0[1:i] } }
load dir."series.gp"
hpx = (ext eq "svg") ? 820 : 1100
term = (ext eq "svg") ? 'svg size 960,820 dynamic enhanced font "Helvetica,13" background rgb "white"' \
                      : 'pngcairo size 1280,1100 enhanced font "Helvetica,13" background rgb "white"'
set terminal @term
set output out
set datafile separator "\t"
set datafile missing "-"
set datafile commentschars "#"
set datafile columnheaders
is_paper(s) = strstrt(s, "paper:") == 1
mine(s) = strcol("series") eq s
all = series." ".others
# one style per series over the whole figure: the index in SERIES then OTHERS
lc_of(s) = pl_lc(pl_index(all, s))
pt_of(s) = is_paper(s) ? pl_pt_open(pl_index(all, s)) : pl_pt(pl_index(all, s))
lw_of(s) = is_paper(s) ? 1.5 : 2
dt_of(s) = is_paper(s) ? 2 : 1
npaper = sum [k = 1:words(series)] is_paper(word(series, k))

# the layout: a legend strip as tall as the longer list, two rows of panels
nleg = (words(series) > words(others)) ? words(series) : words(others)
strip = (nleg + 1.5) * 21.0 / hpx
ncol = (words(series) > 0) + (words(others) > 0)
rowh = (0.95 - strip) / 2
set lmargin 11
set rmargin 3
set grid xtics ytics lc rgb "#dddddd"
set logscale x 2
set xlabel "GPUs (of the run; W_v for a proxy)"
# no point on the frame
set offsets graph 0.05, graph 0.05, 0, 0

set multiplot title (npaper > 0 ? "End to end vs GPU count (ours) — ".label : "End to end vs GPU count (ours)") noenhanced
unset key
do for [c = 1:ncol] {
  list = (c == 1 && words(series) > 0) ? series : others
  set title ((list eq others) ? ((ncol == 2) ? "other models: another scale" : "") : \
             "the paper's models".(npaper > 0 ? ", the paper's figures open and dashed" : "")) noenhanced
  # x: the list's GPU counts (a range around a single one: autoscale would warn)
  stats data using (pl_in(list, strcol("series")) ? column("gpus") : NaN) nooutput
  if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] } else { set xrange [*:*] }
  # tokens/s: a log axis when the list spans a decade (the paper's 1M and
  # the models' sizes do), so that no line lies on the axis
  stats data using (pl_in(list, strcol("series")) ? column("tok_s_gpu") : NaN) nooutput
  if (STATS_min > 0 && STATS_max >= 10 * STATS_min) {
    set logscale y 10
    set yrange [*:*]
    set ylabel "tokens/s per GPU (log scale)"
  } else {
    unset logscale y
    set yrange [0:*]
    set ylabel "tokens/s per GPU"
  }
  set origin (c - 1.0) / ncol, strip + rowh
  set size 1.0 / ncol, rowh
  plot for [s in list] data using (mine(s) ? column("gpus") : NaN):(column("tok_s_gpu")) \
         with linespoints lw lw_of(s) dt dt_of(s) pt pt_of(s) ps 1.3 lc rgb lc_of(s) title s noenhanced
  unset logscale y
  set yrange [0:*]
  # FLOP/s in the unit of the data (a CPU run's are a millionth of a GPU's)
  stats data using (pl_in(list, strcol("series")) ? column("tflops") : NaN) nooutput
  fs = (STATS_max >= 1) ? 1 : (STATS_max >= 1e-3) ? 1e3 : 1e6
  set ylabel ((fs == 1) ? "T" : (fs == 1e3) ? "G" : "M")."FLOP/s per GPU (model FLOPs)"
  unset title
  set origin (c - 1.0) / ncol, strip
  set size 1.0 / ncol, rowh
  plot for [s in list] data using (mine(s) ? column("gpus") : NaN):(column("tflops") * fs) \
         with linespoints lw lw_of(s) dt dt_of(s) pt pt_of(s) ps 1.3 lc rgb lc_of(s) title s noenhanced
}
# the legends: a plot with nothing in range in the strip below each column
unset border
unset tics
unset grid
unset xlabel
unset ylabel
unset logscale
unset title
set xrange [0:1]
set yrange [0:1]
set offsets 0, 0, 0, 0
set margins 0, 0, 0, 0
set key center center vertical maxcols 1 Left reverse noenhanced samplen 3
set samples 2
do for [c = 1:ncol] {
  list = (c == 1 && words(series) > 0) ? series : others
  set origin (c - 1.0) / ncol, 0
  set size 1.0 / ncol, strip
  plot for [s in list] -1 with linespoints lw lw_of(s) dt dt_of(s) pt pt_of(s) ps 1.3 lc rgb lc_of(s) title s noenhanced
}
unset multiplot
