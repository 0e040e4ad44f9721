#!/usr/bin/env bash
# test_dry_run.sh — `plateau bench NAME --dry-run[=RANKS] ARGS`, the check
# jobs/submit runs on every point before queuing anything:
#  - valid options: exit 0, the points listed, a closing "dry run: ok" line,
#    and nothing written (no result file, no output directory);
#  - a bad value, an unknown option or a bench's refusal of its options on
#    RANKS ranks (e.g. experts not a multiple of the ranks): exit 2 with the
#    message naming it, nothing written;
#  - points that cannot run on RANKS ranks are listed as infeasible (exit 0);
#  - --backend cuda validates without a GPU (the submitting machine may have
#    none); a bad --dry-run value is a usage error.
# Usage: BUILD=build bash suite/harness/test_dry_run.sh
set -uo pipefail
PL_TEST=test_dry_run.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

# run EXPECTED_RC CMD...: exit code as expected and nothing under $tmp/out
run() {
  local want=$1
  shift
  rm -rf "$tmp/out"
  "$@" -o "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [[ $rc -ne $want ]]; then
    fail "$* -> exit $rc (want $want)"; cat "$tmp/stdout" "$tmp/stderr"; return 1
  fi
  if [[ -e $tmp/out ]]; then
    fail "$* -> created $tmp/out"; find "$tmp/out"; return 1
  fi
  pass
}
has() { # FILE NEEDLE
  if grep -qF -- "$2" "$1"; then pass; else fail "$(basename "$1") lacks '$2'"; cat "$1"; fi
}

run 0 "$BIN" bench calib --backend cpu --sizes 4Ki:16Ki:x4 --gemm-size 64 --dry-run &&
  has "$tmp/stdout" "dry run: ok, 15 points (0 infeasible) on 1 rank, backend cpu"
run 0 "$BIN" bench dispatch --backend cuda --preset 65k --dry-run=2 &&
  has "$tmp/stdout" "backend cuda: nothing written"
run 2 "$BIN" bench dispatch --backend cpu --experts 8 --dry-run=3 &&
  has "$tmp/stderr" "--experts=8 is not a multiple of the 3 ranks"
run 2 "$BIN" bench layer --backend cpu --dry-run=3 && has "$tmp/stderr" "--heads=4 --kv-heads=2 over 3 ranks: --heads must divide by the ranks"
run 2 "$BIN" bench calib --backend cpu --sizes 12Q --dry-run && has "$tmp/stderr" "12Q"
run 2 "$BIN" bench calib --backend cpu --no-such-option --dry-run && has "$tmp/stderr" "--no-such-option"
run 2 "$BIN" bench calib --backend cpu --dry-run=0 && has "$tmp/stderr" "--dry-run=RANKS"
run 2 "$BIN" bench nosuchbench --dry-run && has "$tmp/stderr" "unknown bench 'nosuchbench'"
# S = 256, 512 on 3 ranks: every point infeasible, still a valid request
# (heads 3: they divide; heads that do not are a usage error)
run 0 "$BIN" bench layer --backend cpu --dry-run=3 --heads 3 --kv-heads 3 &&
  has "$tmp/stdout" "infeasible: S not divisible by the number of ranks" &&
  has "$tmp/stdout" "(4 infeasible) on 3 ranks"
# a point's note at listing time is shown: bench train's plan verdict and
# predicted step
run 0 "$BIN" bench train --backend cpu --dry-run &&
  has "$tmp/stdout" "# dry run: point 1/2 plateau tiny S=64 : plan: fits (device peak" &&
  has "$tmp/stdout" " s predicted)"
# the same options without --dry-run really run (the dry run is not looser)
rm -rf "$tmp/out"
if "$BIN" bench calib --backend cpu --sizes 4Ki --tests h2d -n 1 -w 0 -o "$tmp/out" >/dev/null 2>&1 &&
  [[ -n $(find "$tmp/out" -name '*.tsv') ]]; then pass; else fail "the real run wrote no result file"; fi

echo "test_dry_run.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
