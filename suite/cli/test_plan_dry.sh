#!/usr/bin/env bash
# test_plan_dry.sh — `plateau plan`'s memory is measured: every candidate's
# trainer (or the FSDP2 baseline) built on a dry device and stepped once, a
# run of several GPUs as the rank view of its rank 0 (train/layout.h).
#  - The plan says so, and how (the rank view, the search's measurements);
#    the FSDP2 plan too, none of its candidates left out.
#  - A context no dry device can even reserve is a verdict: exit 1, "does
#    not fit", not an error.
#  - --imb skews the routes toward the rank measured: plain EP's dispatch (the
#    FSDP2 baseline's too) receives the skew, LLEP's spreads it; the plan says so.
#  - The paper's 120B on 16 GPUs at 128K, planned as the committed H200 row
#    p120-128k of results/reference/h200x1/grid-cudnn was (the H200's
#    memory; the 16-rank expert group and the stream optimizer the proxy's
#    host had chosen), measures what `bench train --backend dry
#    --rank-view` measures for that row's arguments — the row's own (proxy)
#    peaks plus the router of a real rank (over all E experts, not E/W_v:
#    above the row).
#  - A 16-GPU run of expert groups of 8 (a virtual expert group in one
#    process) is measured.
#  - `--table paper`: every point, in under a minute or two on two cores,
#    the files saying the memory was measured.
#  - The options of the retired replay are refused (exit 2).
# Usage: BUILD=build bash suite/cli/test_plan_dry.sh
set -uo pipefail
PL_TEST=test_plan_dry.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

col() {
  awk -F'\t' -v n="$2" '/^#/ {next} !h {for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next} {print $c[n]; exit}' "$1"
}

# the plan says how its memory was measured
out=$("$BIN" plan --model tiny --gpus 1 --seq 4Ki 2>&1)
[[ $out == *"memory above: measured by one step of the trainer on a dry device (cuda)"* &&
  $out == *"search: every candidate's memory measured so ("*" tried, "*" measured, 0 left out"* ]] &&
  pass || fail "tiny on one GPU: $(tail -3 <<<"$out")"
out=$("$BIN" plan --model gpt-oss-20b --gpus 8 --seq 32Ki --backend cpu 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"measured by one step of the trainer on a dry device (cpu)"* &&
  $out == *"built as rank 0 of the 8-GPU run in one process (the rank view: W_v = 8"* ]] &&
  pass || fail "gpt-oss-20b on 8 GPUs: exit $rc: $(tail -4 <<<"$out")"
out=$("$BIN" plan --model tiny --gpus 4 --seq 16Ki --system fsdp2 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"memory above: measured by one step of the FSDP2 baseline on a dry device"* &&
  $out == *" 0 left out that it cannot build"* && $(grep '^# configuration' <<<"$out") != *"mbs="* ]] &&
  pass || fail "plan --system fsdp2: exit $rc: $(grep -E '^# configuration|^memory|^search' <<<"$out")"

# a context no dry device can hold (petabytes of pinned boundaries): does
# not fit (exit 1), said so, for both systems
for sys in plateau fsdp2; do
  out=$("$BIN" plan --seq 1Ti --system $sys 2>&1)
  rc=$?
  [[ $rc -eq 1 && $out == *"does not fit: its step asks for more than a dry device can even reserve"* ]] &&
    pass || fail "plan --seq 1Ti --system $sys: exit $rc: $(tail -2 <<<"$out")"
done

# --imb: the router's skew toward the rank measured; plain EP receives it
# (its dispatch buffers grow), LLEP spreads it (they stay)
disp() {
  "$BIN" plan --model tiny --gpus 2 --seq 4Ki --config explicit --dispatch "$1" --imb "$2" \
    --format tsv >"$tmp/i.tsv" 2>&1 && col "$tmp/i.tsv" dispatch_bytes
}
e1=$(disp ep 1) e2=$(disp ep 1.9) l1=$(disp pllep 1) l2=$(disp pllep 1.9)
echo "  --imb 1.9: ep dispatch ${e1:-?} -> ${e2:-?} B, pllep ${l1:-?} -> ${l2:-?} B"
[[ -n $e1 && -n $e2 && $(awk -v a="$e1" -v b="$e2" 'BEGIN {print (b >= 1.2 * a)}') == 1 &&
  -n $l1 && $l1 == "$l2" ]] && pass ||
  fail "--imb 1.9: ep dispatch ${e1:-none} -> ${e2:-none}, pllep ${l1:-none} -> ${l2:-none}"
