# attention.gp — causal GQA flash attention TFLOP/s vs sequence length: ours
# (forward, forward+backward) against PyTorch SDPA (flash, cuDNN), with the
# measured bf16 GEMM ceiling dashed on GPU runs.  Written by `plateau report`
# (suite/bench/attention/report_attention.c).
#   gnuplot -c analysis/attention.gp in.dat out.svg [ceiling_tflops [TITLE [COLUMNS]]]
# in.dat: whitespace columns with a header line:
#   seq ours_fwd ours_fwdbwd flash_fwd flash_fwdbwd cudnn_fwd cudnn_fwdbwd   ("nan" = missing)
# ceiling_tflops: the dashed line (0: none, as on the CPU backend); COLUMNS:
# the columns to draw, blank-separated (those with a point: a column without
# one is not plotted); default all six.
in = ARG1
out = ARG2
ceil = (ARGC >= 3) ? real(ARG3) : 793.0
ttl = (ARGC >= 4) ? ARG4 : 'Causal GQA attention, bf16: TFLOP/s vs sequence length'
cols = (ARGC >= 5) ? ARG5 : "ours_fwd ours_fwdbwd flash_fwd flash_fwdbwd cudnn_fwd cudnn_fwdbwd"
if (strstrt(out, ".png") > 0) { set terminal pngcairo size 960,600 font ",11" } else { set terminal svg size 960,600 dynamic font ",11" }
set output out
dir = ""; do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq "/") { dir = ARG0[1:i] } }
load dir."series.gp"
set datafile missing "nan"
set datafile columnheaders
# one S: a range around it (autoscale of a single value would warn)
stats in using (column("seq")) nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set title sprintf("%s\n(fwd = 4·S²·d·n_q/2, bwd = 2.5·fwd)", ttl) noenhanced
set xlabel "sequence length S (tokens)"
set ylabel "TFLOP/s"
set logscale x 2
set format x "%.0b%B"
set key outside right top
set grid ytics
set yrange [0:*]
# the ceiling off the frame
set offsets 0, 0, graph 0.06, 0
name(c) = c eq "ours_fwd" ? "ours fwd" : c eq "ours_fwdbwd" ? "ours fwd+bwd" : \
          c eq "flash_fwd" ? "SDPA flash fwd" : c eq "flash_fwdbwd" ? "SDPA flash fwd+bwd" : \
          c eq "cudnn_fwd" ? "SDPA cuDNN fwd" : c eq "cudnn_fwdbwd" ? "SDPA cuDNN fwd+bwd" : c
ptype(c) = c eq "ours_fwd" ? 7 : c eq "ours_fwdbwd" ? 5 : c eq "flash_fwd" ? 6 : \
           c eq "flash_fwdbwd" ? 4 : c eq "cudnn_fwd" ? 8 : 10
dash(c) = strstrt(c, "ours") == 1 ? 1 : strstrt(c, "flash") == 1 ? 2 : 3
width(c) = strstrt(c, "ours") == 1 ? 2 : 1.5
# a column's colour is the same in every chart (its place in the full list)
all = "ours_fwd ours_fwdbwd flash_fwd flash_fwdbwd cudnn_fwd cudnn_fwdbwd"
color(c) = pl_lc(pl_index(all, c) > 0 ? pl_index(all, c) : 7)
if (ceil > 0) {
  plot for [c in cols] in using (column("seq")):(column(c)) with linespoints lw width(c) dt dash(c) \
       pt ptype(c) ps 1.5 lc rgb color(c) title name(c), \
       ceil with lines dt 4 lc rgb "gray" title sprintf("bf16 GEMM ceiling (%.0f)", ceil)
} else {
  plot for [c in cols] in using (column("seq")):(column(c)) with linespoints lw width(c) dt dash(c) \
       pt ptype(c) ps 1.5 lc rgb color(c) title name(c)
}
