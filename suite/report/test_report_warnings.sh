#!/usr/bin/env bash
# test_report_warnings.sh — every chart is drawn without a gnuplot warning:
# `plateau report` over a copy of every committed reference directory
# (results/reference/*/, its report/ left out) and over a fresh `make run`
# (jobs/main.sh: the CPU backend's component benches and the end-to-end
# step) prints no line of gnuplot's ("warning: Skipping data file with no
# valid points", "Warning: empty x range ...": a series without a point, a
# single x), and a chart with nothing to show is not drawn but said so.
# make run must also show the end-to-end table and chart (report/train.md,
# train-context.svg) among what it lists.  The make-run directory is
# removed when the test passes.
# Usage: BUILD=build bash suite/report/test_report_warnings.sh
set -uo pipefail
PL_TEST=test_report_warnings.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
if ! command -v gnuplot >/dev/null; then
  echo "test_report_warnings.sh: gnuplot not installed: nothing to check"
  exit 0
fi
unset PLATEAU_GNUPLOT

# gnuplot's own lines on stderr: anything but the report's messages
gnuplot_lines() { grep -v '^plateau report: ' "$1" | grep -iE 'warning|error' ; }

for d in "$ROOT"/results/reference/*/; do
  k=$(basename "$d")
  mkdir -p "$tmp/$k"
  tar -C "$d" --exclude=./report -cf - . | tar -C "$tmp/$k" -xf -
  "$BIN" report "$tmp/$k" >"$tmp/$k.out" 2>"$tmp/$k.err"
  rc=$?
  [[ $rc == 0 ]] && pass || fail "report $k: exit $rc: $(tail -2 "$tmp/$k.err")"
  if gnuplot_lines "$tmp/$k.err" >"$tmp/w"; then
    fail "report $k: gnuplot printed $(wc -l <"$tmp/w") line(s): $(head -3 "$tmp/w" | tr '\n' '|')"
  else
    pass
  fi
  [[ -n $(find "$tmp/$k/report" -name '*.svg') ]] && pass || fail "report $k: no chart drawn"
done

# a fresh make run (its report runs inside it, through jobs/run)
cd "$ROOT" || exit 1
NP=2 BUILD=$BUILD jobs/main.sh >"$tmp/mr.out" 2>&1
rc=$?
dir=$(sed -n 's/^# make run: .* into \(results\/runs\/make-run-[^ ]*\)$/\1/p' "$tmp/mr.out" | head -1)
[[ $rc == 0 && -n $dir && -d $dir ]] && pass || fail "make run: exit $rc, directory '$dir': $(tail -3 "$tmp/mr.out")"
if gnuplot_lines "$tmp/mr.out" >"$tmp/w"; then
  fail "make run: gnuplot printed $(wc -l <"$tmp/w") line(s): $(head -3 "$tmp/w" | tr '\n' '|')"
else
  pass
fi
# make run ends with the summary of the paper's claims, printed whole
sum=$dir/report/summary.md
if [[ -f $sum ]] && grep -q "^== $sum$" "$tmp/mr.out" &&
  tail -n "$(wc -l <"$sum")" "$tmp/mr.out" | cmp -s - "$sum"; then
  pass
else
  fail "make run does not end with $sum"
fi
for f in report/train.md report/train-context.svg report/attention.md report/vocab.svg; do
  grep -q "^  $dir/$f$" "$tmp/mr.out" && pass || fail "make run does not list $f"
done
if [[ -n $dir && -f $dir/report/train.md ]]; then
  grep -q '^| [0-9]* | tiny | 64 | fsdp2 | ' "$dir/report/train.md" &&
    grep -q '^| [0-9]* | tiny | 128 | plateau | ' "$dir/report/train.md" && pass ||
    fail "make run's train.md lacks a system's rows"
  # the report again over the same directory: still no gnuplot line
  "$BIN" report "$dir" >/dev/null 2>"$tmp/again.err"
  gnuplot_lines "$tmp/again.err" >"$tmp/w" && fail "report of make run: $(head -2 "$tmp/w")" || pass
fi

echo "test_report_warnings.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 && -n $dir ]] && rm -rf "$dir"
[[ $nfail -eq 0 ]]
