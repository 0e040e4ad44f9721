# vocab.gp — the vocabulary-head chart of one precision and shape: peak
# device memory and fwd+bwd time (ms) vs tokens per rank N, one line per
# variant (dense, fused, chunk, vp, ring), from `plateau report`
# (suite/bench/vocab/report_vocab.c; one chart per backend, dtype, math and shape, so no
# line joins two precisions); one legend below both panels.
#
# usage: gnuplot -c analysis/vocab.gp vocab-chart.tsv out.svg|out.png [UNIT [VARIANTS [TITLE]]]
#   vocab-chart.tsv: '#' comment lines, a header "tokens dense_dev_peak
#   dense_time_ms fused_dev_peak ..." (tab-separated), one line per N (by N),
#   the peaks in UNIT (B, KiB, MiB, GiB: the report picks it by magnitude;
#   default GiB); NaN where a variant has no ok row (e.g. dense out of
#   memory).  VARIANTS: the variants to draw, blank-separated (those with an
#   ok row: a column without a point is not plotted); default all five.
#   TITLE: the precision and shape.
if (ARGC < 2) {
  print "usage: gnuplot -c vocab.gp vocab-chart.tsv out.svg|out.png [UNIT [VARIANTS [TITLE]]]"
  exit status 2
}
data = ARG1
out = ARG2
unit = (ARGC >= 3) ? ARG3 : "GiB"
vars = (ARGC >= 4) ? ARG4 : "dense fused chunk vp ring"
sub = (ARGC >= 5) ? ": ".ARG5 : ""
ext = out[strlen(out)-2:strlen(out)]
if (ext eq "svg") {
  set terminal svg size 1100,520 dynamic enhanced font "Helvetica,13" background rgb "white"
} else {
  if (ext eq "png") {
    set terminal pngcairo size 1400,660 enhanced font "Helvetica,13" background rgb "white"
  } else {
    print "vocab.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set datafile separator "\t"
set datafile commentschars "#"
set datafile missing "NaN"
dir = ""; do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq "/") { dir = ARG0[1:i] } }
load dir."series.gp"
# one N: a range around it (autoscale of a single value would warn)
stats data using "tokens" nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set grid lc rgb "#dddddd"
set xlabel "tokens per rank N"
set logscale x 2
set offsets graph 0.03, graph 0.03, graph 0.05, 0
name(v) = v eq "dense" ? "dense" : v eq "fused" ? "fused (P=1)" : v eq "chunk" ? "token-chunked" : \
          v eq "vp" ? "vocab-parallel" : v eq "ring" ? "Ring-DTP" : v
# a variant's style is the same in every chart (its place in the full list);
# Ring-DTP is dashed with open marks: on one rank it is the fused head, and
# its line would hide fused's
k_of(v) = pl_index("dense fused chunk vp ring", v)
lc_of(v) = pl_lc(k_of(v) > 0 ? k_of(v) : 6)
pt_of(v) = v eq "ring" ? pl_pt_open(k_of(v)) : pl_pt(k_of(v) > 0 ? k_of(v) : 6)
ps_of(v) = v eq "ring" ? 2 : 1.3
dt_of(v) = v eq "ring" ? 2 : 1
# two panels above one legend for both, in a strip of its own
strip = 0.1
set multiplot title "plateau bench vocab: vocabulary head fwd+bwd".sub noenhanced
unset key
set lmargin 10

set title "peak device memory"
set ylabel sprintf("%s (tracked peak, max over ranks)", unit)
set yrange [0:*]
set origin 0, strip
set size 0.5, 0.93 - strip
plot for [v in vars] data using "tokens":(column(v."_dev_peak")) with linespoints lw 2 \
     dt dt_of(v) pt pt_of(v) ps ps_of(v) lc rgb lc_of(v) title name(v)

set title "fwd+bwd time"
set ylabel "ms (median, max over ranks)"
set origin 0.5, strip
plot for [v in vars] data using "tokens":(column(v."_time_ms")) with linespoints lw 2 \
     dt dt_of(v) pt pt_of(v) ps ps_of(v) lc rgb lc_of(v) title name(v)

# the legend: a plot with nothing in range across the strip
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
set origin 0, 0
set size 1, strip
set key center center horizontal noenhanced samplen 4 width 2
set samples 2
plot for [v in vars] -1 with linespoints lw 2 dt dt_of(v) pt pt_of(v) ps ps_of(v) lc rgb lc_of(v) title name(v)
unset multiplot
