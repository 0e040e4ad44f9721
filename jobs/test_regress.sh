#!/usr/bin/env bash
# jobs/test_regress.sh — `make regress` on the CPU backend, end to end: the
# cpu points of jobs/sweeps/regress.tsv run through jobs/run and `plateau
# compare` them with results/reference/cpu/ (times skipped by its
# tolerances, memory exact): no regression (exit 0), its closing status
# counting the points of other machine kinds apart.  Then the same run with
# one tracked peak raised by a byte must fail (exit 1), and a machine kind
# without a reference is refused (exit 2).
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
jobs/regress --machine nosuchkind >"$tmp/out3" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "no reference for machine kind 'nosuchkind'" "$tmp/out3" && pass ||
  { fail "unknown kind: exit $rc (want 2)"; cat "$tmp/out3"; }
echo "test_regress.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
