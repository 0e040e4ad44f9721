#!/usr/bin/env bash
# test_report_charts.sh — what the reports and charts of small CPU runs say:
#  - dispatch at 2 and at 4 ranks in one run directory: Table 6 has a row per
#    rank count (each with its own file's times: nothing merged), the plain-EP
#    column, one chart per rank count titled with it, an x label, and memory
#    in KiB or MiB (not GiB) for these KiB-sized peaks;
#  - attention at 2 ranks alone (make run's case): a table and a chart,
#    titled D = 2, and the Ulysses table;
#  - sco and vocab: the memory axes in the unit of the data (KiB / MiB);
#  - calib's GEMM chart: labels rotated about their end (nothing off the edge).
# Usage: BUILD=build bash suite/report/test_report_charts.sh
set -uo pipefail
PL_TEST=test_report_charts.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
export OMP_NUM_THREADS=1
run=$tmp/run
for np in 2 4; do
  $MPIRUN -np $np "$BIN" bench dispatch --backend cpu --preset small --profiles balanced,95/16 -n 2 -w 1 \
    -o "$run" >/dev/null 2>&1 || fail "dispatch np $np"
done
$MPIRUN -np 2 "$BIN" bench attention --backend cpu -n 2 -w 1 -o "$run" >/dev/null 2>&1 || fail "attention np 2"
$MPIRUN -np 2 "$BIN" bench sco --backend cpu --preset small --budget-steps 2 -n 2 -w 0 -o "$run" >/dev/null 2>&1 ||
  fail "sco np 2"
$MPIRUN -np 2 "$BIN" bench vocab --backend cpu --preset small --tokens 256 -n 2 -w 1 -o "$run" >/dev/null 2>&1 ||
  fail "vocab np 2"
"$BIN" report "$run" >"$tmp/out" 2>&1 || { fail "report: exit $?"; tail "$tmp/out"; }
R=$run/report
has() { if grep -qE -- "$2" "$1"; then pass; else fail "$(basename "$1") lacks /$2/"; fi; }
hasnt() { if grep -qE -- "$2" "$1"; then fail "$(basename "$1") has /$2/"; else pass; fi; }

# dispatch: per rank count, with plain EP
has "$R/dispatch.md" "^\| shape \(N/rank, H, E, lanes\) \| ranks \| profile \| EP ms \| EP (KiB|MiB) \| LLEP ms"
for np in 2 4; do
  f=$(grep -l "^# ranks: $np$" "$run"/dispatch.*.tsv)
  llep=$(awk -F'\t' '/^#/ {next} !h {for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next}
    $c["variant"] == "llep" && $c["profile"] == "balanced" {printf "%.1f", $c["time_ms"]}' "$f")
  ep=$(awk -F'\t' '/^#/ {next} !h {for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next}
    $c["variant"] == "ep" && $c["profile"] == "balanced" {printf "%.1f", $c["time_ms"]}' "$f")
  has "$R/dispatch.md" "^\| 256, 32, 32, 2 \| $np \| balanced \| $ep \| [0-9.e-]+ \| $llep \|"
  svg=$(ls "$R"/dispatch-256-32-e32-lanes2-${np}ranks.svg 2>/dev/null)
  if [[ -n $svg ]]; then
    has "$svg" "$np ranks"
    has "$svg" "routing profile"
    has "$svg" "(KiB|MiB) \(tracked"
    hasnt "$svg" "GiB"
  else
    fail "no dispatch chart for $np ranks"
  fi
done
[[ $(grep -c "^| 256, 32, 32, 2 | [24] | balanced |" "$R/dispatch.md") == 2 ]] && pass ||
  fail "Table 6: want one balanced row per rank count"
# attention on 2 ranks only: a table and a chart saying D = 2
has "$R/attention.md" "^# Causal GQA flash attention, Ulysses over D = 2 ranks"
has "$R/attention.md" "^## Ulysses sequence parallelism, D = 2 ranks"
[[ -s $R/attention_tflops.svg ]] && has "$R/attention_tflops.svg" "Ulysses D = 2" || fail "no attention chart"
# memory axes in the data's unit
has "$R/sco-budget-0.tsv" "budget in (B|KiB|MiB), peaks in (KiB|MiB)"
[[ -s $R/sco-budget-0.svg ]] && has "$R/sco-budget-0.svg" "(KiB|MiB) of pinned boundaries" && hasnt "$R/sco-budget-0.svg" "GiB"
has "$R/vocab-chart.tsv" "peak \((KiB|MiB)\)"
[[ -s $R/vocab.svg ]] && has "$R/vocab.svg" "(KiB|MiB) \(tracked peak" && hasnt "$R/vocab.svg" "GiB"
# the GEMM chart's labels
has "$ROOT/analysis/calib-gemm.gp" "^set xtics rotate by [0-9]+ right"
echo "test_report_charts.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
