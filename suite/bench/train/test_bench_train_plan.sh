#!/usr/bin/env bash
# test_bench_train_plan.sh — `plateau bench train` consults the planner
# (engine/plan) before it launches a point, on the CPU backend with the tiny
# model:
#  - every row carries pred_dev_peak_bytes, pred_host_bytes, pred_time_ms,
#    and the predicted peaks are within 5% of the measured ones, plateau and
#    fsdp2, one rank and two (D, P, SCO, cp, ep, AC modes, the CPU
#    optimizer, micro-batches);
#  - a --mem-limit the plan predicts too small: the point is an infeasible
#    row naming the binding term, not launched, exit 0; with --verify it is
#    launched and its oom row carries the prediction and the verdict;
#  - --config auto: the planner's choice per context (kind auto, the choice
#    in the note, the knob columns it set), ok rows within 5%; --step-tokens
#    keeps the tokens per step (the micro-batches follow the layout);
#  - the headroom knobs: --optim-resident auto --keep auto fill a
#    --mem-limit (the columns, the note, the peak within the limit and within
#    5% of the prediction); without them nothing is resident or kept; D = 2
#    with the attention kept and the state resident, two ranks;
#  - --describe: fsdp2 prints the planner's per-rank budget (the baseline
#    has no description), plateau its description and the budget; nothing
#    written;
#  - bad planner options exit 2 and write nothing;
#  - `plateau report`: the "Prediction vs measurement" table, the refused
#    point shown as not launched, the --verify oom as the plan said, and on
#    synthetic GPU rows the memory (5%) and step (15%) targets flagged.
# Usage: BUILD=build bash suite/bench/train/test_bench_train_plan.sh   (run from anywhere)
set -uo pipefail
PL_TEST=test_bench_train_plan.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

runs=$tmp/runs
# rows FILE EXPR: print EXPR (awk, columns as c["name"]) for every data row
rows() {
  awk -F'\t' -v OFS='\t' "/^#/ {next} !h {for (i = 1; i <= NF; i++) c[\$i] = i; h = 1; next} {print $2}" "$1"
}
# run NAME CMD...: a run into $runs/NAME (exit 0 expected); sets f
run() {
  local name=$1
  shift
  "$@" -o "$runs/$name" </dev/null >"$tmp/$name.out" 2>&1
  local rc=$?
  f=$(ls "$runs/$name"/train.*.tsv 2>/dev/null | head -1)
  if [[ $rc -ne 0 || -z $f ]]; then
    fail "$name: exit $rc, file '$f'"; tail -5 "$tmp/$name.out"; f=/dev/null
  fi
}
# within NAME: every ok row's predicted peaks within 5% of the measured
within() {
  local bad
  bad=$(rows "$f" '$c["status"] != "ok" ? "" : ($c["pred_dev_peak_bytes"] == "-" || $c["pred_host_bytes"] == "-" ||
    $c["pred_time_ms"] <= 0 || ($c["pred_dev_peak_bytes"] - $c["dev_peak_bytes"])^2 > (0.05 * $c["dev_peak_bytes"])^2 ||
    ($c["pred_host_bytes"] - $c["host_peak_bytes"])^2 > (0.05 * $c["host_peak_bytes"])^2 ? $c["system"] " S=" $c["seq"] ": predicted " \
    $c["pred_dev_peak_bytes"] " / " $c["pred_host_bytes"] ", measured " $c["dev_peak_bytes"] " / " $c["host_peak_bytes"] : "")' | grep .)
  local n
  n=$(rows "$f" '$c["status"]' | grep -c '^ok$')
  [[ -z $bad && $n -ge $2 ]] && pass || { fail "$1: $n ok rows, outside 5%: $bad"; }
}
B=("$BIN" bench train --backend cpu --preset cpu -w 0 -n 1)

