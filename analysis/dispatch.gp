# dispatch.gp — peak device memory and fwd+bwd time per variant (ep, LLEP,
# PipelinedLLEP strided) and routing profile, one shape (N/rank, H, E, lanes,
# ranks) per chart.
#
# usage: gnuplot -c analysis/dispatch.gp dispatch-N-H-...tsv out.svg|out.png [UNIT [TITLE [VARIANTS]]]
#   the .tsv is written by `plateau report RUN_DIR`: '#' comments, header
#   "profile ep_dev_peak llep_dev_peak pllep_dev_peak ep_time_ms llep_time_ms
#   pllep_time_ms" (tabs), the peaks in UNIT (GiB, MiB, KiB: the report picks
#   it by magnitude; default GiB); TITLE names the shape and the rank count;
#   VARIANTS: the bars to draw, blank-separated among ep, llep, pllep (those
#   with a value: a column without one is not plotted); default all three.
if (ARGC < 2) {
  print "usage: gnuplot -c dispatch.gp dispatch-N-H.tsv out.svg|out.png [UNIT [TITLE]]"
  exit status 2
}
data = ARG1
out = ARG2
unit = (ARGC >= 3) ? ARG3 : "GiB"
ttl = (ARGC >= 4) ? ARG4 : "ep vs LLEP vs PipelinedLLEP (strided)"
vars = (ARGC >= 5) ? ARG5 : "ep llep pllep"
name(v) = v eq "ep" ? "ep" : v eq "llep" ? "LLEP" : "PipelinedLLEP"
color(v) = v eq "ep" ? 0xbbbbbb : v eq "llep" ? 0xcc6677 : 0x4477aa
ext = out[strlen(out)-2:strlen(out)]
if (ext eq "svg") {
  set terminal svg size 1100,520 dynamic enhanced font "Helvetica,13" background rgb "white"
} else {
  if (ext eq "png") {
    set terminal pngcairo size 1300,600 enhanced font "Helvetica,13" background rgb "white"
  } else {
    print "dispatch.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set datafile separator "\t"
set datafile commentschars "#"
set datafile missing "nan"
set datafile columnheaders
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.75 border lc rgb "black"
set boxwidth 0.9
set grid ytics lc rgb "#dddddd"
set yrange [0:*]
# the key in a band of headroom above the tallest bar, never over a bar
set key inside top center horizontal maxcols 3 samplen 1.5 width -1 noenhanced
set offsets 0, 0, graph 0.15, 0
set xtics noenhanced
set xlabel "routing profile"

set multiplot layout 1,2 title ttl noenhanced
set title "peak device memory (fwd+bwd)"
set ylabel sprintf("%s (tracked, max over ranks)", unit)
plot for [v in vars] data using (column(v."_dev_peak")):xtic(1) title name(v) lc rgb color(v)
set title "fwd+bwd time (median)"
set ylabel "ms"
plot for [v in vars] data using (column(v."_time_ms")):xtic(1) title name(v) lc rgb color(v)
unset multiplot
