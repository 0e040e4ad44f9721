#!/usr/bin/env bash
# test_report_train_charts.sh — the end-to-end scaling charts of the train
# report from synthetic rows in the format `plateau bench train` and
# `plateau bench maxbatch --bench train` write (the paper's 16 / 32 / 64-GPU
# points cannot run here): plateau rows of the 120B / 241B / 667B models on
# 16 / 32 / 64 GPUs at 128Ki ... 1Mi, a one-GPU proxy row (W_v = 16), an
# FSDP2-best row and an oom one, and max-batch searches at 16 / 32 / 64 GPUs.
# train-gpus (tok/s/GPU and TFLOP/s vs GPU count, one line per system and
# context, the proxy at its W_v, the paper's 128K and 1M points) and
# train-maxbatch (global batch vs GPUs with the paper's plateau and
# FSDP2-best batches) must be written and drawn.
# Usage: BUILD=build bash suite/bench/train/test_report_train_charts.sh
set -uo pipefail
PL_TEST=test_report_train_charts.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"
run=$tmp/run
mkdir -p "$run"
{
  printf '# plateau-results: 2\n# bench: train\n# backend: cuda\n'
  printf 'bench\tsystem\tmodel\tvariant\tranks\tvirtual_world\tseq\ttokens\ttok_s_gpu\ttflops\tdev_peak_bytes\tstatus\tcheck\tnote\n'
  row() { printf 'train\t%s\t%s\tpllep/ring/stream\t%s\t%s\t%s\t-\t%s\t%s\t-\t%s\tskip\t-\n' "$@"; }
  row plateau 120b 16 16 131072 1400 95 ok
  row plateau 120b 16 16 1048576 650 230 ok
  row plateau 241b 32 32 131072 870 112 ok
  row plateau 241b 32 32 1048576 320 215 ok
  row plateau 667b 64 64 131072 320 108 ok
  row plateau 667b 64 64 1048576 125 231 ok
  row plateau 120b 1 16 131072 1500 330 ok
  row fsdp2 120b 16 16 131072 180 12 ok
  row fsdp2 120b 16 16 262144 - - oom
  printf '# end: ok 2026-12-01T00:00:00Z\n'
} >"$run/train.20261201T000000Z.vm.1.0.tsv"
i=0
for mg in 120b:16:98304 241b:32:57344 667b:64:49152; do
  IFS=: read -r m g tok <<<"$mg"
  i=$((i + 1))
  {
    printf '# plateau-results: 2\n# bench: maxbatch\n# backend: cpu\n'
    printf 'bench\tkind\ttarget\tbudget\ttokens\tranks\tmax_ok_tokens\tsystem\tmodel\ttrial_file\tstatus\tcheck\tnote\n'
    printf 'maxbatch\ttrial\ttrain\t0\t%s\t%s\t-\tplateau\t%s\tnone.tsv\tok\tskip\t-\n' "$tok" "$g" "$m"
    printf 'maxbatch\tsummary\ttrain\t0\t%s\t-\t%s\tplateau\t%s\t-\tok\tskip\t-\n' "$tok" "$tok" "$m"
    printf '# end: ok 2026-12-01T00:00:00Z\n'
  } >"$run/maxbatch.20261201T00000${i}Z.vm.$i.0.tsv"
done
"$BIN" report "$run" >"$tmp/out" 2>&1 || { fail "report: exit $?"; cat "$tmp/out"; }
R=$run/report
col() { awk -F'\t' -v s="$2" '$1 == s {printf "%s/%s ", $2, $3}' "$1"; }
[[ $(col "$R/train-gpus.tsv" "plateau:128K") == "16/1400 32/870 64/320 " ]] && pass ||
  fail "train-gpus plateau:128K: $(col "$R/train-gpus.tsv" "plateau:128K")"
[[ $(col "$R/train-gpus.tsv" "plateau:128K:proxy") == "16/1500 " ]] && pass ||
  fail "train-gpus proxy at its W_v: $(col "$R/train-gpus.tsv" "plateau:128K:proxy")"
[[ $(col "$R/train-gpus.tsv" "fsdp2:128K") == "16/180 " ]] && pass || fail "train-gpus fsdp2:128K"
[[ $(col "$R/train-gpus.tsv" "paper:1M") == "16/642 32/314 64/124 " ]] && pass || fail "train-gpus paper:1M"
[[ $(col "$R/train-maxbatch.tsv" "120b:plateau") == "16/1572864 " ]] && pass ||
  fail "train-maxbatch 120b: $(col "$R/train-maxbatch.tsv" "120b:plateau")"
[[ $(col "$R/train-maxbatch.tsv" "paper:fsdp2") == "16/125000 32/257143 64/1000000 " ]] && pass ||
  fail "train-maxbatch paper:fsdp2: $(col "$R/train-maxbatch.tsv" "paper:fsdp2")"
if command -v gnuplot >/dev/null; then
  for c in train-context train-gpus train-maxbatch; do
    [[ -s $R/$c.svg && -s $R/$c.png ]] && pass || { fail "no $c chart"; cat "$tmp/out"; }
  done
  grep -q "paper:128K" "$R/train-gpus.svg" && grep -q "plateau:128K:proxy" "$R/train-gpus.svg" && pass ||
    fail "train-gpus.svg lacks its series"
  grep -q "paper:fsdp2" "$R/train-maxbatch.svg" && grep -q "667b:plateau" "$R/train-maxbatch.svg" && pass ||
    fail "train-maxbatch.svg lacks its series"
else
  echo "note: gnuplot not installed: chart checks skipped"
fi
echo "test_report_train_charts.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
