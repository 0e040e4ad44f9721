#!/usr/bin/env bash
# test_report_trust.sh — `plateau report` trusts nothing it reads:
#  - a FIFO (or a directory) named *.tsv is skipped at once with a message,
#    never waited on, and the other files are reported (exit 0);
#  - a file of another schema version (3, "2x") is refused by name and its
#    rows appear nowhere; a run mixing versions 1 and 2 says so on stderr and
#    lists the older files in the report;
#  - an unfinished file (no `# end:` line) is reported and listed as such; a
#    complete rerun of the same point (same `point`, or same argv and ranks)
#    supersedes it: its rows are left out and the report says which file won;
#  - rows whose grouping keys are not numbers (a train row's virtual_world
#    "-" or "nan": NaN never equals itself, and a group loop that compared
#    it never moved on, writing train.md until the disk was full) are left
#    out with a warning naming file:line, the other rows reported, at once;
#  - a run killed in its first point (each bench's file of the CPU reference
#    cut after its header: metadata, header, no row, no `# end:`) still gets
#    its report, saying no complete row was recorded, exit 0, and no note is
#    appended to a report that does not exist; adam and attention runs whose
#    every row failed likewise say so (exit 0);
#  - nothing is written through a symbolic link: links in RUN_DIR/report
#    (to a file outside the run, dangling) are replaced by the report's
#    files and what they point to is untouched; the charts likewise.
# The files are written by hand (a bench `toy` with the generic report), so
# the test runs in a second.  Usage: BUILD=build bash suite/report/test_report_trust.sh
set -uo pipefail
PL_TEST=test_report_trust.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
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

# 4. keys that are not numbers: the row is left out, named, nothing hangs
d=$tmp/nan
mkdir -p "$d"
{
  printf '# plateau-results: 2\n# bench: train\n# backend: cpu\n'
  printf 'bench\tsystem\tmodel\tvariant\tranks\tvirtual_world\tseq\ttok_s_gpu\ttflops\tstatus\tcheck\tnote\n'
  printf 'train\tplateau\ttiny\tv\t2\t-\t64\t10\t0.1\tok\tskip\t-\n'
  printf 'train\tplateau\ttiny\tv\t2\tnan\t128\t11\t0.1\tok\tskip\t-\n'
  printf 'train\tplateau\ttiny\tv\t2\t2\t256\t12\t0.1\tok\tskip\t-\n'
  printf 'train\tfsdp2\ttiny\tw\t2\t2\t-\t13\t0.1\tok\tskip\t-\n'
  printf '# end: ok 2026-12-01T00:00:00Z\n'
} >"$d/train.x.tsv"
report "$d"
[[ $rc == 0 ]] && pass || fail "NaN keys: exit $rc (124: it looped)"
for w in "train.x.tsv:5: row left out of the train report: virtual_world is '-'" \
  "train.x.tsv:6: row left out of the train report: virtual_world is 'nan'" \
  "train.x.tsv:8: row left out of the train report: seq is '-'"; do
  grep -qF "$w" "$tmp/err" && pass || fail "NaN keys: no warning '$w': $(head -c 400 "$tmp/err")"
done
md=$d/report/train.md
[[ $(stat -c %s "$md" 2>/dev/null || echo 0) -lt 100000 ]] && pass || fail "NaN keys: train.md is $(stat -c %s "$md") bytes"
grep -q "^| 0 | tiny | 256 | plateau | v |" "$md" && pass || fail "NaN keys: the good row is not in train.md"
grep -q "^> 3 rows left out: a key column" "$md" && pass || fail "NaN keys: train.md does not say rows were left out"

