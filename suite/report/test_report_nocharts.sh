#!/usr/bin/env bash
# test_report_nocharts.sh — a chart with nothing to show is not handed to
# gnuplot: a copy of a CPU reference file (results/reference/cpu) edited as
# a hostile user or a broken run would (every tok_s_gpu or tflops nan, a
# seq or tokens of 1e308, an sco sweep with no throughput, attention rows
# whose rates are nan or inf) gives a report that says "<chart>.svg: not
# drawn: nothing to show (...)", prints no line of gnuplot's, and exits 0;
# the untouched files still draw every chart.
# Usage: BUILD=build bash suite/report/test_report_nocharts.sh
set -uo pipefail
PL_TEST=test_report_nocharts.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
if ! command -v gnuplot >/dev/null; then
  echo "test_report_nocharts.sh: gnuplot not installed: nothing to check"
  exit 0
fi
unset PLATEAU_GNUPLOT

# edit NAME BENCH AWK-ACTION: RUN_DIR $tmp/NAME holding BENCH's reference
# file with AWK-ACTION applied to every row (columns by name: $c["seq"])
edit() {
  mkdir -p "$tmp/$1"
  local f
  f=$(ls "$ROOT"/results/reference/cpu/"$2".*.tsv)
  awk -F'\t' -v OFS='\t' "/^#/ {print; next} !h {for (i = 1; i <= NF; i++) c[\$i] = i; h = 1; print; next} {$3; print}" \
    "$f" >"$tmp/$1/$(basename "$f")"
}
# nodraw NAME CHART: the report of $tmp/NAME exits 0, says CHART was not
# drawn, and gnuplot printed nothing
nodraw() {
  "$BIN" report "$tmp/$1" >"$tmp/$1.out" 2>"$tmp/$1.err"
  local rc=$?
  [[ $rc == 0 ]] && pass || fail "$1: exit $rc: $(grep -v '^plateau report: .*unfinished' "$tmp/$1.err" | tail -2 | tr '\n' '|')"
  grep -q "/report/$2\.svg: not drawn: nothing to show" "$tmp/$1.out" && pass ||
    fail "$1: does not say $2.svg was not drawn: $(grep 'not drawn' "$tmp/$1.out")"
  grep -v '^plateau report: ' "$tmp/$1.err" | grep -qiE 'warning|error' &&
    fail "$1: gnuplot printed: $(grep -v '^plateau report: ' "$tmp/$1.err" | head -2 | tr '\n' '|')" || pass
}
edit tnan train '$c["tok_s_gpu"] = "nan"'
nodraw tnan train-context
edit tflops train '$c["tflops"] = "nan"'
nodraw tflops train-context
edit tseq train '$c["seq"] = "1e308"'
nodraw tseq train-context
edit sco sco '$c["tok_s_gpu"] = "-"; $c["time_ms"] = "nan"'
nodraw sco sco-budget-0
edit vocab vocab '$c["tokens"] = "1e308"'
nodraw vocab vocab
edit att attention '$c["tflops"] = "nan"'
nodraw att attention_tflops
edit att2 attention '$c["time_ms"] = "zz"; $c["tflops"] = "inf"'
nodraw att2 attention_tflops
# the untouched reference draws every chart, none said not drawn
mkdir -p "$tmp/ref" && cp "$ROOT"/results/reference/cpu/*.tsv "$tmp/ref/"
"$BIN" report "$tmp/ref" >"$tmp/ref.out" 2>"$tmp/ref.err"
rc=$?
[[ $rc == 0 ]] && ! grep -q "not drawn" "$tmp/ref.out" && [[ $(grep -c '\.svg$' "$tmp/ref.out") -ge 8 ]] && pass ||
  fail "the reference: exit $rc, $(grep -c '\.svg$' "$tmp/ref.out") charts, $(grep 'not drawn' "$tmp/ref.out" | head -2)"
echo "test_report_nocharts.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
