#!/usr/bin/env bash
# test_charts.sh — the charts a person reads, drawn from the committed
# reference runs (results/reference/*) by `plateau report` with the scripts
# of this tree, plus the max-batch chart from a small file:
#  - every chart renders (no gnuplot warning), a PNG beside every SVG;
#  - in each chart, series of different names differ in colour or marker
#    or dash (read from the SVG: each series is a titled group), and a name
#    drawn in several panels is drawn the same way in each;
#  - one legend per figure where the panels share their series (the paper's
#    grid, the vocabulary head: each name is written once), and at most once
#    per column in the end-to-end charts;
#  - the end-to-end charts draw the other models (peers, custom shapes)
#    apart from the paper's models, and the adam chart draws its floor even
#    with one bucket size.
# Usage: BUILD=build bash analysis/test_charts.sh
set -uo pipefail
PL_TEST=test_charts.sh
. "$(dirname "${BASH_SOURCE[0]}")/../suite/testlib.sh"
if ! command -v gnuplot >/dev/null; then
  echo "test_charts.sh: gnuplot not installed: skipped"
  exit 0
fi

# the styles of a chart: one line per titled series group, "title<TAB>style"
# (style: the first colour, marker and dash pattern of the group)
styles() {
  awk '
    function flush() { if (t != "" && t !~ /^gnuplot_plot_/) print t "\t" c "|" m "|" d; t = "" }
    /<g id="gnuplot_plot_/ { flush(); depth = 0; c = m = d = ""
      if (match($0, /<title>[^<]*<\/title>/)) t = substr($0, RSTART + 7, RLENGTH - 15) }
    t == "" { next }
    c == "" && match($0, /(fill = |stroke=|color=)\x27rgb\([^)]*\)/) {
      c = substr($0, RSTART, RLENGTH); sub(/.*rgb/, "rgb", c); gsub(/ /, "", c) }
    m == "" && match($0, /#gpPt[0-9]+/) { m = substr($0, RSTART + 1, RLENGTH - 1) }
    d == "" && match($0, /stroke-dasharray=\x27[^\x27]*\x27/) { d = "dashed" }
    { depth += gsub(/<g[ >]/, "&") - gsub(/<\/g>/, "&"); if (depth <= 0) flush() }
    END { flush() }' "$1" | sort -u
}
# each name one style, each style one name.  A group that draws nothing (a
# series without a point in that panel) has no style; one that draws a
# single point has no line, so no dash: a name's colour and marker must
# agree over its groups, and its dash is that of any.
distinct() {
  local f=$1 s
  s=$(styles "$f" | awk -F'\t' '$2 != "||" {split($2, a, "|"); cm = a[1] "|" a[2]
      if (!(($1, cm) in seen)) { seen[$1, cm] = 1; n[$1]++; st[$1] = cm }
      if (a[3] != "") dash[$1] = a[3] }
    END { for (t in n) print t "\t" (n[t] > 1 ? "MIXED" : st[t] "|" dash[t]) }')
  [[ -n $s ]] || return 0 # one untitled series (calib's GEMM bars)
  nseries=$((nseries + $(wc -l <<<"$s")))
  local names pairs
  names=$(awk -F'\t' '$2 == "MIXED" {print $1}' <<<"$s")
  [[ -z $names ]] && pass || fail "$(basename "$f"): drawn two ways: $(tr '\n' ' ' <<<"$names")"
  pairs=$(grep -v $'\tMIXED$' <<<"$s" | cut -f2 | sort | uniq -d)
  if [[ -z $pairs ]]; then pass; else
    fail "$(basename "$f"): one style for several series: $(grep -F "$(head -1 <<<"$pairs")" <<<"$s" | cut -f1 | tr '\n' ' ')"
  fi
}
# how often NAME is written as text (a legend entry) in SVG
written() { grep -cF "<text>$2</text>" "$1"; }

