#!/usr/bin/env bash
# test_oom_rows.sh — out of memory during a point's set-up is an `oom` row and
# the run goes on, in every bench: each bench on the CPU backend with a device
# capacity far below its smallest point (--mem-limit) exits 0, writes a
# finished result file whose rows are all `oom` (one per point: more than one
# where the bench sweeps), and says which allocation did not fit.  moegemm and
# layer also under mpirun -np 2 (where they used to exit 3 with no row).
# maxbatch's trials: suite/bench/sco/test_sco_bench.sh (its first failing trial is oom).
# Usage: BUILD=build bash suite/harness/test_oom_rows.sh
set -uo pipefail
PL_TEST=test_oom_rows.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

# run_oom NAME MINROWS CMD...: CMD writes one result file under $tmp/NAME
run_oom() {
  local name=$1 min=$2
  shift 2
  "$@" -n 1 -w 0 -o "$tmp/$name" >"$tmp/$name.log" 2>&1
  local rc=$? f
  f=$(find "$tmp/$name" -name '*.tsv' 2>/dev/null | head -n 1)
  if [[ $rc -ne 0 || -z $f ]]; then
    fail "$name: exit $rc, file '${f:-none}'"; tail -3 "$tmp/$name.log"; return
  fi
  local st n
  st=$(awk -F'\t' '/^#/ {next} !h {for (i = 1; i <= NF; i++) if ($i == "status") c = i; h = 1; next} {print $c}' "$f")
  n=$(echo "$st" | grep -c .)
  if [[ $n -lt $min || $(echo "$st" | sort -u) != oom ]]; then
    fail "$name: $n rows (want >= $min), statuses: $(echo "$st" | sort | uniq -c | tr '\n' ' ')"; return
  fi
  grep -q "^# end: ok" "$f" && grep -q "would exceed the limit" "$f" && pass ||
    fail "$name: no end line or no allocator message"
}

L=(--backend cpu --mem-limit 1Ki)
run_oom calib 2 "$BIN" bench calib "${L[@]}" --sizes 4Ki,8Ki --tests d2d,h2d
run_oom moegemm 2 "$BIN" bench moegemm "${L[@]}"
run_oom dispatch 2 "$BIN" bench dispatch "${L[@]}"
run_oom vocab 2 "$BIN" bench vocab "${L[@]}"
run_oom sco 2 "$BIN" bench sco "${L[@]}" --preset small
run_oom adam 2 "$BIN" bench adam "${L[@]}"
run_oom attention 2 "$BIN" bench attention "${L[@]}"
run_oom layer 2 "$BIN" bench layer "${L[@]}"
# the issue's two: OOM in a set-up that runs once (the buffers, the layer)
run_oom moegemm-2 2 $MPIRUN -np 2 "$BIN" bench moegemm --backend cpu --mem-limit 64Ki
run_oom layer-2 2 $MPIRUN -np 2 "$BIN" bench layer --backend cpu --mem-limit 200Ki

echo "test_oom_rows.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
