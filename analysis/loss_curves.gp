# loss_curves.gp — training loss per step of each system on the same model,
# data, initialization and hyperparameters (top), and each curve's distance
# from the first one (bottom: 0 where two systems compute the same training).
# Usage: gnuplot -c loss_curves.gp loss-curves.csv out.svg|out.png
# Input (analysis/loss_curves.sh): step,<curve>,<curve>,... (empty: no value)
in = ARG1
out = ARG2
set datafile separator ','
set datafile missing ''
stats in using 1 nooutput
ncol = STATS_columns
if (out[strlen(out)-3:] eq 'svg') {
  set terminal svg size 900,700 dynamic font 'Sans,12'
} else {
  set terminal pngcairo size 900,700 font 'Sans,11'
}
set output out
# one colour and one dash per curve, in column order (linetypes 1..6)
set linetype 1 lc rgb '#1f77b4' dt 1
set linetype 2 lc rgb '#d62728' dt 2
set linetype 3 lc rgb '#2ca02c' dt 3
set linetype 4 lc rgb '#9467bd' dt 4
set linetype 5 lc rgb '#ff7f0e' dt 5
set linetype 6 lc rgb '#8c564b' dt 6
set linetype cycle 6
set multiplot layout 2,1 title 'Training loss per step, one curve per system'
set grid
set key outside right top
set lmargin 10
set rmargin 22
set ylabel 'loss (mean NLL, nats)'
set format x ''
set size 1,0.62
set origin 0,0.36
plot for [i=2:ncol] in using 1:i title columnhead(i) with lines lw 2 lt (i-1)
set format x '%g'
set xlabel 'step'
set ylabel 'loss − first curve'
set size 1,0.36
set origin 0,0
unset title
if (ncol > 2) {
  # curves equal at every step: a visible band around 0, not an empty range
  stats in using (column(3) - column(2)) nooutput
  if (ncol == 3 && STATS_min == STATS_max) { set yrange [STATS_min - 1 : STATS_max + 1] }
  plot for [i=3:ncol] in using 1:(column(i) - column(2)) title columnhead(i) \
       with lines lw 1.5 lt (i-1)
} else {
  set label 1 'one curve: nothing to compare' at graph 0.5,0.5 center
  plot 0 notitle lc rgb 'grey'
}
unset multiplot
