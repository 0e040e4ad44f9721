# adam_sweep.gp — streamed optimizer step time vs bucket size β, one line per
# slot count s, with the host-link floor (Eq. 5) measured in the same run as a
# dashed line.  Usage: gnuplot -c adam_sweep.gp adam_sweep.csv out.svg|out.png
# Input (written by suite/bench/adam/report_adam.c): bucket_m,s=1,s=2,...,floor
in = ARG1
out = ARG2
set datafile separator ','
stats in using 1 nooutput
ncol = STATS_columns
# one bucket size: a range around it (autoscale of a single value would warn)
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
if (out[strlen(out)-3:] eq 'svg') {
  set terminal svg size 800,500 dynamic font 'Sans,12'
} else {
  set terminal pngcairo size 800,500 font 'Sans,11'
}
set output out
set title 'OffloadStreamAdamW: step time vs bucket size'
set xlabel 'bucket β (M params)'
set ylabel 'step time (s)'
set logscale x 2
set yrange [0:*]
set key top right
set grid
set style data linespoints
plot for [i=2:ncol-1] in using 1:i title columnhead(i) lw 2 pt 7, \
     in using 1:ncol title 'host-link floor (Eq. 5)' with lines dt 2 lw 2 lc rgb 'black'
