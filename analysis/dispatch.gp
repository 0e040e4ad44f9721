# dispatch.gp — peak device memory and fwd+bwd time per variant (ep, LLEP,
# PipelinedLLEP strided) and routing profile, one shape per chart.
#
# usage: gnuplot -c analysis/dispatch.gp dispatch-N-H.tsv out.svg|out.png
#   the .tsv is written by `plateau report RUN_DIR`: '#' comments, header
#   "profile ep_dev_peak_gib llep_dev_peak_gib pllep_dev_peak_gib ep_time_ms
#   llep_time_ms pllep_time_ms" (tabs).
if (ARGC < 2) {
  print "usage: gnuplot -c dispatch.gp dispatch-N-H.tsv out.svg|out.png"
  exit status 2
}
data = ARG1
out = ARG2
ext = out[strlen(out)-2:strlen(out)]
if (ext eq "svg") {
  set terminal svg size 1100,480 dynamic enhanced font "Helvetica,13" background rgb "white"
} else {
  if (ext eq "png") {
    set terminal pngcairo size 1300,560 enhanced font "Helvetica,13" background rgb "white"
  } else {
    print "dispatch.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set datafile separator "\t"
set datafile commentschars "#"
set datafile missing "nan"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.75 border lc rgb "black"
set boxwidth 0.9
set grid ytics lc rgb "#dddddd"
set yrange [0:*]
set key top left noenhanced
set xtics noenhanced

set multiplot layout 1,2 title "plateau dispatch: ep vs LLEP vs PipelinedLLEP (strided)"
set title "peak device memory (fwd+bwd)"
set ylabel "GiB (tracked, max over ranks)"
plot data using "ep_dev_peak_gib":xtic(1) title "ep" lc rgb "#bbbbbb", \
     ''   using "llep_dev_peak_gib" title "LLEP" lc rgb "#cc6677", \
     ''   using "pllep_dev_peak_gib" title "PipelinedLLEP" lc rgb "#4477aa"
set title "fwd+bwd time (median)"
set ylabel "ms"
plot data using "ep_time_ms":xtic(1) title "ep" lc rgb "#bbbbbb", \
     ''   using "llep_time_ms" title "LLEP" lc rgb "#cc6677", \
     ''   using "pllep_time_ms" title "PipelinedLLEP" lc rgb "#4477aa"
unset multiplot