# 5. symbolic links in RUN_DIR/report: replaced, never written through
d=$tmp/links
mkdir -p "$d/report"
toy "$d/a.tsv" 2 p1 "plateau bench toy" ROW_L end
echo "outside, untouched" >"$tmp/outside.md"
ln -s "$tmp/outside.md" "$d/report/toy.md"
ln -s /nonexistent/dir/points.md "$d/report/points.md"
report "$d"
[[ $rc == 0 ]] && pass || fail "links: exit $rc: $(cat "$tmp/err")"
[[ $(cat "$tmp/outside.md") == "outside, untouched" ]] && pass || fail "links: the file outside the run was written"
[[ -f $d/report/toy.md && ! -L $d/report/toy.md ]] && grep -q ROW_L "$d/report/toy.md" && pass ||
  fail "links: report/toy.md is not the report's file"
grep -q "report/toy.md was a symbolic link (to $tmp/outside.md): replaced" "$tmp/err" && pass ||
  fail "links: no warning: $(cat "$tmp/err")"
[[ -z $(find "$d/report" -name '.*') ]] && pass || fail "links: temporary files left: $(ls -a "$d/report")"
if command -v gnuplot >/dev/null; then # a chart's link, through gnuplot
  d=$tmp/chartlink
  mkdir -p "$d/report"
  {
    printf '# plateau-results: 2\n# bench: train\n# backend: cpu\n'
    printf 'bench\tsystem\tmodel\tvariant\tranks\tvirtual_world\tseq\ttok_s_gpu\ttflops\tstatus\tcheck\tnote\n'
    printf 'train\tplateau\ttiny\tv\t2\t2\t64\t10\t0.1\tok\tskip\t-\n'
    printf '# end: ok 2026-12-01T00:00:00Z\n'
  } >"$d/train.x.tsv"
  echo "outside chart" >"$tmp/outside.svg"
  ln -s "$tmp/outside.svg" "$d/report/train-context.svg"
  unset PLATEAU_GNUPLOT
  report "$d"
  export PLATEAU_GNUPLOT=/nonexistent/gnuplot
  [[ $rc == 0 && $(cat "$tmp/outside.svg") == "outside chart" && ! -L $d/report/train-context.svg ]] &&
    grep -q "<svg" "$d/report/train-context.svg" && pass || fail "chart link: exit $rc, $(cat "$tmp/err")"
fi

# 6. a run killed in its first point: a report per bench, saying so
for f in "$ROOT"/results/reference/cpu/*.tsv; do
  b=$(sed -n 's/^# bench: //p' "$f")
  d=$tmp/killed-$b
  mkdir -p "$d"
  awk '/^# end:/ {next} /^#/ {print; next} {print; exit}' "$f" >"$d/$(basename "$f")"
  report "$d"
  [[ $rc == 0 ]] && pass || fail "killed $b: exit $rc: $(head -3 "$tmp/err")"
  grep -q "notes of" "$tmp/err" && fail "killed $b: $(grep "notes of" "$tmp/err")" || pass
  grep -q "^No rows: no complete row was recorded (the run was killed before its first row" "$d/report/$b.md" &&
    grep -q "unfinished .*; no complete row$" "$d/report/$b.md" && pass ||
    fail "killed $b: report/$b.md does not say no complete row was recorded: $(ls "$d/report" 2>&1)"
done
# every row failed: adam and attention still write their report (exit 0)
for b in adam attention; do
  f=$(ls "$ROOT"/results/reference/cpu/$b.*.tsv)
  d=$tmp/allfail-$b
  mkdir -p "$d"
  awk -F'\t' -v OFS='\t' '/^#/ {print; next} !h {for (i = 1; i <= NF; i++) if ($i == "status") c = i; h = 1; print; next}
    {$c = "oom"; print}' "$f" >"$d/$(basename "$f")"
  report "$d"
  [[ $rc == 0 ]] && grep -q "^No rows: no ok $b row" "$d/report/$b.md" && pass ||
    fail "every $b row failed: exit $rc, $(head -2 "$tmp/err"), $(ls "$d/report" 2>&1)"
done

echo "test_report_trust.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
