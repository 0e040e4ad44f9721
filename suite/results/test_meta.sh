#!/usr/bin/env bash
# test_meta.sh — what a result file's metadata records of its run:
#  - argv whole (an argument of 1500 characters is not cut) and quoted so
#    that bash reads the `# argv:` line back into the very same words
#    (spaces, single and double quotes, a tab, a newline, $, backquotes,
#    backslashes, an empty word), the program started by its absolute path
#    recorded by its name alone: no line of the file names the folder the
#    binary was built in;
#  - only the environment variables the program knows: PLATEAU_SIMD is
#    recorded; PLATEAU_API_TOKEN, NCCL_IB_PASSWORD, PLATEAU_FOO and any
#    value of them appear nowhere in the file.
# Usage: BUILD=build bash suite/results/test_meta.sh
set -uo pipefail
PL_TEST=test_meta.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

long=$(printf 'L%.0s' {1..1500})
weird=$'it\'s a "test"\twith  spaces\nand $HOME `x` \\ end'
args=(bench calib --backend cpu -n 1 -w 0 --sizes 4Ki --tests h2d --no-check
      -o "$tmp/o" --point "$weird" --sweep s1 --point "$weird$long")
PLATEAU_SIMD=scalar PLATEAU_API_TOKEN=tok-secret-1 NCCL_IB_PASSWORD=pw-secret-2 \
  PLATEAU_FOO=foo-value-3 "$BIN" "${args[@]}" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
f=$(find "$tmp/o" -name '*.tsv' | head -n 1)
if [[ $rc -ne 0 || -z $f ]]; then
  fail "the run: exit $rc"; cat "$tmp/stderr"
else
  line=$(sed -n 's/^# argv: //p' "$f")
  got=()
  eval "got=($line)" 2>"$tmp/eval" || fail "the argv line is not valid shell: $(cat "$tmp/eval")"
  want=(plateau "${args[@]}")
  if [[ ${#got[@]} -ne ${#want[@]} ]]; then
    fail "argv round trip: ${#got[@]} words, want ${#want[@]}: $line"
  else
    ok=1
    for i in "${!want[@]}"; do
      [[ ${got[$i]} == "${want[$i]}" ]] || { ok=0; fail "argv word $i: got '${got[$i]}' want '${want[$i]}'"; }
    done
    ((ok)) && pass
  fi
  grep -q "^# env.PLATEAU_SIMD: scalar$" "$f" && pass || fail "PLATEAU_SIMD not recorded"
  if grep -qF -- "$ROOT" "$f"; then fail "the result file names the build's folder: $(grep -F -- "$ROOT" "$f" | head -n 2)"; else pass; fi
  for bad in tok-secret-1 pw-secret-2 foo-value-3 PLATEAU_API_TOKEN NCCL_IB_PASSWORD PLATEAU_FOO; do
    if grep -q -- "$bad" "$f"; then fail "the result file holds '$bad'"; else pass; fi
  done
fi
# an argv of nothing unusual stays readable: no quotes where none are needed
"$BIN" bench calib --backend cpu -n 1 -w 0 --sizes 4Ki --tests h2d --no-check -o "$tmp/p" >/dev/null 2>&1
f=$(find "$tmp/p" -name '*.tsv' | head -n 1)
grep -q "^# argv: plateau bench calib --backend cpu -n 1 -w 0 --sizes 4Ki --tests h2d --no-check -o $tmp/p$" "$f" &&
  pass || fail "plain argv: $(grep '^# argv' "$f")"

echo "test_meta.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
