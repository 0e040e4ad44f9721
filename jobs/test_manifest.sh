#!/usr/bin/env bash
# jobs/test_manifest.sh — jobs/manifest, the file table of a reference
# directory: a finished result file gives its row and passes --check once the
# MANIFEST lists it; an unfinished one (no "# end:" line: a killed run; or
# a row after it) is
# refused by both forms, by name (the table: exit 2 and no table; --check:
# exit 1), and so is a FIFO in place of a result file (exit 2, at once).
# Usage: bash jobs/test_manifest.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp=$(mktemp -d /tmp/pl_test_manifest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
npass=0 nfail=0
pass() { npass=$((npass + 1)); }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
check() { if eval "$2"; then pass; else fail "$1"; fi; }

d=$tmp/ref
mkdir -p "$d"
src=$(grep -l '^# end: ok' results/reference/cpu/*.tsv | head -n 1)
[[ -n $src ]] || { echo "test_manifest.sh: no finished result file in results/reference/cpu"; exit 1; }
cp "$src" "$d/done.tsv"
jobs/manifest "$d" >"$tmp/table" 2>"$tmp/err"
rc=$?
check "a finished file: exit 0 (got $rc), its row" '[[ $rc == 0 ]] && grep -q "| \`done.tsv\` |" "$tmp/table" && [[ ! -s $tmp/err ]]'
cp "$tmp/table" "$d/MANIFEST.md"
jobs/manifest --check "$d" >"$tmp/out" 2>&1
rc=$?
check "--check: the MANIFEST lists it: exit 0 (got $rc)" '[[ $rc == 0 ]]'

grep -v '^# end:' "$src" >"$d/killed.tsv"
jobs/manifest "$d" >"$tmp/table" 2>"$tmp/err"
rc=$?
check "an unfinished file: the table refuses it (exit 2, got $rc), naming it, printing no table" \
  '[[ $rc == 2 && ! -s $tmp/table ]] && grep -q "killed.tsv is unfinished (no .# end:. line" "$tmp/err"'
echo "| x | \`killed.tsv\` |" >>"$d/MANIFEST.md"
jobs/manifest --check "$d" >"$tmp/out" 2>&1
rc=$?
check "--check refuses it though the MANIFEST lists it (exit 1, got $rc)" \
  '[[ $rc == 1 ]] && grep -q "killed.tsv is unfinished" "$tmp/out"'
rm "$d/killed.tsv"
# a data row after the "# end:" line: not finished either
{ cat "$src"; grep -v '^#' "$src" | sed -n 2p; } >"$d/after.tsv"
jobs/manifest "$d" >"$tmp/table" 2>"$tmp/err"
rc=$?
check "a row after '# end:': the table refuses it (exit 2, got $rc), naming it" \
  '[[ $rc == 2 && ! -s $tmp/table ]] && grep -q "after.tsv is unfinished (a line after its .# end:. line" "$tmp/err"'
echo "| x | \`after.tsv\` |" >>"$d/MANIFEST.md"
jobs/manifest --check "$d" >"$tmp/out" 2>&1
rc=$?
check "--check refuses it (exit 1, got $rc)" '[[ $rc == 1 ]] && grep -q "after.tsv is unfinished" "$tmp/out"'
rm "$d/after.tsv"

mkfifo "$d/fifo.tsv"
timeout 10 jobs/manifest "$d" >"$tmp/table" 2>"$tmp/err"
rc=$?
check "a FIFO named .tsv: refused at once (exit 2, got $rc)" '[[ $rc == 2 ]] && grep -q "fifo.tsv: not a readable regular file" "$tmp/err"'
echo "test_manifest.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
