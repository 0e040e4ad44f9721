# vocab.gp — the vocabulary-head chart: peak device memory and fwd+bwd
# time (ms) vs tokens per rank N, one line per variant (dense, fused,
# chunk, vp, ring), from `plateau report` (suite/report_vocab.c).
#
# usage: gnuplot -c analysis/vocab.gp vocab-chart.tsv out.svg|out.png [UNIT]
#   vocab-chart.tsv: '#' comment lines, a header "tokens dense_dev_peak
#   dense_time_ms fused_dev_peak ..." (tab-separated), one line per N, the
#   peaks in UNIT (B, KiB, MiB, GiB: the report picks it by magnitude;
#   default GiB); NaN where a variant has no ok row (e.g. dense out of
#   memory).
if (ARGC < 2) {
  print "usage: gnuplot -c vocab.gp vocab-chart.tsv out.svg|out.png"
  exit status 2
}
data = ARG1
out = ARG2
unit = (ARGC >= 3) ? ARG3 : "GiB"
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
set grid lc rgb "#dddddd"
set key top left
set xlabel "tokens per rank N"
set logscale x 2
set multiplot layout 1,2 title "plateau bench vocab: vocabulary head fwd+bwd"

set title "peak device memory"
set ylabel sprintf("%s (tracked peak, max over ranks)", unit)
set yrange [0:*]
plot data using "tokens":"dense_dev_peak" with linespoints lw 2 pt 7 lc rgb "#cc3311" title "dense", \
     ''   using "tokens":"fused_dev_peak" with linespoints lw 2 pt 5 lc rgb "#0077bb" title "fused (P=1)", \
     ''   using "tokens":"chunk_dev_peak" with linespoints lw 2 pt 13 lc rgb "#aa3377" title "token-chunked", \
     ''   using "tokens":"vp_dev_peak"    with linespoints lw 2 pt 9 lc rgb "#ee7733" title "vocab-parallel", \
     ''   using "tokens":"ring_dev_peak"  with linespoints lw 2 pt 11 lc rgb "#009988" title "Ring-DTP"

set title "fwd+bwd time"
set ylabel "ms (median, max over ranks)"
plot data using "tokens":"dense_time_ms" with linespoints lw 2 pt 7 lc rgb "#cc3311" title "dense", \
     ''   using "tokens":"fused_time_ms" with linespoints lw 2 pt 5 lc rgb "#0077bb" title "fused (P=1)", \
     ''   using "tokens":"chunk_time_ms" with linespoints lw 2 pt 13 lc rgb "#aa3377" title "token-chunked", \
     ''   using "tokens":"vp_time_ms"    with linespoints lw 2 pt 9 lc rgb "#ee7733" title "vocab-parallel", \
     ''   using "tokens":"ring_time_ms"  with linespoints lw 2 pt 11 lc rgb "#009988" title "Ring-DTP"
unset multiplot
