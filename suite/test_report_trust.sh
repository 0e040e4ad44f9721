#!/usr/bin/env bash
# test_report_trust.sh — `plateau report` trusts nothing it reads:
#  - a FIFO (or a directory) named *.tsv is skipped at once with a message,
#    never waited on, and the other files are reported (exit 0);
#  - a file of another schema version (3, "2x") is refused by name and its
#    rows appear nowhere; a run mixing versions 1 and 2 says so on stderr and
#    lists the older files in the report;
#  - an unfinished file (no `# end:` line) is reported and listed as such; a
#    complete rerun of the same point (same `point`, or same argv and ranks)
#    supersedes it: its rows are left out and the report says which file won.
# The files are written by hand (a bench `toy` with the generic report), so
# the test runs in a second.  Usage: BUILD=build bash suite/test_report_trust.sh
set -uo pipefail
PL_TEST=test_report_trust.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
export PLATEAU_GNUPLOT=/nonexistent/gnuplot

# toy FILE VERSION POINT ARGV NOTE [end]: a result file of bench toy, one row
toy() {
  {
    printf '# plateau-results: %s\n# bench: toy\n# ranks: 2\n# point: %s\n# argv: %s\n' "$2" "$3" "$4"
    printf 'bench\ttokens\ttime_ms\tstatus\tcheck\tnote\n'
    printf 'toy\t64\t1.5\tok\tpass\t%s\n' "$5"
    [[ ${6:-} == end ]] && printf '# end: ok 2026-12-01T00:00:00Z\n'
  } >"$1"
}

# report DIR: run it (10 s at most) into $tmp/out, $tmp/err; sets rc
report() {
  timeout 10 "$BIN" report "$1" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# 1. a FIFO and a directory named *.tsv among good files
d=$tmp/fifo
mkdir -p "$d/sub/dir.tsv"
toy "$d/a.tsv" 2 p1 "plateau bench toy" ROW_A end
mkfifo "$d/pipe.tsv"
report "$d"
[[ $rc == 0 ]] && pass || fail "FIFO in the run: exit $rc (124: it hung)"
grep -q "pipe.tsv: not a regular file" "$tmp/err" && pass || fail "FIFO: no message: $(cat "$tmp/err")"
grep -q "dir.tsv: not a regular file" "$tmp/err" && pass || fail "directory *.tsv: no message"
grep -q ROW_A "$d/report/toy.md" && pass || fail "FIFO: the good file was not reported"

# 2. other schema versions: refused by name, never merged
d=$tmp/version
mkdir -p "$d"
toy "$d/a.tsv" 2 p1 "plateau bench toy" ROW_V2 end
toy "$d/b.tsv" 3 p2 "plateau bench toy" ROW_V3 end
toy "$d/c.tsv" 2x p3 "plateau bench toy" ROW_V2X end
report "$d"
[[ $rc == 0 ]] && pass || fail "versions: exit $rc"
grep -q "b.tsv: result schema version 3 is not one this plateau reads" "$tmp/err" && pass ||
  fail "version 3: no message: $(cat "$tmp/err")"
grep -q "c.tsv: result schema version '2x'" "$tmp/err" && pass || fail "version 2x: no message"
if grep -q "ROW_V3\|ROW_V2X" "$d/report/toy.md"; then fail "rows of a refused version were merged"; else pass; fi
# versions 1 and 2 in one run: said, and listed
d=$tmp/mixed
mkdir -p "$d"
toy "$d/a.tsv" 2 p1 "plateau bench toy" ROW_NEW end
toy "$d/b.tsv" 1 p2 "plateau bench toy" ROW_OLD end
report "$d"
grep -q "mixes result schema versions: 1 file of an older version" "$tmp/err" && pass ||
  fail "mixed versions: no message: $(cat "$tmp/err")"
grep -q '`b.tsv`: result schema version 1, read through the version-1 column mapping' "$d/report/toy.md" && pass ||
  fail "mixed versions: the report does not list the v1 file"

# 3. unfinished files
d=$tmp/killed
mkdir -p "$d"
toy "$d/a-complete.tsv" 2 p1 "plateau bench toy --x" ROW_DONE end
toy "$d/b-killed.tsv" 2 p1 "plateau bench toy --x" ROW_KILLED         # same point: superseded
toy "$d/c-killed.tsv" 2 - "plateau bench toy --y" ROW_ALONE           # no rerun: kept, marked
toy "$d/d-complete.tsv" 2 - "plateau bench toy --z" ROW_Z end
toy "$d/e-killed.tsv" 2 - "plateau bench toy --z" ROW_ZK              # same argv: superseded
report "$d"
md=$d/report/toy.md
[[ $rc == 0 ]] && pass || fail "unfinished: exit $rc"
if grep -q "ROW_KILLED\|ROW_ZK" "$md"; then fail "a superseded unfinished run's rows were reported"; else pass; fi
grep -q ROW_DONE "$md" && grep -q ROW_Z "$md" && grep -q ROW_ALONE "$md" && pass || fail "complete rows missing"
grep -q '`b-killed.tsv`: unfinished; superseded by `a-complete.tsv`' "$md" && pass || fail "no superseded note (point)"
grep -q '`e-killed.tsv`: unfinished; superseded by `d-complete.tsv`' "$md" && pass || fail "no superseded note (argv)"
grep -q '`c-killed.tsv`: unfinished (no `# end:` line' "$md" && pass || fail "no unfinished note"
grep -q "b-killed.tsv: unfinished (no '# end:' line) and superseded by .*a-complete.tsv" "$tmp/err" && pass ||
  fail "no superseded message on stderr: $(cat "$tmp/err")"

echo "test_report_trust.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
