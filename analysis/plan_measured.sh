#!/usr/bin/env bash
# analysis/plan_measured.sh — how close the planner's search estimate (the
# replay of the step's allocations) comes to the step itself (one step on a
# dry device, the run's rank 0 in one process), on the paper's points: for
# every model (120b, 241b, 667b) on its GPUs (16, 32, 64 and the others),
# every context of `plan --table paper` and both systems, the configuration
# `plateau plan --search replay` chooses and the one the measured search
# (the default) chooses, their device peak, worst case and pinned host peak
# replayed and measured, side by side, and whether each says it fits.  No
# GPU is needed; about four minutes on two cores.
#
#   bash analysis/plan_measured.sh [--models LIST] [--gpus LIST] [--seqs LIST] OUT.tsv
#
# (LIST: comma-separated; the defaults are the table's.)  A summary goes to
# stdout: the largest difference of each peak, and the points whose verdict
# differs (the measured one is what `plateau plan` prints).  Exit 0, or 2 on
# bad usage.  The binary is $BUILD/bin/plateau (BUILD=build by default).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=${BUILD:-build}/bin/plateau
models=120b,241b,667b
gpus=16,32,64
seqs=32Ki,64Ki,128Ki,256Ki,512Ki,1Mi
usage="usage: bash analysis/plan_measured.sh [--models LIST] [--gpus LIST] [--seqs LIST] OUT.tsv"
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --models) models=${2:?$usage}; shift ;;
    --gpus) gpus=${2:?$usage}; shift ;;
    --seqs) seqs=${2:?$usage}; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "plan_measured.sh: unknown option '$1'"; echo "$usage"; exit 2 ;;
    *) [[ -z $out ]] || { echo "$usage"; exit 2; }; out=$1 ;;
  esac
  shift
done
[[ -n $out ]] || { echo "$usage"; exit 2; }
[[ -x $BIN ]] || { echo "plan_measured.sh: no $BIN (make first, or set BUILD)"; exit 2; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
col() { awk -F'\t' -v n="$2" 'NR == 1 {for (i = 1; i <= NF; i++) c[$i] = i; next} {print $c[n]; exit}' "$1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'model\tgpus\tseq\tsystem\tconfig\tfits_replay\tfits_dry\tdev_replay\tdev_dry\tdev_diff\tworst_replay\tworst_dry\thost_replay\thost_dry\n' >"$tmp/out.tsv"
IFS=, read -r -a M <<<"$models"
IFS=, read -r -a G <<<"$gpus"
IFS=, read -r -a S <<<"$seqs"
for m in "${M[@]}"; do
  for g in "${G[@]}"; do
    for s in "${S[@]}"; do
      for sys in plateau fsdp2; do
        a=(plan --model "$m" --gpus "$g" --seq "$s" --system "$sys" --format tsv)
        "$BIN" "${a[@]}" --memory replay --search replay >"$tmp/r.tsv" 2>"$tmp/r.err"
        rr=$?
        "$BIN" "${a[@]}" --memory dry >"$tmp/d.tsv" 2>"$tmp/d.err"
        rd=$?
        if [[ $rr -gt 1 || $rd -gt 1 ]]; then
          printf '%s\t%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\n' "$m" "$g" "$s" "$sys" \
            "error: $(head -c 200 "$tmp/d.err" "$tmp/r.err" | tr '\t\n' '  ')" >>"$tmp/out.tsv"
          continue
        fi
        dr=$(col "$tmp/r.tsv" dev_peak_bytes) dd=$(col "$tmp/d.tsv" dev_peak_bytes)
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$g" "$s" "$sys" \
          "$(col "$tmp/d.tsv" config)" "$([[ $rr -eq 0 ]] && echo yes || echo no)" \
          "$([[ $rd -eq 0 ]] && echo yes || echo no)" "$dr" "$dd" "$((dd - dr))" \
          "$(col "$tmp/r.tsv" dev_worst_bytes)" "$(col "$tmp/d.tsv" dev_worst_bytes)" \
          "$(col "$tmp/r.tsv" host_bytes)" "$(col "$tmp/d.tsv" host_bytes)" >>"$tmp/out.tsv"
      done
    done
  done
done
mv "$tmp/out.tsv" "$out"
awk -F'\t' 'NR > 1 && $6 != "-" {
  n++; r = ($9 - $8) / $8; if (r < 0) r = -r; if (r > mx) {mx = r; at = $1 "/" $2 "/" $3 "/" $4}
  w = ($12 - $11) / ($11 ? $11 : 1); if (w < 0) w = -w; if (w > mw) {mw = w; wat = $1 "/" $2 "/" $3 "/" $4}
  h = ($14 - $13) / ($13 ? $13 : 1); if (h < 0) h = -h; if (h > mh) mh = h
  if ($6 != $7) {nd++; dis = dis " " $1 "/" $2 "/" $3 "/" $4 " (replay " $6 ", measured " $7 ")"}
} NR > 1 && $6 == "-" {ne++}
END {
  printf "%d points: device peak within %.4f%% (largest at %s), worst case within %.2f%% (%s), host within %.4f%%\n", n, 100 * mx, at, 100 * mw, wat == "" ? "-" : wat, 100 * mh
  printf "verdicts that differ: %d%s\n", nd, dis
  if (ne) printf "points not planned: %d (see the config column)\n", ne
}' "$out"
