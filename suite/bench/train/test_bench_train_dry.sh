#!/usr/bin/env bash
# test_bench_train_dry.sh — `plateau bench train --backend dry` against the
# committed GPU rows: the exact command each row of
# results/reference/h200x1/grid-cudnn ran (its `# argv`), on a dry device
# playing the H200 (engine/backend/dry, engine/plan/dry_dev.c) instead of
# the GPU, must give the row's memory to the byte: the device peak, the
# pinned host peak, the live set at the peak and every <tag>_bytes column,
# with the same configuration (variant).  Two options are added: --host-mem
# (this host's memory is not the GPU host's; the plan of --config auto reads
# it) and, where the GPU host's memory is what made --config auto take the
# stream optimizer, --optim stream (the row's note names the choice).
# Its time columns and rates are empty ("-"): a dry device computes
# nothing.  Also: a bench that measures time refuses --backend dry (exit 2).
# Usage: BUILD=build bash suite/bench/train/test_bench_train_dry.sh
set -uo pipefail
PL_TEST=test_bench_train_dry.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

ref=$ROOT/results/reference/h200x1/grid-cudnn
# col FILE NAME: the column NAME of the file's one data row
col() {
  awk -F'\t' -v n="$2" '/^#/ {next} !h {for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next} {print $c[n]; exit}' "$1"
}
cols=(variant dev_peak_bytes host_peak_bytes pool_peak_bytes live_set dispatch_bytes
  logits_bytes boundary_bytes attention_bytes optim_staging_bytes kept_bytes)
for g in "$ref"/train.*.tsv; do
  argv=$(sed -n 's/^# argv: [^ ]* //p' "$g")
  # the row's options without its output folder and point label
  read -r -a opts <<<"$(sed -e 's/ -o [^ ]*//' -e 's/ --point [^ ]*//' \
    -e 's/--backend cuda/--backend dry/' <<<"$argv")"
  extra=(--host-mem 2Ti)
  grep -q 'optim=stream' <<<"$(col "$g" note)" && extra+=(--optim stream)
  name=$(sed -n 's/.* --point \([^ ]*\).*/\1/p' <<<"$argv")
  out=$tmp/$name
  if ! "$BIN" "${opts[@]}" "${extra[@]}" -o "$out" </dev/null >"$tmp/$name.log" 2>&1; then
    fail "$name: ${opts[*]} ${extra[*]}: exit $?"
    tail -3 "$tmp/$name.log"
    continue
  fi
  f=$(ls "$out"/train.*.tsv | head -1)
  bad=""
  for c in "${cols[@]}"; do
    [[ $(col "$f" "$c") == "$(col "$g" "$c")" ]] ||
      bad+=" $c (GPU $(col "$g" "$c"), dry $(col "$f" "$c"))"
  done
  # a dry device computes nothing: no time, no rate in its row
  for c in time_ms tok_s_gpu tflops mfu; do
    [[ $(col "$f" "$c") == - ]] || bad+=" $c (dry $(col "$f" "$c"), want -)"
  done
  [[ $(col "$f" status) == ok && -z $bad ]] && pass ||
    fail "$name: status $(col "$f" status), differs:$bad"
done
[[ $npass -eq 4 ]] || fail "$npass of 4 committed rows equal"

"$BIN" bench attention --backend dry -n 1 -w 0 -o "$tmp/att" >"$tmp/att.log" 2>&1
rc=$?
[[ $rc -eq 2 && ! -e $tmp/att ]] && pass || fail "bench attention --backend dry: exit $rc"

if [[ $nfail -eq 0 ]]; then echo "$PL_TEST: all $npass passed"; exit 0; fi
echo "$PL_TEST: $nfail failed, $npass passed"
exit 1
