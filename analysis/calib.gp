# calib.gp — the calibration chart: bandwidth vs transfer size, one line per
# link (host->device, device->host, both at once, device copy, all-reduce,
# all-to-all, send/recv), log-log.
#
# usage: gnuplot -c analysis/calib.gp calib.tsv out.svg|out.png [CEILING_GBS [LABEL]]
#   calib.tsv: written by `plateau report RUN_DIR` (RUN_DIR/report/calib.tsv):
#     '#' comment lines, then a header "bytes h2d d2h bidir d2d allreduce
#     alltoall sendrecv" (tab-separated), one line per size, "-" where absent.
#     Values are bus bandwidths in GB/s (nccl-tests' factors; bidir counts
#     both directions, d2d counts read + write).
#   CEILING_GBS: optional dashed horizontal line (e.g. a reference figure).
# The terminal follows the output's extension (svg, png via pngcairo).
if (ARGC < 2) {
  print "usage: gnuplot -c calib.gp calib.tsv out.svg|out.png [CEILING_GBS [LABEL]]"
  exit status 2
}
data = ARG1
out = ARG2
ext = out[strlen(out)-2:strlen(out)]
if (ext eq "svg") {
  set terminal svg size 960,600 dynamic enhanced font "Helvetica,13" background rgb "white"
} else {
  if (ext eq "png") {
    set terminal pngcairo size 1280,800 enhanced font "Helvetica,13" background rgb "white"
  } else {
    print "calib.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set datafile separator "\t"
set datafile missing "-"
set datafile commentschars "#"

set title "plateau calib: bandwidth per link vs transfer size"
set xlabel "transfer size (bytes per rank)"
set ylabel "bandwidth (GB/s, bus bandwidth)"
set logscale x 2
set logscale y 10
set format x "%.0b%B"
set format y "%g"
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key outside right top box opaque
set pointsize 1.0

if (ARGC >= 3) {
  ceiling = real(ARG3)
  clabel = (ARGC >= 4) ? ARG4 : sprintf("ceiling %.4g GB/s", ceiling)
  set arrow 1 from graph 0, first ceiling to graph 1, first ceiling nohead dt 2 lw 2 lc rgb "black"
  set label 1 clabel at graph 0.02, first ceiling offset 0,0.7 font ",11"
}

plot data using "bytes":"h2d" with linespoints lw 2 pt 7 title "host→device (pinned)", \
     ''   using "bytes":"d2h" with linespoints lw 2 pt 5 title "device→host (pinned)", \
     ''   using "bytes":"bidir" with linespoints lw 2 pt 9 title "both directions at once", \
     ''   using "bytes":"d2d" with linespoints lw 2 pt 11 title "device copy (read+write)", \
     ''   using "bytes":"allreduce" with linespoints lw 2 pt 13 title "all-reduce (busbw)", \
     ''   using "bytes":"alltoall" with linespoints lw 2 pt 15 title "all-to-all (busbw)", \
     ''   using "bytes":"sendrecv" with linespoints lw 2 pt 4 title "send/recv ring hop"