echo "== the prediction beside every row, within 5%"
run one "${B[@]}" --system plateau,fsdp2
within one 4
rows "$f" '$c["note"]' | grep -c '^plan: fits (device peak' | grep -qx 4 && pass || fail "one: the notes lack the plan's verdict"
run two $MPIRUN -np 2 "${B[@]}" --seq 64 --system plateau,fsdp2 -P 2 --sco-budget all --cp 2 --ep 2 \
  --ac none --fsdp2-optim cpu --micro 2
within two 2
run two_b $MPIRUN -np 2 "${B[@]}" --seq 128 --system plateau,fsdp2 -D 2 --dispatch ep --ep 2 --ac selective
within two_b 2

echo "== a --mem-limit the plan refuses: infeasible, the binding term; --verify runs it"
run refuse "${B[@]}" --system plateau,fsdp2 --seq 64,512 --mem-limit 6Mi
got=$(rows "$f" '$c["system"] ":" $c["seq"] ":" $c["status"]' | tr '\n' ' ')
[[ $got == "plateau:64:ok fsdp2:64:ok plateau:512:infeasible fsdp2:512:infeasible " ]] && pass || fail "refuse: rows '$got'"
bad=$(rows "$f" '$c["status"] != "infeasible" ? "" : ($c["pred_dev_peak_bytes"] > 6 * 1048576 && $c["dev_peak_bytes"] == "-" &&
  $c["note"] ~ /^plan: does not fit, binding term [a-z_]*: device peak .* > 6.00 MiB usable .*not launched; --verify runs it/ ? "" : $0)' | grep .)
[[ -z $bad ]] && pass || { fail "refuse: the infeasible rows"; echo "$bad"; }
run verify "${B[@]}" --system plateau,fsdp2 --seq 512 --mem-limit 6Mi --verify
bad=$(rows "$f" '($c["status"] == "oom" && $c["pred_dev_peak_bytes"] > 6 * 1048576 && $c["pred_time_ms"] > 0 &&
  $c["note"] ~ /PL_ENOMEM.*; plan: does not fit, binding term/) ? "" : $0' | grep .)
[[ -z $bad && $(rows "$f" '$c["status"]' | grep -c oom) -eq 2 ]] && pass || { fail "verify: not two oom rows with the prediction"; echo "$bad"; }

echo "== --config auto: the planner's choice"
run auto "${B[@]}" --system plateau,fsdp2 --seq 128,256 --config auto
within auto 4
bad=$(rows "$f" '$c["kind"] == "auto" && $c["note"] ~ /^--config auto: .* \([0-9]+ tried, [0-9]+ fit, [0-9]+ skipped; [0-9]+ tok\/s\/GPU predicted\); (headroom fill below .*; )?plan: fits/ ? "" : $0' | grep .)
[[ -z $bad ]] && pass || { fail "auto: kind or note"; echo "$bad"; }
# the choice is in the knob columns: plateau's head and optim as the note says
rows "$f" '$c["system"] != "plateau" ? "" : (index($c["note"], "head=" $c["head"] " optim=" $c["optim"]) ? "y" : "n")' | grep -q n &&
  fail "auto: plateau's columns differ from the choice in the note" || pass
run auto2 $MPIRUN -np 2 "${B[@]}" --system fsdp2 --seq 128 --config auto --step-tokens 512
got=$(rows "$f" '$c["kind"] " " $c["status"] " " $c["step_tokens"] " " ($c["micro"] * $c["tokens"] * $c["virtual_world"])' | tr '\n' ' ')
[[ $got == "auto ok 512 512 " ]] && pass || fail "auto --step-tokens 512: '$got'"
within auto2 1

echo "== the headroom knobs: auto fills below the limit, the prediction within 5%"
run fill "${B[@]}" --seq 64,128 --mem-limit 8Mi --optim-resident auto --keep auto
within fill 2
bad=$(rows "$f" '($c["variant"] ~ /\/res=auto\/keep=auto$/ && $c["optim_resident"] == "auto" && $c["keep"] == "auto" &&
  $c["resident_params"] > 0 && $c["kept_attn"] == 3 && $c["kept_bytes"] > 0 && $c["dev_peak_bytes"] <= 8 * 1048576 &&
  $c["recompute_ms"] != "-" && $c["note"] ~ /^headroom fill below 8.0 MiB: kept 1\/1 buckets .*; plan: fits/) ? "" : $0' | grep .)
