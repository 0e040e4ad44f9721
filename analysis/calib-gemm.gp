# calib-gemm.gp — the calibration chart of the GEMM rate: one bar per GEMM row
# (run, dtype, m=n=k), TFLOP/s counted as 2·m·n·k per call.
#
# usage: gnuplot -c analysis/calib-gemm.gp calib-gemm.tsv out.svg|out.png [CEILING_TFLOPS [LABEL]]
#   calib-gemm.tsv: written by `plateau report RUN_DIR`: '#' comment lines, a
#   header "label tflops" (tab-separated), one line per GEMM row.
#   CEILING_TFLOPS: optional dashed horizontal line (e.g. the vendor peak).
if (ARGC < 2) {
  print "usage: gnuplot -c calib-gemm.gp calib-gemm.tsv out.svg|out.png [CEILING [LABEL]]"
  exit status 2
}
data = ARG1
out = ARG2
ext = out[strlen(out)-2:strlen(out)]
if (ext eq "svg") {
  set terminal svg size 800,500 dynamic enhanced font "Helvetica,13" background rgb "white"
} else {
  if (ext eq "png") {
    set terminal pngcairo size 1000,640 enhanced font "Helvetica,13" background rgb "white"
  } else {
    print "calib-gemm.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set datafile separator "\t"
set datafile commentschars "#"

set title "plateau calib: dense GEMM rate"
set ylabel "TFLOP/s (2·m·n·k per call)"
set yrange [0:*]
set boxwidth 0.6
set style fill solid 0.7 border lc rgb "black"
set grid ytics lc rgb "#dddddd"
# labels rotated about their end, so none runs off the right or bottom edge
set xtics rotate by 25 right noenhanced
set bmargin 7
set key off

if (ARGC >= 3) {
  ceiling = real(ARG3)
  clabel = (ARGC >= 4) ? ARG4 : sprintf("ceiling %.4g TFLOP/s", ceiling)
  set arrow 1 from graph 0, first ceiling to graph 1, first ceiling nohead dt 2 lw 2 lc rgb "black"
  set label 1 clabel at graph 0.02, first ceiling offset 0,0.7 font ",11"
}

plot data using 0:"tflops":xtic(1) with boxes lc rgb "#4477aa" notitle, \
     ''   using 0:"tflops":(sprintf("%.3g", column("tflops"))) with labels offset 0,0.8 notitle
