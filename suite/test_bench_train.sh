#!/usr/bin/env bash
# test_bench_train.sh — `plateau bench train` end to end on the CPU backend
# (the tiny model, small contexts):
#  - the cpu preset on one rank: a row per context, ok, check pass with the
#    reference step compared (max_err a number), the losses of every step
#    (warm-ups first, the last = loss), the breakdown, rates, peaks within
#    the description's upper estimate (bound_bytes);
#  - mpirun -np 2, every switch once over a few runs (D, P, the dispatches,
#    the heads, SCO budgets, the optimizers, micro-batches, the chunk cap, a
#    token shard from `plateau tokens`, the proxy W_v > W): ok rows, the
#    switch columns as asked, the reference compared except in the proxy
#    (skip, said in the note); a context D does not divide is an infeasible
#    row, exit 0;
#  - --mem-limit: the point that does not fit is an oom row, exit 0;
#  - --describe prints the counts and per-rank bytes, exits 0, writes nothing;
#  - bad inputs exit 2 and write nothing;
#  - no run leaks device events (the device's destroy warning);
#  - `plateau report` writes the end-to-end table (report/train.md, the
#    paper's figures beside, labelled) and the chart data (and the chart
#    when gnuplot is installed); from synthetic 120B files of both systems
#    and their max-batch searches, the paper's layout and the plateau vs
#    FSDP2-best ratios with the paper's 7.6× / 8× / 12× beside;
#  - maxbatch --bench train with --mem-limit: trials in child processes
#    (mpirun -np 1: an OOM on one rank of several can leave the others in a
#    collective) forwarding the train options; the summary's bound has an ok
#    trial at it and an oom trial a step above; the train report lists the
#    search, not its trials; options of the other target exit 2.
# Usage: BUILD=build bash suite/test_bench_train.sh   (run from anywhere)
set -uo pipefail
PL_TEST=test_bench_train.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

runs=$tmp/runs
# rows FILE EXPR: print EXPR (awk, columns as c["name"]) for every data row;
# sel FILE COND: print the rows where COND holds
rows() {
  awk -F'\t' -v OFS='\t' "/^#/ {next} !h {for (i = 1; i <= NF; i++) c[\$i] = i; h = 1; next} {print $2}" "$1"
}
sel() {
  awk -F'\t' "/^#/ {next} !h {for (i = 1; i <= NF; i++) c[\$i] = i; h = 1; next} $2 {print}" "$1"
}
# run NAME CMD...: a run into $runs/NAME; its output in $tmp/NAME.out; sets f
run() {
  local name=$1
  shift
  "$@" -o "$runs/$name" </dev/null >"$tmp/$name.out" 2>&1
  local rc=$?
  f=$(ls "$runs/$name"/train.*.tsv 2>/dev/null | head -1)
  if [[ $rc -ne 0 || -z $f ]]; then
    fail "$name: exit $rc, file '$f'"; tail -5 "$tmp/$name.out"; f=/dev/null
  fi
  grep -q "not destroyed" "$tmp/$name.out" && fail "$name: leaked device objects: $(grep 'not destroyed' "$tmp/$name.out" | head -1)"
}
B=("$BIN" bench train --backend cpu)