[[ -z $bad ]] && pass || { fail "fill: the knobs' columns and note"; echo "$bad" | cut -c1-300; }
run fill0 "${B[@]}" --seq 64,128 --mem-limit 8Mi
got=$(rows "$f" '$c["variant"] " " $c["resident_params"] " " $c["kept_attn"] " " $c["kept_bytes"]' | tr '\n' ' ')
[[ $got == "pllep/ring/stream/sco=0/mb1 0 0 0 pllep/ring/stream/sco=0/mb1 0 0 0 " ]] && pass || fail "fill0: today's defaults changed: '$got'"
run fill2 $MPIRUN -np 2 "${B[@]}" --seq 128 -D 2 --keep attn --optim-resident all --sco-budget all
within fill2 1
got=$(rows "$f" '$c["status"] " " ($c["resident_params"] == $c["params"]) " " $c["kept_attn"] " " $c["kept_full"]' | tr '\n' ' ')
[[ $got == "ok 1 3 0 " ]] && pass || fail "fill2 (D=2, keep attn, all resident): '$got'"

echo "== --describe: the planner's budget"
out=$("${B[@]}" --system fsdp2 --seq 128 --describe -o "$tmp/describe" 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"the baseline has no pl_train_describe"* && $out == *"per-rank device memory at the peak"* &&
  $out == *"live set by allocator tag: "* && $out == *"dense CE on full logits"* && $out == *$'\nfits: '* &&
  $out == *"predicted step: "* && ! -e $tmp/describe ]] && pass || { fail "fsdp2 --describe (exit $rc):"; echo "$out" | head -8; }
out=$("${B[@]}" --seq 128 --mem-limit 2Mi --describe -o "$tmp/describe" 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"# device: states"* && $out == *"per-rank device memory at the peak"* &&
  $out == *"DOES NOT FIT — binding term: "* && ! -e $tmp/describe ]] && pass || { fail "plateau --describe (exit $rc):"; echo "$out" | head -8; }

echo "== bad planner options: exit 2, nothing written"
while read -r args; do
  rm -rf "$tmp/bad"
  "${B[@]}" -o "$tmp/bad" $args </dev/null >"$tmp/bad.out" 2>&1
  rc=$?
  [[ $rc -eq 2 && ! -e $tmp/bad ]] && pass || { fail "$args: exit $rc (want 2)"; tail -2 "$tmp/bad.out"; }
done <<'EOF'
--config sometimes
--config auto --tune
--config auto --tokens 64
--config auto --points peer
--config auto --head dense
--step-tokens 512
--config auto --step-tokens 100
--config auto --step-tokens 512 --micro 2
--config auto --virtual-world 2 --step-tokens 511
EOF

echo "== plateau report: prediction vs measurement"
"$BIN" report "$runs" >"$tmp/report.out" 2>&1 || { fail "report: exit $?"; tail -3 "$tmp/report.out"; }
md=$runs/report/train.md
sec=$(awk '/^## Prediction vs measurement/ {on = 1; next} /^## / {on = 0} on' "$md" 2>/dev/null)
[[ -n $sec ]] && pass || fail "train.md: no prediction section"
[[ $(grep -c '^| [0-9]* | tiny | [0-9]* | [a-z0-9]* | .* | ok | .*(+0\.[0-9]%).*| (CPU time) |$' <<<"$sec") -ge 12 ]] && pass ||
  { fail "prediction rows of the CPU runs"; grep '^| [0-9]* | tiny' <<<"$sec" | head -3; }
