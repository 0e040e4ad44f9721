#!/usr/bin/env bash
# test_terminal.sh — what a bench prints for a person: one short line per row
# (what ran, time, rates, device peak, status and check; at most 320
# characters where the raw row was over a thousand), two header lines (what
# ran where, the result file) instead of every metadata line, the file's
# path last; the result file keeps every column and every metadata line.
# bench train's per-step lines carry tok/s and the device peak, ETA last.
# Usage: BUILD=build bash suite/harness/test_terminal.sh
set -uo pipefail
PL_TEST=test_terminal.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

OMP_NUM_THREADS=1 "$BIN" bench train --preset cpu --system plateau,fsdp2 --seq 64 -n 2 -w 1 \
  -o "$tmp/r" >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 0 ]] && pass || { fail "bench train: exit $rc"; tail -3 "$tmp/err"; }
f=$(tail -n 1 "$tmp/out")
[[ -f $f ]] && pass || fail "the last line is not the result file: $f"
rows=$(grep -vc '^#' "$f"); rows=$((rows - 1)) # less the header
lines=$(grep -c '^  train ' "$tmp/out")
[[ $rows -ge 2 && $lines == "$rows" ]] && pass || fail "$lines printed lines for $rows rows"
long=$(awk 'length($0) > 320' "$tmp/out" | head -1)
[[ -z $long ]] && pass || fail "a printed line of ${#long} characters: ${long:0:120}"
grep -E '^  train plateau tiny .*S=64 .*: [0-9.]+ ms, [0-9.]+ tok/s/GPU, [0-9.]+ TFLOP/s, peak [0-9.]+ [KMG]?i?B  ok pass' "$tmp/out" >/dev/null &&
  pass || fail "no human line of the plateau row: $(grep '^  train' "$tmp/out" | head -1)"
# the file keeps what the terminal leaves out: every metadata line, the raw row
grep -q '^# argv: ' "$f" && grep -q '^# git_sha: ' "$f" && ! grep -q '^# argv: ' "$tmp/out" && pass ||
  fail "metadata: file or terminal"
[[ $(grep -c '^#' "$tmp/out") -le 4 ]] && pass || fail "$(grep -c '^#' "$tmp/out") '#' lines on the terminal"
[[ $(awk -F'\t' '!/^#/ {print NF; exit}' "$f") -gt 50 ]] && pass || fail "the file's rows lost columns"
# per-step progress: tok/s and the device peak, ETA still last
grep -qE '^\[train\] step 1/3 +[0-9.]+ s +loss [0-9.]+ +[0-9.]+ tok/s +peak [0-9.]+ [KMG]iB +ETA [0-9.]+ s$' "$tmp/err" &&
  pass || fail "per-step line: $(grep '^\[train\] step 1/' "$tmp/err" | head -1)"

echo "$PL_TEST: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
