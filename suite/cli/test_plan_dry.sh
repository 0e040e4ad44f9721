#!/usr/bin/env bash
# test_plan_dry.sh — `plateau plan --memory dry|both`: the configuration the
# search chose, built on a dry device (one rank; a run of several GPUs as
# the rank view of its rank 0, train/layout.h) and stepped, against the
# replay.  On small configurations (the tiny model, a small MoE of 16
# experts over 4 and 8 GPUs with D and P, SCO with two micro-batches;
# machines cuda and cpu) `--memory both` must report the replay and the dry
# device equal: device peak, pinned host peak, every tag and every other
# field of the memory (terms, phase of the peak, worst case, host, facts).
# On gpt-oss-20b over 8 GPUs the device and pinned host peaks must be equal while the
# routing-sized tags may differ at their own peaks: the replay routes every
# chunk as if a rank received what it sends, the real step (and the rank
# view) each chunk's own counts.  The paper's 120B on 16 GPUs at 128K,
# planned as the committed H200 row p120-128k of
# results/reference/h200x1/grid-cudnn was (the H200's memory; the 16-rank
# expert group and the stream optimizer the proxy's host had chosen, as
# suite/bench/train/test_bench_train_dry.sh adds), must measure under
# --memory dry what `bench train --backend dry --rank-view` measures for
# that row's arguments — the row's own (proxy) peaks plus the router of a
# real rank (over all E experts, not E/W_v: above the row), in seconds.
# Also: the default measures (--memory replay and --imb do not), --memory dry with --format tsv
# writes the measured peak, a 16-GPU run of expert groups of 8 (a virtual
# expert group in one process) is measured, and on the paper's points of
# every model at 128K and 1M, both systems (analysis/plan_measured.sh), the
# search's replay and the measurement give the same verdicts, device peaks
# within 0.01% and equal pinned host peaks; `--table paper` (measured by default)
# (every search of the table measured) chooses at every point what the
# replayed table chooses, device peaks within 0.01%.
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
--model tiny --gpus 2 --seq 8Ki --sco all --micro 2 --backend cpu
CASES

# fewer experts on a rank than routes per token (E/W_v = 2 < k = 4): the
# replay's worst case is the cap's bound (all k routes of every token to
# this rank), the dry device's the worst routes can do (2 of the 4): lower
out=$("$BIN" plan --model tiny --experts 16 --topk 4 --gpus 8 --seq 16Ki --D 2 --P 2 --ep 8 \
  --memory both 2>&1)
diffs=$(awk '/^  fields that differ/ {on = 1; next} on && /^    / {print} /^memory:/ {on = 0}' <<<"$out")
worst=$(awk '/^    dev_worst:/ {print ($4 < $2)}' <<<"$diffs")
[[ $out == *"tags: all "*" equal"* && $(wc -l <<<"$diffs") -eq 1 && $worst == 1 ]] && pass ||
  fail "E/W_v < k --memory both: $(grep -A10 '^memory replayed' <<<"$out")"

# routing-sized tags aside, equal
out=$("$BIN" plan --model gpt-oss-20b --gpus 8 --seq 32Ki --memory both 2>&1)
dev=$(awk '/^  device peak  replay/ {print ($4 == $6)}' <<<"$out")
host=$(awk '/^  pinned host  replay/ {print ($4 == $6)}' <<<"$out")
others=$(awk '/^  tags that differ/ {on = 1; next} /^  [a-z]/ {on = 0} on && /^    / {print $1}' <<<"$out" |
  grep -cvE '^(dispatch|expert|routing)$')
[[ $dev == 1 && $host == 1 && $others == 0 ]] && pass ||
  fail "gpt-oss-20b 8 GPUs --memory both: $(grep -A8 '^memory replayed' <<<"$out")"

# the default measures; --memory replay and --imb (balanced routes only)
# keep the replay, --imb saying so
out=$("$BIN" plan --model tiny --gpus 1 --seq 4Ki 2>&1)
[[ $out == *"memory above: measured by one step on a dry device"* ]] && pass ||
  fail "the default printed no dry measurement"