n=0 nseries=0
for ref in "$ROOT"/results/reference/*/; do
  [[ -d $ref/report ]] || continue
  r=$(basename "$ref")
  cp -r "$ref" "$tmp/$r"
  "$BIN" report "$tmp/$r" >"$tmp/$r.out" 2>"$tmp/$r.err" || fail "report $r: exit $?: $(tail -3 "$tmp/$r.err")"
  ! grep -E '\.gp" line [0-9]+|warning: .*(undefined|empty)' "$tmp/$r.err" && pass || fail "report $r: gnuplot warned"
  for svg in "$tmp/$r"/report/*.svg; do
    n=$((n + 1))
    grep -q '<svg' "$svg" && pass || fail "$r/$(basename "$svg"): not an SVG"
    png=${svg%.svg}.png
    [[ $(head -c 8 "$png" 2>/dev/null | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] && pass ||
      fail "$r/$(basename "$png"): missing or not a PNG"
    distinct "$svg"
  done
done
[[ $n -ge 10 ]] && pass || fail "only $n charts drawn from the references"
[[ $nseries -ge 50 ]] && pass || fail "only $nseries titled series read from the charts"

R=$tmp/h200x1/report
if [[ -s $R/train-grid.svg ]]; then
  # one legend for the six panels: the paper's FSDP2-best point at 128K sat under a key in each panel
  for s in "paper:fsdp2-best" "paper:plateau" "plateau (W_v-rank run)"; do
    [[ $(written "$R/train-grid.svg" "$s") -eq 1 ]] && pass || fail "train-grid: '$s' written $(written "$R/train-grid.svg" "$s") times"
  done
else
  fail "no h200x1 train-grid chart"
fi
if [[ -s $R/train-context.svg ]]; then
  for s in "paper:120b" "120b:fsdp2-best" "dense2b:fsdp2-best"; do
    [[ $(written "$R/train-context.svg" "$s") -eq 1 ]] && pass || fail "train-context: '$s' written $(written "$R/train-context.svg" "$s") times"
  done
  grep -q "other models" "$R/train-context.svg" && pass || fail "train-context: no panel of the other models"
  grep -q 'other models' "$R/train-gpus.svg" && pass || fail "train-gpus: no panel of the other models"
  ! grep -q $'^fsdp2:8K\t' "$R/train-gpus.tsv" && pass || fail "train-gpus: a peer merged into the paper's models' series"
else
  fail "no h200x1 train-context chart"
fi
for v in "$tmp"/*/report/vocab.svg; do
  [[ $(written "$v" "dense") -eq 1 ]] && pass || fail "$v: 'dense' written $(written "$v" dense) times"
done

# the adam floor with one bucket size (the CPU reference): a dashed line across the plot
A=$tmp/cpu/report/adam_sweep.svg
if [[ -s $A ]]; then
  # its path: the key's sample, then the line (sampled across the plot)
  nl=$(awk '/<title>host-link floor/ {g = 1} g && /stroke-dasharray/ {p = 1} p {n += gsub(/ L/, "&")}
    p && /\/>/ {print n; exit}' "$A")
  [[ ${nl:-0} -ge 3 ]] && pass || fail "adam_sweep: the floor is in the key but not drawn"
else
  fail "no cpu adam chart"
fi

# the max-batch chart (no reference run has one): from a small file
printf '# x\nseries\tgpus\ttokens\ttokens_per_rank\n' >"$tmp/mb.tsv"
printf '%s\t16\t%s\t1\n' 120b:plateau 2000000 120b:fsdp2 200000 241b:plateau 900000 >>"$tmp/mb.tsv"
for g in 16:1500000:125000 32:1800000:257142 64:3000000:1000000; do
  IFS=: read -r n p f <<<"$g"
  printf 'paper:plateau\t%s\t%s\t-\n' "$n" "$p" >>"$tmp/mb.tsv"
done
for g in 16:125000 32:257142 64:1000000; do
  printf 'paper:fsdp2\t%s\t%s\t-\n' "${g%%:*}" "${g##*:}" >>"$tmp/mb.tsv"
done
for e in svg png; do
  gnuplot -c "$ROOT/analysis/train-maxbatch.gp" "$tmp/mb.tsv" "$tmp/mb.$e" \
    "120b:plateau 120b:fsdp2 241b:plateau paper:plateau paper:fsdp2" "paper: test" 2>"$tmp/mb.err" &&
    [[ ! -s $tmp/mb.err ]] && pass || fail "train-maxbatch.gp $e: $(cat "$tmp/mb.err")"
done
distinct "$tmp/mb.svg"

echo "test_charts.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