echo "== the cpu preset, one rank"
run cpu "${B[@]}" --preset cpu
bad=$(sel "$f" '$c["status"] != "ok" || $c["check"] != "pass" || $c["max_err"] == "-" ||
  $c["note"] !~ /reference step compared/ || $c["tok_s_gpu"] <= 0 || $c["tflops"] <= 0 ||
  $c["attention_ms"] <= 0 || $c["moe_ms"] <= 0 || $c["head_ms"] <= 0 || $c["optimizer_ms"] <= 0 ||
  $c["dev_peak_bytes"] <= 0 || $c["dev_peak_bytes"] > $c["bound_bytes"] || $c["host_peak_bytes"] <= 0 ||
  $c["params_total"] != 223680 || split($c["losses"], l, ",") != 4 || l[4] != $c["loss"] ||
  $c["tokens"] != $c["seq"] || $c["system"] != "plateau" || $c["model"] != "tiny"')
n=$(rows "$f" '$c["seq"]' | tr '\n' ' ')
[[ -z $bad && $n == "64 128 " ]] && pass || { fail "cpu preset rows (seq: $n):"; echo "$bad"; }

echo "== every switch, two ranks"
M=($MPIRUN -np 2 "${B[@]}" --preset cpu --seq 64 -w 1 -n 2)
printf 'plateau bounds every memory peak of long-context MoE training. %.0s' {1..20} >"$tmp/text"
"$BIN" tokens "$tmp/text" "$tmp/text.tok" >/dev/null || fail "plateau tokens"
# name | options | the columns they must give (dispatch head optim budget D P micro virtual_world)
while IFS='|' read -r name opts want; do
  run "$name" "${M[@]}" $opts
  got=$(rows "$f" '$c["dispatch"], $c["head"], $c["optim"], $c["budget"], $c["D"], $c["P"], $c["micro"], $c["virtual_world"], $c["status"], $c["check"]' | tr '\t' ' ')
  [[ $got == "$want ok pass" ]] && pass || fail "$name: '$got', want '$want ok pass'"
  if [[ $name == proxy ]]; then
    rows "$f" '$c["note"]' | grep -q "reference step skipped: a proxy" && pass || fail "proxy: no skip note"
  else
    rows "$f" '$c["note"]' | grep -q "reference step compared" && pass || fail "$name: reference not compared"
  fi
done <<EOF
ulysses|-D 2 --dispatch llep --optim hybrid --sco-budget all|llep ring hybrid all 2 1 1 2
ringdtp|-P 2 --head vp --dispatch ep --optim cpu --micro 2 --data $tmp/text.tok|ep vp cpu 0 1 2 2 2
both|-D 2 -P 2 --head ring --sco-budget 16Ki --chunk-cap 16|pllep ring stream 16Ki 2 2 1 2
dense|--head dense --dispatch pllep --optim stream|pllep dense stream 0 1 1 1 2
proxy|--virtual-world 4 --head fused|pllep fused stream 0 1 1 1 4
EOF
rows "$runs/both"/train.*.tsv '$c["K"] ":" $c["selected"]' | grep -qx 2:2 && pass || fail "N=32: chunk cap 16 gives K=2, a 16Ki budget 2 boundaries of 8Ki"
rows "$runs/ulysses"/train.*.tsv '$c["selected"]' | grep -qx 3 && pass || fail "sco all: selected != 3"
run infeasible $MPIRUN -np 2 "${B[@]}" --preset cpu -D 2 --seq 64,65 -w 0 -n 1
[[ $(rows "$f" '$c["status"]' | tr '\n' ' ') == "ok infeasible " ]] && pass || fail "S=65 at D=2: not an infeasible row"

echo "== --mem-limit: an oom row"
run oom "${B[@]}" --preset cpu --seq 64,512 --mem-limit 6Mi -w 0 -n 1
[[ $(rows "$f" '$c["seq"] ":" $c["status"]' | tr '\n' ' ') == "64:ok 512:oom " ]] && pass ||
  fail "mem-limit rows: $(rows "$f" '$c["seq"] ":" $c["status"]' | tr '\n' ' ')"

echo "== --describe"
out=$("${B[@]}" --preset cpu --describe -o "$tmp/describe" 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"# parameters: 0.224 M total"* && $out == *"# device: states"* &&
  $out == *"S=128"* && ! -e $tmp/describe ]] && pass || { fail "--describe (exit $rc):"; echo "$out" | head -5; }

echo "== bad inputs: exit 2, nothing written"
while read -r args; do
  rm -rf "$tmp/bad"
  "${B[@]}" --preset cpu -o "$tmp/bad" $args </dev/null >"$tmp/bad.out" 2>&1
  rc=$?
  [[ $rc -eq 2 && ! -e $tmp/bad ]] && pass || { fail "$args: exit $rc (want 2), files: $(ls "$tmp/bad" 2>/dev/null)"; tail -2 "$tmp/bad.out"; }
