#!/usr/bin/env bash
# test_plan.sh — `plateau plan`: a configuration that fits exits 0 and prints
# the budget table (every Eq. 6 term, the total against HBM, the host, the
# time and the runner-up of the automatic choice); one that does not exits 1
# and names its binding term; --format tsv writes the schema's columns;
# FSDP2 too; a calib result file changes the machine; bad values exit 2 with
# a message naming the value and write nothing on stdout; --table paper -o
# DIR writes the Markdown, the TSVs and (with gnuplot) the reach chart, and
# analysis/plan_reach.gp renders a small reach file.
# Usage: BUILD=build bash suite/test_plan.sh
set -uo pipefail
PL_TEST=test_plan.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"

# fits: exit 0, the table's parts
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki 2>&1); rc=$?
[[ $rc -eq 0 ]] && pass || fail "120b/16/128K: exit $rc: $out"
for want in "per-rank device memory at the peak" "weights" "grads" "dispatch" \
  "resident" "total" "usable" "host memory per node" "fits:" "tok/s/GPU" \
  "runner-up:" "configuration (chosen:"; do
  [[ $out == *"$want"* ]] && pass || fail "table lacks '$want'"
done

# explicit and too long: exit 1, the binding term named
out=$("$BIN" plan --config explicit --seq 1Mi 2>&1); rc=$?
[[ $rc -eq 1 ]] && pass || fail "explicit 1M: exit $rc (want 1)"
[[ $out == *"DOES NOT FIT — binding term: acts"* ]] && pass || fail "no binding term: $out"

# tsv: the header and one row, the schema's names
"$BIN" plan --format tsv --seq 64Ki >"$tmp/p.tsv" 2>&1 || fail "tsv exit $?"
[[ $(wc -l <"$tmp/p.tsv") -eq 2 ]] && pass || fail "tsv: $(wc -l <"$tmp/p.tsv") lines"
hdr=$(head -1 "$tmp/p.tsv")
for col in bench variant ranks seq tokens status dev_peak_bytes dispatch_bytes \
  logits_bytes boundary_bytes time_ms tok_s_gpu tflops live_set note; do
  [[ $'\t'$hdr$'\t' == *$'\t'$col$'\t'* ]] && pass || fail "tsv lacks column $col"
done
[[ $(cut -f10 "$tmp/p.tsv" | tail -1) == ok ]] && pass || fail "tsv status"

# fsdp2: fits at 32K on 16 GPUs, its own formulas
out=$("$BIN" plan --system fsdp2 --seq 32Ki 2>&1); rc=$?
[[ $rc -eq 0 && $out == *"cp="* && $out == *"dense CE"* ]] && pass || fail "fsdp2: exit $rc: $out"
out=$("$BIN" plan --system fsdp2 --seq 1Mi 2>&1); rc=$?
[[ $rc -eq 1 && $out == *"no configuration fits"* ]] && pass || fail "fsdp2 1M: exit $rc: $out"

# the machine from a calib result file
cal=$(ls "$ROOT"/results/reference/h200/2026-11-30/calib.*.tsv 2>/dev/null | head -1)
if [[ -n $cal ]]; then
  out=$("$BIN" plan --machine --calib "$cal" 2>&1)
  [[ $out == *"machine: $cal"* && $out == *"gemm_tflops=754.529"* ]] && pass || fail "calib not read: $out"
fi
out=$("$BIN" plan --machine --set ib_gbs=25,coll_us=5 2>&1)
[[ $out == *"ib_gbs=25"* && $out == *"coll_us=5"* ]] && pass || fail "--set: $out"

# bad input: exit 2, the value named, nothing on stdout
bad() {
  local want=$1
  shift
  local o e rc
  o=$("$BIN" plan "$@" 2>"$tmp/err"); rc=$?
  e=$(cat "$tmp/err")
  [[ $rc -eq 2 ]] && pass || fail "plan $* -> exit $rc (want 2)"
  [[ -z $o ]] && pass || fail "plan $* wrote to stdout"
  [[ $e == *"$want"* ]] && pass || fail "plan $*: message '$e' lacks '$want'"
}
bad "--gpus=0" --gpus 0
bad "999b" --model 999b
bad "12Q" --seq 12Q
bad "D=16" --D 16
bad "--cp=3" --system fsdp2 --cp 3
bad "--D: a knob of plateau" --system fsdp2 --D 2
bad "--ep=8" --ep 8
bad "--sco=lots" --sco lots
bad "unknown key 'warp'" --set warp=9
bad "--tokens=1000" --tokens 1000 --D 1
bad "/nonexistent" --calib /nonexistent/calib.tsv
"$BIN" plan --help >/dev/null 2>&1 && pass || fail "--help"

# the reach chart from a small file (columns by name)
if command -v gnuplot >/dev/null; then
  printf '# reach\nmodel\tranks\tsystem\tmax_context\tmax_tokens_step\tpaper_max_context\n' >"$tmp/r.tsv"
  for m in 120b 241b 667b; do
    printf '%s\t16\tplateau\t1048576\t1\t1048576\n%s\t32\tplateau\t2097152\t1\t-\n' $m $m >>"$tmp/r.tsv"
    printf '%s\t16\tfsdp2\t131072\t1\t131072\n%s\t32\tfsdp2\t-\t0\t-\n' $m $m >>"$tmp/r.tsv"
  done
  gnuplot -c "$ROOT/analysis/plan_reach.gp" "$tmp/r.tsv" "$tmp/r.svg" >/dev/null 2>&1 && pass || fail "plan_reach.gp failed"
  [[ -s $tmp/r.svg && $(grep -c '<path' "$tmp/r.svg") -gt 10 ]] && pass || fail "no chart drawn"
  [[ $(grep -c 'FSDP2-best' "$tmp/r.svg") -gt 0 ]] && pass || fail "chart lacks its titles"
fi

# the paper's table: files, the paper's figures beside ours, the chart
if "$BIN" plan --table paper -o "$tmp/paper" >"$tmp/paper.out" 2>&1; then pass; else fail "table: $(cat "$tmp/paper.out")"; fi
md=$tmp/paper/plan_paper.md
[[ -s $md && $(grep -c projection "$md") -gt 0 ]] && pass || fail "no Markdown"
grep -q "| 120b | 16 | 128K |.*| 1355 (91) | 178 (7.6× less) |" "$md" && pass || fail "paper's 120B/128K figures missing"
grep -q "| 667b | 64 | 1M |.*| 124 (233) | OOM |" "$md" && pass || fail "paper's 667B/1M figures missing"
grep -q "| 241b | 32 | .* | 32K | .* | 1.8M (7×) |" "$md" && pass || fail "paper's 241B reach/batch missing"
[[ $(grep -c $'^plan\t' "$tmp/paper/plan_paper.tsv") -eq 108 ]] && pass || fail "plan_paper.tsv rows"
[[ $(grep -vc '^#' "$tmp/paper/plan_reach.tsv") -eq 19 ]] && pass || fail "plan_reach.tsv rows"
if command -v gnuplot >/dev/null; then
  [[ -s $tmp/paper/plan_reach.svg ]] && pass || fail "no plan_reach.svg"
fi

echo "test_plan.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