# a context no dry device can hold (petabytes of pinned boundaries): the
# search and the memory fall back to the replay, whose "does not fit"
# stands (exit 1), and the output says why
out=$("$BIN" plan --seq 1Ti 2>&1)
rc=$?
[[ $rc -eq 1 && $out == *"memory above: replayed; a dry device could not build"*"address space"* &&
  $out == *"search: replayed; a dry device could not build its candidates: "*"address space"* ]] &&
  pass || fail "plan --seq 1Ti: exit $rc: $(tail -4 <<<"$out")"
# FSDP2 has no replay: under --search replay too its candidates are the
# baseline's dry measurements, one sequence per CP group per micro-batch
# (no mbs knob), and the choice's memory is measured
r=$("$BIN" plan --model tiny --gpus 4 --seq 16Ki --system fsdp2 --search replay 2>&1)
rc=$?
[[ $rc -eq 0 && $(grep '^# configuration' <<<"$r") == *" micro=1"* &&
  $(grep '^# configuration' <<<"$r") != *"mbs="* &&
  $r == *"memory above: measured by"* && $r != *"could not build"* ]] &&
  pass || fail "plan --system fsdp2 --search replay: exit $rc: $(grep -E '^# configuration|^memory' <<<"$r")"
# by default the search measures every candidate, none left out, and
# chooses what --search replay chooses
out=$("$BIN" plan --model tiny --gpus 4 --seq 16Ki --system fsdp2 2>&1)
rc=$?
[[ $rc -eq 0 && $(grep '^# configuration' <<<"$out") == "$(grep '^# configuration' <<<"$r")" &&
  $out == *"memory above: measured by"* && $out == *" 0 left out that it cannot build"* ]] &&
  pass || fail "plan --system fsdp2 (default search): exit $rc: $(grep -E '^# configuration|^search' <<<"$out")"

# --search dry (the default): every candidate measured on a dry device; on
# these points the same output as --search replay but for the search's line
# (the same choice, fill, memory and verdict)
# (the measurement's own time, on the "memory above" line, left out)
untimed() { sed -E 's/; [0-9.]+ s\)$/; T s)/'; }
for args in "--gpus 4 --seq 16Ki" "--gpus 8 --seq 32Ki --model gpt-oss-20b"; do
  r=$("$BIN" plan --model tiny $args --search replay 2>&1 | untimed)
  d=$("$BIN" plan --model tiny $args --search dry 2>&1)
  rc=$?
  d=$(untimed <<<"$d")
  [[ $rc -eq 0 && $d == *"search: every candidate's memory measured on a dry device ("*" tried, "*" measured, 0 left out"* &&
    $(diff <(echo "$r") <(echo "$d") | grep -E '^[<>] .' | grep -vc '^> search: ') -eq 0 ]] && pass ||
    fail "plan $args --search dry: exit $rc: $(diff <(echo "$r") <(echo "$d") | head -8)"
done
out=$("$BIN" plan --model tiny --gpus 1 --seq 4Ki --memory replay --search replay 2>&1)
[[ $out != *"dry device"* ]] && pass || fail "--memory replay --search replay printed a dry measurement"
out=$("$BIN" plan --model tiny --gpus 2 --seq 4Ki --imb 1.5 2>&1)
[[ $out == *"memory above: replayed (--imb"* && $out != *"measured by"* ]] && pass ||
  fail "--imb 1.5: $(tail -3 <<<"$out")"

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
[[ $out == *"D=1 P=1 Ep=16 c=2048 beta=25M s=2 sco=all head=fused optim=stream"* ]] &&
  pass || fail "p120-128k: not the row's configuration: $(grep configuration <<<"$out")"
"$BIN" plan "${p120[@]}" --memory dry --format tsv >"$tmp/p.tsv" 2>&1
got_dev=$(col "$tmp/p.tsv" dev_peak_bytes)
# the row's arguments on the dry device as the rank view
argv=$(sed -n 's/^# argv: [^ ]* //p' "$row")
read -r -a opts <<<"$(sed -e 's/ -o [^ ]*//' -e 's/ --point [^ ]*//' \
  -e 's/--backend cuda/--backend dry/' <<<"$argv")"
