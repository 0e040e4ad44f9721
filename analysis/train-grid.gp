# train-grid.gp — the paper's grid: tokens/s per GPU (top) and TFLOP/s per GPU
# (bottom) vs context, one column per model on its GPU count (120B on 16,
# 241B on 32, 667B on 64), plateau and FSDP2-best as the W_v-rank run
# (projected from a one-GPU proxy — compute and memory measured,
# communication modelled — or measured on W_v real ranks; the cell column of
# the data says which) with the paper's printed figures dashed (its
# FSDP2-best at 120B/128K is its plateau figure over its 7.6×), a system's
# colour for both, the paper's open; one legend below the six panels.
#
# usage: gnuplot -c analysis/train-grid.gp train-grid.tsv out.svg|out.png [LABEL]
#   train-grid.tsv: written by `plateau report RUN_DIR`
#     (suite/bench/train/report_train_grid.c): '#' comment lines, then a tab-separated
#     header with at least model, series, seq, tok_s_gpu, tflops (picked by
#     name); series plateau, fsdp2-best, paper:plateau, paper:fsdp2-best.
#     A series' points are consecutive, by seq.
#   LABEL: the scale of the paper's figures, in the title.
# The terminal follows the output's extension (svg, png via pngcairo).
if (ARGC < 2) {
  print "usage: gnuplot -c train-grid.gp train-grid.tsv out.svg|out.png [LABEL]"
  exit status 2
}
data = ARG1
out = ARG2
label = (ARGC >= 3) ? ARG3 : "paper: a different scale"
ext = out[strlen(out)-2:strlen(out)]
if (ext ne "svg" && ext ne "png") {
  print "train-grid.gp: output must end in .svg or .png: ", out
  exit status 2
}
term = (ext eq "svg") ? 'svg size 1380,820 dynamic enhanced font "Helvetica,12" background rgb "white"' \
                      : 'pngcairo size 1800,1100 enhanced font "Helvetica,12" background rgb "white"'
set terminal @term
set output out
set datafile separator "\t"
set datafile missing "-"
set datafile commentschars "#"
set datafile columnheaders
dir = ""; do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq "/") { dir = ARG0[1:i] } }
load dir."series.gp"
# no point on the frame
set offsets 0, 0, graph 0.08, 0
set grid xtics ytics lc rgb "#dddddd"
set logscale x 2
set format x "%.0b%B"
set xrange [100000:1400000]
set xlabel "context S"
models = "120b 241b 667b"
gpus = "16 32 64"
series = "plateau fsdp2-best paper:plateau paper:fsdp2-best"
is_paper(s) = strstrt(s, "paper:") == 1
at(m, s) = strcol("model") eq m && strcol("series") eq s
name(s) = is_paper(s) ? s : s." (W_v-rank run)"
# a system's colour for ours and the paper's figure alike; the paper's open
lc_of(s) = pl_lc(strstrt(s, "plateau") ? 1 : 2)
pt_of(s) = is_paper(s) ? pl_pt_open(strstrt(s, "plateau") ? 1 : 2) : pl_pt(strstrt(s, "plateau") ? 1 : 2)
# six panels above one legend for all of them, in a strip of its own: a key
# inside a panel sat on the paper's FSDP2-best point at 128K
strip = 0.06
set multiplot title "The paper's grid: projected from one-GPU proxies (compute and memory measured, communication modelled) — ".label noenhanced
unset key
set lmargin 10
do for [q = 1:2] {
  ycol = (q == 1) ? "tok_s_gpu" : "tflops"
  set ylabel (q == 1) ? "tokens/s per GPU" : "TFLOP/s per GPU (model FLOPs)"
  set yrange [0:*]
  do for [k = 1:3] {
    m = word(models, k)
    set title m." on ".word(gpus, k)." GPUs" noenhanced
    set origin (k - 1) / 3.0, strip + (2 - q) * (0.95 - strip) / 2
    set size 1 / 3.0, (0.95 - strip) / 2
    plot for [s in series] data using (at(m, s) ? column("seq") : NaN):(column(ycol)) \
         with linespoints lw (is_paper(s) ? 1.5 : 2) dt 1+is_paper(s) pt pt_of(s) \
         ps (is_paper(s) ? 1.5 : 1.3) lc rgb lc_of(s) title name(s) noenhanced
  }
}
# the legend: a plot with nothing in range across the strip
unset border
unset tics
unset grid
unset xlabel
unset ylabel
unset logscale
unset title
set xrange [0:1]
set yrange [0:1]
set offsets 0, 0, 0, 0
set margins 0, 0, 0, 0
set origin 0, 0
set size 1, strip
set key center center horizontal noenhanced samplen 3 width 2
set samples 2
plot for [s in series] -1 with linespoints lw (is_paper(s) ? 1.5 : 2) dt 1+is_paper(s) pt pt_of(s) \
     ps (is_paper(s) ? 1.5 : 1.3) lc rgb lc_of(s) title name(s)
unset multiplot
