# train.gp — end to end: tokens/s per GPU and TFLOP/s per GPU vs context, one
# line per run of ours (model:system[:variant]) with the paper's points
# overlaid (paper:model, open symbols, dashed), two panels sharing the x axis.
#
# usage: gnuplot -c analysis/train.gp train-context.tsv out.svg|out.png SERIES [LABEL]
#   train-context.tsv: written by `plateau report RUN_DIR`
#     (report/train-context.tsv): '#' comment lines, then a tab-separated
#     header with at least series, seq, tok_s_gpu, tflops (picked by name),
#     one line per ok point; a series' points are consecutive, by seq.
#   SERIES: the series to draw, separated by blanks (names without blanks);
#     those starting with "paper:" are the paper's printed figures.
#   LABEL: what the paper's points are (their scale), in the title.
# The terminal follows the output's extension (svg, png via pngcairo).
if (ARGC < 3) {
  print "usage: gnuplot -c train.gp train-context.tsv out.svg|out.png SERIES [LABEL]"
  exit status 2
}
data = ARG1
out = ARG2
series = ARG3
label = (ARGC >= 4) ? ARG4 : "paper: a different scale"
ext = out[strlen(out)-2:strlen(out)]
if (ext ne "svg" && ext ne "png") {
  print "train.gp: output must end in .svg or .png: ", out
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
stats data using "seq" nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set key outside bottom center horizontal noenhanced
set grid xtics ytics lc rgb "#dddddd"
set logscale x 2
set format x "%.0b%B"
set xlabel "context S (tokens per sequence)"
is_paper(s) = strstrt(s, "paper:") == 1
mine(s) = strcol("series") eq s

set multiplot layout 2,1 title "End to end vs context (ours) — ".label noenhanced
set ylabel "tokens/s per GPU"
set yrange [0:*]
plot for [s in series] data using (mine(s) ? column("seq") : NaN):(column("tok_s_gpu")) \
       with linespoints lw (is_paper(s) ? 1 : 2) dt 1+is_paper(s) pt (is_paper(s) ? 6 : 7) ps 1.2 title s
set ylabel "TFLOP/s per GPU (model FLOPs)"
set yrange [0:*]
plot for [s in series] data using (mine(s) ? column("seq") : NaN):(column("tflops")) \
       with linespoints lw (is_paper(s) ? 1 : 2) dt 1+is_paper(s) pt (is_paper(s) ? 6 : 7) ps 1.2 title s
unset multiplot
