# plan_reach.gp — reach: the longest context each system fits vs GPUs, per
# model (plateau plan --table paper's projections), the paper's points
# overlaid (plateau ran 1M: a point it reached, not its limit; FSDP2-best
# OOMed past 128K / 32K / 64K).  One legend for the three panels, below
# them, so that it covers no data.
#
# usage: gnuplot -c analysis/plan_reach.gp plan_reach.tsv out.svg|out.png [TITLE]
#   plan_reach.tsv: written by `plateau plan --table paper -o DIR`: '#'
#     comment lines, a tab-separated header with at least model ranks system
#     max_context paper_max_context (columns picked by name), one row per
#     (model, system, GPUs), each series' rows contiguous; '-' when none.
# The terminal follows the output's extension (svg, png via pngcairo).
if (ARGC < 2) {
  print "usage: gnuplot -c plan_reach.gp plan_reach.tsv out.svg|out.png [TITLE]"
  exit status 2
}
data = ARG1
out = ARG2
ttl = (ARGC >= 3) ? ARG3 : "Reach: the longest context that fits (projections)"
ext = out[strlen(out)-2:strlen(out)]
if (ext eq "svg") {
  set terminal svg size 1320,560 dynamic enhanced font "Helvetica,13" background rgb "white"
} else {
  if (ext eq "png") {
    set terminal pngcairo size 1760,740 enhanced font "Helvetica,13" background rgb "white"
  } else {
    print "plan_reach.gp: output must end in .svg or .png: ", out
    exit status 2
  }
}
set output out
set datafile separator "\t"
set datafile missing "-"
set datafile commentschars "#"
set grid xtics ytics lc rgb "#dddddd"
set logscale x 2
set logscale y 2
set xrange [12:80]
set yrange [16384:16777216]
set xtics ("16" 16, "32" 32, "64" 64)
set ytics ("16K" 16384, "32K" 32768, "64K" 65536, "128K" 131072, "256K" 262144, "512K" 524288, "1M" 1048576, "2M" 2097152, "4M" 4194304, "8M" 8388608, "16M" 16777216)
set xlabel "GPUs (H200)"
sel(m, s, c) = (strcol("model") eq m && strcol("system") eq s) ? column(c) : NaN
models = "120b 241b 667b"
# three panels above a strip for the legend, placed by hand
set multiplot title ttl
unset key
do for [i=1:3] {
  m = word(models, i)
  set title m
  set origin (i - 1) / 3.0, 0.12
  set size 1 / 3.0, 0.83
  if (i == 1) { set ylabel "longest context that fits (tokens; searched to 8M)" } else { unset ylabel }
  plot data using (column("ranks")):(sel(m, "plateau", "max_context")) \
         with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "plateau (projection)", \
       data using (column("ranks")):(sel(m, "fsdp2", "max_context")) \
         with linespoints lw 2 dt 2 pt 5 lc rgb "#d62728" title "FSDP2-best (projection)", \
       data using (column("ranks")):(sel(m, "plateau", "paper_max_context")) \
         with points pt 6 ps 2.2 lw 2 lc rgb "#1f77b4" title "paper: plateau ran", \
       data using (column("ranks")):(sel(m, "fsdp2", "paper_max_context")) \
         with points pt 4 ps 2.2 lw 2 lc rgb "#d62728" title "paper: FSDP2-best OOM past"
}
# the legend: a plot with nothing in range across the strip below the
# panels (a key inside a panel is limited to its width and sat on its data)
set origin 0,0
set size 1,0.12
unset title
unset border
unset tics
unset grid
unset xlabel
unset ylabel
unset logscale
set xrange [0:1]
set yrange [0:1]
set key center center horizontal box
set samples 2
plot -1 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "plateau (projection)", \
     -1 with linespoints lw 2 dt 2 pt 5 lc rgb "#d62728" title "FSDP2-best (projection)", \
     -1 with points pt 6 ps 2.2 lw 2 lc rgb "#1f77b4" title "paper: plateau ran", \
     -1 with points pt 4 ps 2.2 lw 2 lc rgb "#d62728" title "paper: FSDP2-best OOM past"
unset multiplot