done <<'EOF'
--model huge
--system fsdp2
--system plateau,plateau
--seq 0
-D 3
--virtual-world 3
--sco-budget lots
--data /nonexistent/shard.tok
--calib /nonexistent
--dispatch sideways
--head logits
--optim sgd
--seq 64 --tokens 64
--heads 3
EOF

echo "== maxbatch --bench train: --mem-limit, trials in child processes"
"$BIN" bench maxbatch --backend cpu --bench train --preset cpu --mem-limit 6Mi --start 256 --step 64 \
  --layers 2 --dispatch llep --launcher "$MPIRUN -np 1" --trial-timeout 120 -o "$runs/mb" \
  </dev/null >"$tmp/mb.out" 2>&1
rc=$?
f=$(ls "$runs/mb"/maxbatch.*.tsv 2>/dev/null | head -1)
if [[ $rc -ne 0 || -z $f ]]; then
  fail "maxbatch: exit $rc"; tail -5 "$tmp/mb.out"
else
  summary='$c["kind"] != "summary" ? "" : $c["max_ok_tokens"] " " $c["first_fail_tokens"] " " $c["seq"] " " $c["system"] " " $c["model"] " " $c["status"]'
  read -r lo hi seq sys model st < <(rows "$f" "$summary" | grep .)
  [[ $st == ok && $lo -gt 0 && $hi -eq $((lo + 64)) && $seq -eq $lo && $sys == plateau && $model == custom:tiny ]] && pass ||
    fail "maxbatch summary: lo=$lo hi=$hi seq=$seq system=$sys model=$model status=$st"
  [[ $(rows "$f" '$c["kind"] == "trial" ? $c["tokens"] ":" $c["status"] : ""' | grep -c -e "^$lo:ok$" -e "^$hi:oom$") -eq 2 ]] && pass ||
    fail "maxbatch: no ok trial at $lo and oom trial at $hi"
  nt=$(rows "$f" '$c["kind"]' | grep -c '^trial$')
  nv=$(cat "$runs/mb"/train.*.tsv | awk -F'\t' '!/^#/ && $0 ~ /llep\/ring/ && $0 ~ /custom:tiny/' | wc -l)
  [[ $nt -ge 4 && $nv -eq $nt ]] && pass || fail "maxbatch: $nt trials, $nv trial rows with the forwarded options"
fi
for args in "--budgets 0" "--seq 64" "--preset small" "--sco-budget lots"; do
  rm -rf "$tmp/bad"
  "$BIN" bench maxbatch --backend cpu --bench train -o "$tmp/bad" $args </dev/null >"$tmp/bad.out" 2>&1
  rc=$?
  [[ $rc -eq 2 && ! -e $tmp/bad ]] && pass || { fail "maxbatch --bench train $args: exit $rc"; tail -2 "$tmp/bad.out"; }
done
"$BIN" bench maxbatch --backend cpu --bench sco --dispatch ep -o "$tmp/bad" </dev/null >"$tmp/bad.out" 2>&1
[[ $? -eq 2 ]] && pass || fail "maxbatch --bench sco --dispatch ep: not refused"

echo "== plateau report"
"$BIN" report "$runs" >"$tmp/report.out" 2>&1 || { fail "report: exit $?"; tail -5 "$tmp/report.out"; }
md=$runs/report/train.md
if [[ -f $md ]]; then
  grep -q "## End to end (the paper's layout)" "$md" && grep -q "paper: 16–64 H200, different scale" "$md" &&
    grep -q "## Where a step's time goes" "$md" && grep -q "## Reach and max batch" "$md" &&
    grep -q "## plateau vs FSDP2-best" "$md" && pass || fail "train.md lacks a section"
  [[ $(grep -c '^| tiny | ' "$md") -ge 10 ]] && pass || fail "train.md: few tiny rows"
  grep -q '^| tiny | 512 | plateau | .* | oom |' "$md" && pass || fail "train.md: no oom row"
  grep -q '^| custom:tiny | plateau | 0 | [0-9]* | [0-9]* | [0-9]* | [0-9]* | ok |' "$md" && pass || fail "train.md: no max-batch row"
  ! grep -q '^| custom:tiny | [0-9]' "$md" && pass || fail "train.md: maxbatch trials among the points"
else
  fail "no report/train.md"; tail -5 "$tmp/report.out"
