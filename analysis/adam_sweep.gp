# adam_sweep.gp — streamed optimizer step time vs bucket size β, one line per
# slot count s, with the host-link floor (Eq. 5) measured in the same run as a
# dashed line across the chart (one value: drawn whatever the number of
# bucket sizes, a single one included).  The key sits right of the chart,
# off the lines.
# Usage: gnuplot -c adam_sweep.gp adam_sweep.csv out.svg|out.png
# Input (written by suite/bench/adam/report_adam.c): bucket_m,s=1,s=2,...,floor
in = ARG1
out = ARG2
dir = ""; do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq "/") { dir = ARG0[1:i] } }
load dir."series.gp"
set datafile separator ','
stats in using 1 nooutput
ncol = STATS_columns
# a margin around the bucket sizes, the floor drawn across it (one bucket
# size: a range around it; autoscale of a single value would warn)
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] } else { set xrange [STATS_min / 1.25 : STATS_max * 1.25] }
stats in using ncol nooutput
floor_s = STATS_max
# the terminal follows the output's extension (the last three characters)
ext = out[strlen(out)-2:strlen(out)]
if (ext eq 'svg') {
  set terminal svg size 900,500 dynamic font 'Sans,12' background rgb "white"
} else {
  if (ext eq 'png') {
    set terminal pngcairo size 900,500 font 'Sans,11' background rgb "white"
  } else {
    print "adam_sweep.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set title 'OffloadStreamAdamW: step time vs bucket size'
set xlabel 'bucket β (M params)'
set ylabel 'step time (s)'
set logscale x 2
set yrange [0:*]
set key outside right top
set grid
set offsets 0, 0, graph 0.05, 0
set style data linespoints
plot for [i=2:ncol-1] in using 1:i title columnhead(i) lw 2 pt pl_pt(i - 1) ps 1.3 lc rgb pl_lc(i - 1), \
     floor_s with lines dt 2 lw 2 lc rgb 'black' title 'host-link floor (Eq. 5)'