[[ $(grep -c '^| [0-9]* | tiny | 512 | [a-z0-9]* | .* | infeasible (plan: not launched) | [0-9.]* MiB / - | .* / - | [0-9.]* / - | - |$' <<<"$sec") -eq 2 ]] && pass ||
  { fail "the refused point"; grep '| 512 |' <<<"$sec"; }
[[ $(grep -c '^| [0-9]* | tiny | 512 | [a-z0-9]* | .* | oom (as the plan said) | ' <<<"$sec") -eq 2 ]] && pass || fail "the --verify oom rows"
grep -q '^[0-9]* row(s) with a prediction, 0 flagged. Largest memory error [0-4]\.[0-9]% over [0-9]* measured row(s) (target 5%); CPU rows: ' <<<"$sec" &&
  pass || { fail "the summary line"; tail -1 <<<"$sec"; }
# synthetic GPU rows: one within the targets, one 9% over on the device
# peak and 30% on the step, one predicted to fit that ran out of memory
syn=$tmp/syn
mkdir -p "$syn"
{
  printf '# plateau-results: 2\n# bench: train\n# backend: cuda\n'
  printf 'system\tmodel\tvariant\tkind\tranks\tvirtual_world\tseq\ttokens\tmicro\tstep_tokens\ttok_s_gpu\ttflops\tdev_peak_bytes\thost_peak_bytes\ttime_ms\tpred_dev_peak_bytes\tpred_host_bytes\tpred_time_ms\tstatus\tcheck\tnote\n'
  printf 'plateau\t120b\tv1\trun\t1\t16\t32768\t32768\t1\t524288\t1000\t100\t6e10\t9e10\t1000\t6.1e10\t9e10\t1100\tok\tpass\tplan: fits\n'
  printf 'plateau\t120b\tv1\trun\t1\t16\t65536\t65536\t1\t1048576\t1000\t100\t1e11\t9e10\t2000\t1.09e11\t9e10\t2600\tok\tpass\tplan: fits\n'
  printf 'fsdp2\t120b\tv2\trun\t1\t16\t65536\t65536\t1\t1048576\t-\t-\t-\t-\t-\t1.2e11\t1.2e11\t900\toom\tskip\tout of memory; plan: fits\n'
  printf '# end: ok\n'
} >"$syn/train.1.tsv"
"$BIN" report "$syn" >"$tmp/syn.out" 2>&1 || { fail "report of the synthetic rows: exit $?"; tail -3 "$tmp/syn.out"; }
sec=$(awk '/^## Prediction vs measurement/ {on = 1; next} /^## / {on = 0} on' "$syn/report/train.md" 2>/dev/null)
grep -qF '| 0 | 120b | 32K | plateau | v1 | run | 1 / 16 | ok | 56.81 GiB / 55.88 GiB (+1.7%) | 83.82 GiB / 83.82 GiB (+0.0%) | 1100 / 1000 (+10.0%) | - |' <<<"$sec" &&
  pass || { fail "synthetic row within the targets"; grep '| 32K |' <<<"$sec"; }
grep -q '^| 0 | 120b | 64K | plateau | v1 | run | 1 / 16 | ok | .* (+9\.0%) | .* (+30\.0%) | mem time |$' <<<"$sec" && pass ||
  { fail "synthetic row outside the targets"; grep '| 64K | plateau' <<<"$sec"; }
grep -q '^| 0 | 120b | 64K | fsdp2 | v2 | run | 1 / 16 | oom | .* | fit |$' <<<"$sec" && pass || { fail "an oom the plan said fits"; grep '| fsdp2 |' <<<"$sec"; }
grep -qF '3 row(s) with a prediction, 2 flagged. Largest memory error 9.0% over 2 measured row(s) (target 5%); largest GPU step error 30.0% over 2 row(s) (target 15%).' <<<"$sec" &&
  pass || { fail "synthetic summary"; tail -1 <<<"$sec"; }

if [[ $nfail -eq 0 ]]; then echo "$PL_TEST: all $npass passed"; exit 0; fi
echo "$PL_TEST: $nfail failed, $npass passed"
exit 1