fi
[[ $(grep -c '^tiny:plateau' "$runs/report/train-context.tsv" 2>/dev/null) -ge 2 ]] && pass || fail "chart data"
if command -v gnuplot >/dev/null; then
  [[ -s $runs/report/train-context.svg && -s $runs/report/train-context.png ]] && pass || fail "no chart"
fi

echo "== the report's paper layout and FSDP2 columns (synthetic result files)"
# 120B proxy rows of both systems and their max-batch searches, as the H200
# runs would write them: the ratios and the paper's figures beside
syn=$tmp/syn
mkdir -p "$syn"
hdr='system\tmodel\tvariant\tranks\tvirtual_world\tseq\ttokens\ttok_s_gpu\ttflops\tmfu\tdev_peak_bytes\thost_peak_bytes\ttime_ms\tstatus\tcheck\tnote'
{
  printf '# plateau-results: 2\n# bench: train\n# backend: cuda\n'"$hdr"'\n'
  printf 'plateau\t120b\tpllep/fused/stream/sco=0/mb1\t1\t16\t131072\t131072\t1500\t114\t14.4\t1e11\t9e10\t87381\tok\tpass\t-\n'
  printf 'fsdp2\t120b\tcp1/ep16/ac=full/opt=cpu/mb1\t1\t16\t131072\t131072\t200\t15.2\t1.9\t1.3e11\t9e10\t655360\tok\tpass\t-\n'
  printf 'plateau\t120b\tpllep/fused/stream/sco=0/mb1\t1\t16\t1048576\t1048576\t640\t250\t31.6\t1.3e11\t9e10\t1638400\tok\tpass\t-\n'
  printf 'fsdp2\t120b\tcp1/ep16/ac=full/opt=cpu/mb1\t1\t16\t1048576\t1048576\t-\t-\t-\t-\t-\t-\toom\tskip\t-\n'
  printf '# end: ok\n'
} >"$syn/train.1.tsv"
{
  printf '# plateau-results: 2\n# bench: maxbatch\nkind\ttarget\tsystem\tmodel\tbudget\ttokens\tseq\tmax_ok_tokens\tfirst_fail_tokens\ttrials\tstatus\tcheck\tnote\n'
  printf 'summary\ttrain\tplateau\t120b\t0\t1572864\t1572864\t1572864\t1638400\t6\tok\tskip\t-\n'
  printf 'summary\ttrain\tfsdp2\t120b\t0\t131072\t131072\t131072\t196608\t5\tok\tskip\t-\n'
  printf '# end: ok\n'
} >"$syn/maxbatch.1.tsv"
"$BIN" report "$syn" >"$tmp/syn.out" 2>&1 || { fail "report of the synthetic files: exit $?"; tail -3 "$tmp/syn.out"; }
md=$syn/report/train.md
grep -q '^| 120b | 128K | plateau | .* | 1500 | 114 | 14.4 | .* | 1355 (91) on 16 GPUs |$' "$md" && pass || fail "120b 128K row with the paper's 1355 (91)"
grep -q '^| 120b | 1M | fsdp2 | .* | oom | 642 (221) on 16 GPUs |$' "$md" && pass || fail "120b 1M fsdp2 oom row"
grep -q '^| 120b | 128K | 1500.0 | 200.0 | 7.50× | 7.6× | 8.0× | 8× (1M / 128K) | 12.0× | 12× |$' "$md" && pass ||
  { fail "plateau vs FSDP2-best row:"; grep '^| 120b | 128K | 1500' "$md"; }
grep -q '^| 120b | plateau | 0 | 1572864 | 1572864 | 1638400 | 6 | ok |' "$md" && pass || fail "max-batch summary row"
grep -q '^paper:120b	1048576	642	221$' "$syn/report/train-context.tsv" && pass || fail "the paper's points in the chart data"
[[ ! -e $syn/report/sco.md ]] && pass || fail "a train maxbatch file made an sco report"

if [[ $nfail -eq 0 ]]; then echo "$PL_TEST: all $npass passed"; exit 0; fi
echo "$PL_TEST: $nfail failed, $npass passed"
exit 1
