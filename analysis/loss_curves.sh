#!/usr/bin/env bash
# loss_curves.sh — the loss curves of a run directory as one table a chart
# plots: every ok row with a `losses` column (train.*.tsv of `plateau bench
# train`, torch_fsdp2.*.tsv of analysis/peers/torch_fsdp2.py) becomes one
# column named by its system (plateau, fsdp2, torch_fsdp2; a name seen twice
# gets #2, #3 in file order), one line per step (1 = the first step, warm-ups
# included: the `losses` column's order).  Then a summary on stdout: per
# curve its steps, first and last loss, the mean of the last 20 steps, and
# its largest distance from the first curve (absolute, and relative to the
# first curve's loss at that step) over the steps both have.
#
#   bash analysis/loss_curves.sh DIR [OUT.csv]      # OUT: DIR/loss-curves.csv
#   gnuplot -c analysis/loss_curves.gp OUT.csv OUT.svg
#
# Exit 2 (nothing written) when DIR is not a directory or holds no curve.
set -euo pipefail
dir=${1:?usage: bash analysis/loss_curves.sh DIR [OUT.csv]}
out=${2:-$dir/loss-curves.csv}
if [ ! -d "$dir" ]; then
  echo "loss_curves: $dir: not a directory" >&2
  exit 2
fi
files=()
for f in "$dir"/train.*.tsv "$dir"/torch_fsdp2.*.tsv; do
  [ -f "$f" ] && files+=("$f")
done
if [ ${#files[@]} -eq 0 ]; then
  echo "loss_curves: $dir: no train.*.tsv or torch_fsdp2.*.tsv (allowed: a" \
    "directory of plateau bench train or torch_fsdp2.py result files)" >&2
  exit 2
fi
tmp=$(mktemp "$(dirname "$out")/.loss-curves.XXXXXX")
trap 'rm -f "$tmp"' EXIT
# one line per curve: label TAB comma-separated losses
awk -F'\t' '
  FNR == 1 { hdr = 0 }
  /^#/ { next }
  !hdr { delete h; for (i = 1; i <= NF; i++) h[$i] = i; hdr = 1; next }
  ("losses" in h) && $h["status"] == "ok" && $h["losses"] != "-" && $h["losses"] != "" {
    name = ("system" in h) ? $h["system"] : $h["bench"]
    seen[name]++
    if (seen[name] > 1) name = name "#" seen[name]
    print name "\t" $h["losses"]
  }' "${files[@]}" >"$tmp.rows"
trap 'rm -f "$tmp" "$tmp.rows"' EXIT
if [ ! -s "$tmp.rows" ]; then
  echo "loss_curves: $dir: no ok row with a losses column" >&2
  exit 2
fi
awk -F'\t' -v csv="$tmp" '
  { lab[NR] = $1; n[NR] = split($2, v, ","); for (i = 1; i <= n[NR]; i++) y[NR, i] = v[i]
    if (n[NR] > m) m = n[NR] }
  END {
    k = NR
    line = "step"; for (c = 1; c <= k; c++) line = line "," lab[c]; print line > csv
    for (i = 1; i <= m; i++) {
      line = i
      for (c = 1; c <= k; c++) line = line "," (i <= n[c] ? y[c, i] : "")
      print line > csv
    }
    printf "%-16s %6s %10s %10s %12s %12s %12s\n", "curve", "steps", "first", "last",
           "last20_mean", "max_abs_d", "max_rel_d"
    for (c = 1; c <= k; c++) {
      s = 0; q = 0
      for (i = (n[c] > 20 ? n[c] - 19 : 1); i <= n[c]; i++) { s += y[c, i]; q++ }
      da = 0; dr = 0
      for (i = 1; i <= n[c] && i <= n[1]; i++) {
        d = y[c, i] - y[1, i]; if (d < 0) d = -d
        if (d > da) da = d
        if (y[1, i] != 0 && d / (y[1, i] < 0 ? -y[1, i] : y[1, i]) > dr)
          dr = d / (y[1, i] < 0 ? -y[1, i] : y[1, i])
      }
      printf "%-16s %6d %10.5g %10.5g %12.5g %12.4g %12.4g\n", lab[c], n[c], y[c, 1],
             y[c, n[c]], s / q, da, dr
    }
  }' "$tmp.rows"
mv "$tmp" "$out"
echo "$out"