"$BIN" "${opts[@]}" --host-mem 2Ti --optim stream --rank-view -o "$tmp/rv" \
  </dev/null >"$tmp/rv.log" 2>&1 || fail "bench train --rank-view: exit $?: $(tail -3 "$tmp/rv.log")"
rv=$(ls "$tmp"/rv/train.*.tsv 2>/dev/null | head -1)
rv_dev=$([[ -n $rv ]] && col "$rv" dev_peak_bytes)
rv_host=$([[ -n $rv ]] && col "$rv" host_peak_bytes)
[[ -n $rv_dev && $got_dev == "$rv_dev" && $out == *"device peak $rv_dev B"*", pinned host $rv_host B"* ]] &&
  pass || fail "p120-128k: plan --memory dry $got_dev, bench train --rank-view ${rv_dev:-none}"
[[ -n $rv_dev && $rv_dev -gt $want_dev && $rv_host -ge $want_host ]] && pass ||
  fail "p120-128k: the rank view (device ${rv_dev:-none}, host ${rv_host:-none}) against the row's proxy (device $want_dev, host $want_host)"

# expert groups of 8 in a 16-GPU run: one process plays its rank 0 with a
# virtual expert group
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki --ep 8 --memory dry 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"Ep=8"* && $out == *"memory above: measured by one step on a dry device"* ]] &&
  pass || fail "--ep 8 of a 16-GPU run: exit $rc: $(tail -5 <<<"$out")"

# the search's estimate against the measurement on paper points of every
# model and system (analysis/plan_measured.sh): the same verdicts, device
# peaks within 0.01%, pinned host equal
sum=$(BUILD=$BUILD bash "$ROOT/analysis/plan_measured.sh" --models 120b,241b,667b --gpus 16,32,64 \
  --seqs 128Ki,1Mi "$tmp/pm.tsv" 2>&1)
bad=$(awk -F'\t' 'NR > 1 && ($6 == "-" || $6 != $7 || $14 != $13 ||
  ($9 - $8) * ($9 - $8) > (1e-4 * $8) * (1e-4 * $8)) {print $1 "/" $2 "/" $3 "/" $4}' "$tmp/pm.tsv")
n=$(($(wc -l <"$tmp/pm.tsv") - 1))
[[ $n -eq 36 && -z $bad ]] && pass || fail "plan_measured.sh: $n points, differ: ${bad:-none}; $sum"
echo "  $(head -1 <<<"$sum")"

# --table paper (measured by default): every search of the table measured,
# on the table's threads (under a minute on two cores): at every point the
# same choice, throughput and verdict as the replayed table (--search
# replay), device peaks within 0.01%, and the files say the memory was
# measured
"$BIN" plan --table paper --format tsv --search replay >"$tmp/tr.tsv" 2>/dev/null
t0=$(date +%s)
"$BIN" plan --table paper --format tsv >"$tmp/td.tsv" 2>"$tmp/td.err"
rc=$?
bad=$(paste "$tmp/tr.tsv" "$tmp/td.tsv" | awk -F'\t' -v n=13 'NR > 2 {
  for (i = 1; i <= n; i++) if (i != 9 && $i != $(i + n)) {print $3 "/" $4 "/" $5 "/" $2 ": " $i " / " $(i + n); next}
  if ($9 != "-" && ($(9 + n) - $9) * ($(9 + n) - $9) > (1e-4 * $9) * (1e-4 * $9)) print $3 "/" $4 "/" $5 "/" $2 ": peak " $9 " / " $(9 + n)}')
rows=$(($(wc -l <"$tmp/td.tsv") - 2))
echo "  --table paper (measured): $rows points in $(($(date +%s) - t0)) s"
[[ $rc -eq 0 && $rows -eq 108 && -z $bad && $(head -1 "$tmp/td.tsv") == *"measured on a dry device"* &&
  $(head -1 "$tmp/tr.tsv") != *"dry device"* ]] &&
  pass || fail "--table paper: exit $rc, $rows rows; differ: $(head -3 <<<"$bad") $(tail -2 "$tmp/td.err")"

if [[ $nfail -eq 0 ]]; then echo "$PL_TEST: all $npass passed"; exit 0; fi
echo "$PL_TEST: $nfail failed, $npass passed"
exit 1