# the FSDP2 baseline's plain EP receives it too
f1=$("$BIN" plan --model tiny --gpus 4 --seq 16Ki --system fsdp2 --config explicit --ep 4 --imb 1 \
  --format tsv 2>&1 >"$tmp/f1.tsv" && col "$tmp/f1.tsv" dispatch_bytes)
f2=$("$BIN" plan --model tiny --gpus 4 --seq 16Ki --system fsdp2 --config explicit --ep 4 --imb 1.5 \
  --format tsv 2>&1 >"$tmp/f2.tsv" && col "$tmp/f2.tsv" dispatch_bytes)
[[ -n $f1 && -n $f2 && $(awk -v a="$f1" -v b="$f2" 'BEGIN {print (b >= 1.4 * a)}') == 1 ]] && pass ||
  fail "fsdp2 --imb 1.5: dispatch ${f1:-none} -> ${f2:-none}"
out=$("$BIN" plan --model tiny --gpus 2 --seq 4Ki --imb 1.5 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"routes skewed: rank 0's experts sent 1.5 x their balanced share (--imb)"* ]] &&
  pass || fail "--imb 1.5: exit $rc: $(tail -4 <<<"$out")"

# the committed H200 row p120-128k, planned the way that row was
ref=$ROOT/results/reference/h200x1/grid-cudnn
row=$(grep -l '^# point: p120-128k$' "$ref"/train.*.tsv | head -1)
want_dev=$(col "$row" dev_peak_bytes)
want_host=$(col "$row" host_peak_bytes)
hbm=$(sed -n 's/^# device_memory_bytes: //p' "$row")
p120=(--model 120b --gpus 16 --seq 128Ki --hbm "$hbm" --head fused --ep 16 --optim stream)
t0=$(date +%s.%N)
"$BIN" plan "${p120[@]}" --format tsv >"$tmp/p.tsv" 2>&1
rc=$?
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
echo "  p120-128k plan: ${secs} s (row: device $want_dev, host $want_host)"
[[ $rc -eq 0 && $(col "$tmp/p.tsv" config) == *"D=1 P=1 Ep=16 c=2048 beta=25M s=2 sco=all head=fused optim=stream"* ]] &&
  pass || fail "p120-128k: exit $rc, not the row's configuration: $(col "$tmp/p.tsv" config)"
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
[[ -n $rv_dev && $got_dev == "$rv_dev" ]] &&
  pass || fail "p120-128k: plan $got_dev, bench train --rank-view ${rv_dev:-none}"
[[ -n $rv_dev && $rv_dev -gt $want_dev && $rv_host -ge $want_host ]] && pass ||
  fail "p120-128k: the rank view (device ${rv_dev:-none}, host ${rv_host:-none}) against the row's proxy (device $want_dev, host $want_host)"

# expert groups of 8 in a 16-GPU run: one process plays its rank 0 with a
# virtual expert group
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki --ep 8 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"Ep=8"* && $out == *"memory above: measured by one step of the trainer"* ]] &&
  pass || fail "--ep 8 of a 16-GPU run: exit $rc: $(tail -5 <<<"$out")"

# the options of the retired replay
for o in "--memory replay" "--search replay" "--mbs 2"; do
  out=$("$BIN" plan $o 2>&1)
  rc=$?
  [[ $rc -eq 2 && $out == *"unknown option '${o%% *}'"* ]] && pass || fail "plan $o: exit $rc: $out"
done

# --table paper: every search measured, on the table's threads
t0=$(date +%s)
"$BIN" plan --table paper --format tsv >"$tmp/td.tsv" 2>"$tmp/td.err"
rc=$?
rows=$(($(wc -l <"$tmp/td.tsv") - 2))
bad=$(awk -F'\t' 'NR > 2 && ($6 == "" || $6 == "error") {print $3 "/" $4 "/" $5 "/" $2}' "$tmp/td.tsv")
echo "  --table paper: $rows points in $(($(date +%s) - t0)) s"
[[ $rc -eq 0 && $rows -eq 108 && -z $bad && $(head -1 "$tmp/td.tsv") == *"measured on a dry device"* ]] &&
  pass || fail "--table paper: exit $rc, $rows rows; bad: $(head -3 <<<"$bad") $(tail -2 "$tmp/td.err")"

if [[ $nfail -eq 0 ]]; then echo "$PL_TEST: all $npass passed"; exit 0; fi
echo "$PL_TEST: $nfail failed, $npass passed"
exit 1
