# attention.gp — causal GQA flash attention TFLOP/s vs sequence length: ours
# (forward, forward+backward) against PyTorch SDPA (flash, cuDNN), with the
# measured bf16 GEMM ceiling dashed.  Written by `plateau report` (suite/report_attention.c).
#   gnuplot -c analysis/attention.gp in.dat out.svg [ceiling_tflops [TITLE]]
# in.dat: whitespace columns with a header line:
#   seq ours_fwd ours_fwdbwd flash_fwd flash_fwdbwd cudnn_fwd cudnn_fwdbwd   ("nan" = missing)
in = ARG1
out = ARG2
ceil = (ARGC >= 3) ? real(ARG3) : 793.0
ttl = (ARGC >= 4) ? ARG4 : 'Causal GQA attention, bf16: TFLOP/s vs sequence length'
if (strstrt(out, ".png") > 0) { set terminal pngcairo size 960,600 font ",11" } else { set terminal svg size 960,600 dynamic font ",11" }
set output out
set title sprintf("%s (fwd = 4·S²·d·n_q/2, bwd = 2.5·fwd)", ttl)
set xlabel "sequence length S (tokens)"
set ylabel "TFLOP/s"
set logscale x 2
set format x "%.0s%c"
set key outside right top
set grid ytics
set yrange [0:*]
set datafile missing "nan"
plot in using (column("seq")):(column("ours_fwd")) with linespoints lw 2 pt 7 title "ours fwd", \
     in using (column("seq")):(column("ours_fwdbwd")) with linespoints lw 2 pt 5 title "ours fwd+bwd", \
     in using (column("seq")):(column("flash_fwd")) with linespoints dt 2 pt 6 title "SDPA flash fwd", \
     in using (column("seq")):(column("flash_fwdbwd")) with linespoints dt 2 pt 4 title "SDPA flash fwd+bwd", \
     in using (column("seq")):(column("cudnn_fwd")) with linespoints dt 3 pt 8 title "SDPA cuDNN fwd", \
     in using (column("seq")):(column("cudnn_fwdbwd")) with linespoints dt 3 pt 10 title "SDPA cuDNN fwd+bwd", \
     ceil with lines dt 4 lc rgb "gray" title sprintf("bf16 GEMM ceiling (%.0f)", ceil)
