#!/usr/bin/env bash
# jobs/test_regress.sh — `make regress` on the CPU backend, end to end: the
# cpu points of jobs/sweeps/regress.tsv run through jobs/run and `plateau
# compare` them with results/reference/cpu/ (times skipped by its
# tolerances, memory exact): no regression (exit 0), every configuration of
# the reference compared (none NEW or MISSING), its closing status counting
# the points of other machine kinds apart.  Then the same run with one
# tracked peak raised by a byte, made nan or "-" must fail (exit 1; the
# reference against itself passes), and a machine kind without a reference
# is refused (exit 2).
# Usage: BUILD=build bash jobs/test_regress.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BUILD=${BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
BIN=$BUILD/bin/plateau
[[ -x $BIN ]] || { echo "test_regress.sh: $BIN not built"; exit 1; }
sw=test-regress-$(date -u +%Y%m%dT%H%M%S)-$$
npass=0 nfail=0
pass() { npass=$((npass + 1)); }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
tmp=$(mktemp -d /tmp/pl_test_regress.XXXXXX)
trap 'rm -rf "$tmp"; [[ $nfail == 0 ]] && rm -rf "results/runs/$sw"' EXIT

jobs/regress --machine cpu --sweep "$sw" >"$tmp/out" 2>&1
rc=$?
if [[ $rc == 0 ]] && grep -q -- "-> PASS$" "$tmp/out"; then pass; else
  fail "jobs/regress --machine cpu: exit $rc"; tail -30 "$tmp/out"
fi
# the points of the other machine kinds are counted apart, not as "not run"
if grep -qE "^# sweep $sw: [0-9]+ points: .* 0 not run, [0-9]+ for other machines \(100% done of the [0-9]+ for cpu\)$" "$tmp/out"; then
  pass
else
  fail "the closing status line counts other machines' points as not run: $(grep "^# sweep $sw: [0-9]* points" "$tmp/out")"
fi
# one byte more on one tracked peak of the run: a regression
f=$(grep -l "^# bench: sco" "results/runs/$sw"/*.tsv | head -n 1)
mkdir -p "$tmp/new" && cp "results/runs/$sw"/*.tsv "$tmp/new/"
awk -F'\t' -v OFS='\t' '/^#/ {print; next} !h {for (i = 1; i <= NF; i++) if ($i == "dev_peak_bytes") c = i; h = 1; print; next}
  {if (!done && c && $c != "-") {$c += 1; done = 1} print}' "$f" >"$tmp/new/$(basename "$f")"
"$BIN" compare "$tmp/new" results/reference/cpu --brief >"$tmp/out2" 2>&1
rc=$?
[[ $rc == 1 ]] && grep -qE "dev_peak_bytes .* exact +FAIL +\+1" "$tmp/out2" && pass ||
  { fail "a peak one byte up: exit $rc (want 1)"; tail -5 "$tmp/out2"; }
# every configuration of the reference is compared: none only in REF or in
# NEW (the adam cpu row, written before its bucket and slots were filled, is
# matched by its other key columns)
if grep -qE "(NEW|MISSING) +(no reference row|not in NEW)" "$tmp/out"; then
  fail "configurations not compared: $(grep -B1 -E "(NEW|MISSING) +(no reference row|not in NEW)" "$tmp/out" | head -6 | tr '\n' '|')"
else
  pass
fi
grep -qE "^== adam .*variant=cpu" "$tmp/out" && grep -qE "MATCHED +REF has no value in bucket, slots" "$tmp/out" && pass ||
  fail "the adam cpu row is not matched to the reference's"
# both directions on one metric: the reference against itself passes; the
# run with one tracked peak made nan, or "-", fails (a metric NEW lacks is
# never a silent PASS), and --allow-missing lists it without failing
"$BIN" compare results/reference/cpu results/reference/cpu --brief >"$tmp/out4" 2>&1
rc=$?
[[ $rc == 0 ]] && grep -qE " 0 fail, [0-9]+ skipped, 0 without a value; 0 new, 0 missing -> PASS$" "$tmp/out4" && pass ||
  { fail "the reference against itself: exit $rc (want 0)"; tail -3 "$tmp/out4"; }
for bad in nan -; do
  mkdir -p "$tmp/bad" && cp "results/runs/$sw"/*.tsv "$tmp/bad/"
  awk -F'\t' -v OFS='\t' -v bad="$bad" '/^#/ {print; next} !h {for (i = 1; i <= NF; i++) if ($i == "dev_peak_bytes") c = i; h = 1; print; next}
    {if (!done && c && $c != "-") {$c = bad; done = 1} print}' "$f" >"$tmp/bad/$(basename "$f")"
  "$BIN" compare "$tmp/bad" results/reference/cpu --brief >"$tmp/out5" 2>&1
  rc=$?
  [[ $rc == 1 ]] && grep -qE "^   dev_peak_bytes +[0-9]+ +$bad .* FAIL +NEW has no value" "$tmp/out5" &&
    grep -qE " 1 fail, .* -> REGRESSION$" "$tmp/out5" && pass ||
    { fail "a peak made '$bad': exit $rc (want 1)"; tail -5 "$tmp/out5"; }
  "$BIN" compare "$tmp/bad" results/reference/cpu --brief --allow-missing >"$tmp/out5" 2>&1
  rc=$?
  [[ $rc == 0 ]] && grep -qE "^   dev_peak_bytes +[0-9]+ +$bad .* NO VALUE NEW has no value" "$tmp/out5" &&
    grep -qE " 0 fail, .* -> PASS$" "$tmp/out5" && pass ||
    { fail "a peak made '$bad', --allow-missing: exit $rc (want 0)"; tail -5 "$tmp/out5"; }
done
jobs/regress --machine nosuchkind >"$tmp/out3" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "no reference for machine kind 'nosuchkind'" "$tmp/out3" && pass ||
  { fail "unknown kind: exit $rc (want 2)"; cat "$tmp/out3"; }
echo "test_regress.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
