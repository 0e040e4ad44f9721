# vocab.gp — the vocabulary-head chart of one precision and shape: peak
# device memory and fwd+bwd time (ms) vs tokens per rank N, one line per
# variant (dense, fused, chunk, vp, ring), from `plateau report`
# (suite/bench/vocab/report_vocab.c; one chart per backend, dtype, math and shape, so no
# line joins two precisions).
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
  set terminal svg size 1100,480 dynamic enhanced font "Helvetica,13" background rgb "white"
} else {
  if (ext eq "png") {
    set terminal pngcairo size 1400,600 enhanced font "Helvetica,13" background rgb "white"
  } else {
    print "vocab.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set datafile separator "\t"
set datafile commentschars "#"
set datafile missing "NaN"
# one N: a range around it (autoscale of a single value would warn)
stats data using "tokens" nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set grid lc rgb "#dddddd"
set key top left noenhanced
set xlabel "tokens per rank N"
set logscale x 2
name(v) = v eq "dense" ? "dense" : v eq "fused" ? "fused (P=1)" : v eq "chunk" ? "token-chunked" : \
          v eq "vp" ? "vocab-parallel" : v eq "ring" ? "Ring-DTP" : v
color(v) = v eq "dense" ? 0xcc3311 : v eq "fused" ? 0x0077bb : v eq "chunk" ? 0xaa3377 : \
           v eq "vp" ? 0xee7733 : 0x009988
ptype(v) = v eq "dense" ? 7 : v eq "fused" ? 5 : v eq "chunk" ? 13 : v eq "vp" ? 9 : 11
set multiplot layout 1,2 title "plateau bench vocab: vocabulary head fwd+bwd".sub noenhanced

set title "peak device memory"
set ylabel sprintf("%s (tracked peak, max over ranks)", unit)
set yrange [0:*]
plot for [v in vars] data using "tokens":(column(v."_dev_peak")) with linespoints lw 2 \
     pt ptype(v) lc rgb color(v) title name(v)

set title "fwd+bwd time"
set ylabel "ms (median, max over ranks)"
plot for [v in vars] data using "tokens":(column(v."_time_ms")) with linespoints lw 2 \
     pt ptype(v) lc rgb color(v) title name(v)
unset multiplot
