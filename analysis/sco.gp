# sco.gp — SCO: device peak and throughput vs host budget (one sweep), two
# panels sharing the x axis (the paper's Table 3 as a curve).
#
# usage: gnuplot -c analysis/sco.gp sco-budget-K.tsv out.svg|out.png [TITLE [PEAK_REF [TOK_REF [YUNIT [XUNIT]]]]]
#   sco-budget-K.tsv: written by `plateau report RUN_DIR` (report/sco-budget-K.tsv):
#     '#' comment lines, then a tab-separated header with at least
#     budget dev_peak boundary tok_s_gpu time_ms (columns are picked by name:
#     the result columns budget_bytes in XUNIT, dev_peak_bytes and
#     boundary_bytes in YUNIT, tok_s_gpu, time_ms), one line per ok row of
#     the sweep, sorted by budget.  The units (B, KiB, MiB, GiB) are the
#     report's choice by magnitude; default GiB.
#   PEAK_REF: dashed line (YUNIT): the budget-0 peak scaled by the paper's
#     123.73/139.79 (where the paper's −11.5% would put ours).
#   TOK_REF: the budget-0 throughput; dashed lines at ±2% (the target band).
# The terminal follows the output's extension (svg, png via pngcairo).
if (ARGC < 2) {
  print "usage: gnuplot -c sco.gp sco-budget.tsv out.svg|out.png [TITLE [PEAK_REF [TOK_REF [YUNIT [XUNIT]]]]]"
  exit status 2
}
data = ARG1
out = ARG2
ttl = (ARGC >= 3) ? ARG3 : "SCO host-budget sweep"
peak_ref = (ARGC >= 4) ? real(ARG4) : 0
tok_ref = (ARGC >= 5) ? real(ARG5) : 0
yunit = (ARGC >= 6) ? ARG6 : "GiB"
xunit = (ARGC >= 7) ? ARG7 : "GiB"
ext = out[strlen(out)-2:strlen(out)]
if (ext eq "svg") {
  set terminal svg size 960,760 dynamic enhanced font "Helvetica,13" background rgb "white"
} else {
  if (ext eq "png") {
    set terminal pngcairo size 1280,1000 enhanced font "Helvetica,13" background rgb "white"
  } else {
    print "sco.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set datafile separator "\t"
set datafile missing "-"
set datafile commentschars "#"
set key outside bottom center horizontal
set grid ytics lc rgb "#dddddd"
set xlabel sprintf("host budget per rank (%s of pinned boundaries)", xunit)
# room for the last x tick label; the panels' axes aligned; no point on the
# frame
set rmargin 6
set lmargin 12
set autoscale xfix
set offsets graph 0.02, graph 0.02, 0, 0

set multiplot layout 2,1 title ttl
set ylabel sprintf("device peak (%s per GPU)", yunit)
set yrange [0:*]
plot data using (column("budget")):(column("dev_peak")) with linespoints lw 2 pt 7 lc rgb "#0072b2" title "ours: tracked device peak", \
     data using (column("budget")):(column("boundary")) with linespoints lw 1 pt 6 lc rgb "#7f7f7f" title "ours: boundary bytes at peak", \
     (peak_ref > 0 ? peak_ref : NaN) with lines dt 2 lw 1.5 lc rgb "#d55e00" title "paper's -11.5% applied to our budget-0 peak"

# with a band, the axis spans the data and the band (from 0 the ±2% that
# the target is about would be a line's width)
if (tok_ref > 0) {
  set ylabel "throughput (tokens/s per GPU; axis not from 0)"
  set yrange [*:*]
  set offsets graph 0.02, graph 0.02, graph 0.1, graph 0.1
} else {
  set ylabel "throughput (tokens/s per GPU)"
  set yrange [0:*]
}
plot data using (column("budget")):(column("tok_s_gpu")) with linespoints lw 2 pt 5 lc rgb "#009e73" title "ours: tokens/s per GPU", \
     (tok_ref > 0 ? tok_ref * 1.02 : NaN) with lines dt 3 lw 1.5 lc rgb "black" title "budget 0 +-2% (target band)", \
     (tok_ref > 0 ? tok_ref * 0.98 : NaN) with lines dt 3 lw 1.5 lc rgb "black" notitle
unset multiplot
