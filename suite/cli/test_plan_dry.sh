#!/usr/bin/env bash
# test_plan_dry.sh — `plateau plan --memory dry|both`: the configuration the
# search chose, built on a dry device (one rank; a run of several GPUs as
# its one-GPU proxy) and stepped, against the replay.  On small
# configurations (the tiny model, a small MoE of 16 experts over 4 and 8
# GPUs with D and P, gpt-oss-20b on 8 GPUs, SCO with two micro-batches;
# machines cuda and cpu) `--memory both` must report the replay and the dry
# device equal: device peak, pinned host peak, every tag and every other
# field of the memory (terms, phase of the peak, worst case, host, facts).
# The paper's
# 120B on 16 GPUs at 128K, planned as the committed H200 row p120-128k of
# results/reference/h200x1/grid-cudnn was (the H200's memory; the 16-rank
# expert group and the stream optimizer the proxy's host had chosen, as
# suite/bench/train/test_bench_train_dry.sh adds), must measure that row's
# device and pinned host peaks to the byte under --memory dry, in seconds.
# Also: the default prints no measurement, --memory dry with --format tsv
# writes the measured peak, and a configuration the trainer refuses in one
# process exits 3 naming why.
# Usage: BUILD=build bash suite/cli/test_plan_dry.sh
set -uo pipefail
PL_TEST=test_plan_dry.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# --memory both on small configurations: equal
while read -r args; do
  [[ -z $args ]] && continue
  out=$("$BIN" plan $args --memory both 2>&1)
  rc=$?
  if [[ $rc -eq 0 && $out == *"memory: the replay and the dry device are equal"* &&
    $out == *"tags: all "*" equal"* && $out == *"every field equal: "* ]]; then
    pass
  else
    fail "plan $args --memory both: exit $rc: $(grep -A8 '^memory replayed' <<<"$out")"
  fi
done <<'CASES'
--model tiny --gpus 1 --seq 4Ki
--model tiny --gpus 1 --seq 4Ki --backend cpu
--model tiny --experts 16 --topk 4 --gpus 4 --seq 16Ki
--model tiny --experts 16 --topk 4 --gpus 8 --seq 16Ki --D 2 --P 2 --ep 8
--model tiny --gpus 2 --seq 8Ki --sco all --micro 2 --backend cpu
--model gpt-oss-20b --gpus 8 --seq 32Ki
CASES

# the default is the replay alone
out=$("$BIN" plan --model tiny --gpus 1 --seq 4Ki 2>&1)
[[ $out != *"dry device"* ]] && pass || fail "the default printed a dry measurement"

# the committed H200 row p120-128k, planned the way that row was
ref=$ROOT/results/reference/h200x1/grid-cudnn
row=$(grep -l '^# point: p120-128k$' "$ref"/train.*.tsv | head -1)
col() {
  awk -F'\t' -v n="$2" '/^#/ {next} !h {for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next} {print $c[n]; exit}' "$1"
}
want_dev=$(col "$row" dev_peak_bytes)
want_host=$(col "$row" host_peak_bytes)
hbm=$(sed -n 's/^# device_memory_bytes: //p' "$row")
p120=(--model 120b --gpus 16 --seq 128Ki --hbm "$hbm" --head fused --ep 16 --optim stream)
t0=$(date +%s.%N)
out=$("$BIN" plan "${p120[@]}" --memory dry 2>&1)
rc=$?
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
echo "  p120-128k --memory dry: ${secs} s (row: device $want_dev, host $want_host)"
[[ $rc -eq 0 ]] && pass || fail "p120-128k --memory dry: exit $rc: $out"
[[ $out == *"device peak $want_dev B"*", pinned host $want_host B"* ]] && pass ||
  fail "p120-128k: the dry device's peaks are not the row's: $(grep -A3 '^memory above' <<<"$out")"
[[ $out == *"D=1 P=1 Ep=16 c=2048 beta=25M s=2 sco=all head=fused optim=stream"* ]] &&
  pass || fail "p120-128k: not the row's configuration: $(grep configuration <<<"$out")"
"$BIN" plan "${p120[@]}" --memory dry --format tsv >"$tmp/p.tsv" 2>&1
[[ $(col "$tmp/p.tsv" dev_peak_bytes) == "$want_dev" ]] && pass ||
  fail "p120-128k tsv: dev_peak_bytes $(col "$tmp/p.tsv" dev_peak_bytes), want $want_dev"

# a configuration one process cannot build: exit 3, the reason named
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki --ep 8 --memory dry 2>&1)
rc=$?
[[ $rc -eq 3 && $out == *"cannot be measured on a dry device"*"Ep=8"* ]] && pass ||
  fail "--ep 8 of a 16-GPU proxy: exit $rc: $out"

if [[ $nfail -eq 0 ]]; then echo "$PL_TEST: all $npass passed"; exit 0; fi
echo "$PL_TEST: $nfail failed, $npass passed"
exit 1
