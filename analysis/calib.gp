# calib.gp — the calibration chart: bandwidth vs transfer size, one line per
# link (host->device, device->host, both at once, device copy, all-reduce,
# all-to-all, send/recv), log-log.
#
# usage: gnuplot -c analysis/calib.gp calib.tsv out.svg|out.png [CEILING_GBS [LABEL [LINKS]]]
#   calib.tsv: written by `plateau report RUN_DIR` (RUN_DIR/report/calib.tsv):
#     '#' comment lines, then a header "bytes h2d d2h bidir d2d allreduce
#     alltoall sendrecv" (tab-separated), one line per size, "-" where absent.
#     Values are bus bandwidths in GB/s (nccl-tests' factors; bidir counts
#     both directions, d2d counts read + write).
#   CEILING_GBS: optional dashed horizontal line (e.g. a reference figure;
#     "-": none).  LINKS: the columns to draw, blank-separated (those with a
#     point: a column without one is not plotted); default all seven.
# The terminal follows the output's extension (svg, png via pngcairo).
if (ARGC < 2) {
  print "usage: gnuplot -c calib.gp calib.tsv out.svg|out.png [CEILING_GBS [LABEL [LINKS]]]"
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
dir = ""; do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq "/") { dir = ARG0[1:i] } }
load dir."series.gp"
set datafile separator "\t"
set datafile missing "-"
set datafile commentschars "#"
links = (ARGC >= 5) ? ARG5 : "h2d d2h bidir d2d allreduce alltoall sendrecv"
# one size: a range around it (autoscale of a single value would warn)
stats data using "bytes" nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }

set title "plateau calib: bandwidth per link vs transfer size"
set xlabel "transfer size (bytes per rank)"
set ylabel "bandwidth (GB/s, bus bandwidth)"
set logscale x 2
set logscale y 10
set format x "%.0b%B"
set format y "%g"
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
# no point on the frame
set autoscale xfix
set offsets graph 0.03, graph 0.03, 0, 0
set key outside right top box opaque
set pointsize 1.0

if (ARGC >= 3 && ARG3 ne "-") {
  ceiling = real(ARG3)
  clabel = (ARGC >= 4) ? ARG4 : sprintf("ceiling %.4g GB/s", ceiling)
  set arrow 1 from graph 0, first ceiling to graph 1, first ceiling nohead dt 2 lw 2 lc rgb "black"
  set label 1 clabel at graph 0.02, first ceiling offset 0,0.7 font ",11"
}

name(l) = l eq "h2d" ? "host→device (pinned)" : l eq "d2h" ? "device→host (pinned)" : \
          l eq "bidir" ? "both directions at once" : l eq "d2d" ? "device copy (read+write)" : \
          l eq "allreduce" ? "all-reduce (busbw)" : l eq "alltoall" ? "all-to-all (busbw)" : \
          l eq "sendrecv" ? "send/recv ring hop" : l
ptype(l) = l eq "h2d" ? 7 : l eq "d2h" ? 5 : l eq "bidir" ? 9 : l eq "d2d" ? 11 : \
           l eq "allreduce" ? 13 : l eq "alltoall" ? 15 : 4
# a link's colour is the same in every chart (its place in the full list)
all = "h2d d2h bidir d2d allreduce alltoall sendrecv"
color(l) = pl_lc(pl_index(all, l) > 0 ? pl_index(all, l) : 8)
plot for [l in links] data using "bytes":(column(l)) with linespoints lw 2 pt ptype(l) \
     ps 1.3 lc rgb color(l) title name(l)
