#!/usr/bin/env bash
# test_compare.sh — `plateau compare NEW REF` on CPU runs:
#  - a copy of a run passes (exit 0); the same run slowed by 10% (every time
#    up 10%, every rate down 10%) fails (exit 1) on time and rate with a
#    tight spread, and passes "within the noise" when the spreads overlap
#    (and fails again with --noise off);
#  - memory is exact: one byte more fails, --tol memory=1% lets it pass;
#  - a row whose status went ok -> oom fails;
#  - tolerances: --tol time=15% --tol rate=15% passes the slowed run; a
#    bench-specific override wins over a kind; REF/tolerances is read;
#    --tol-file works; skip skips;
#  - rows only in NEW are NEW, rows of REF missing from NEW are MISSING (exit
#    1 only with --strict);
#  - exit codes: 2 usage, 3 I/O, 4 nothing compared;
#  - the committed reference against itself passes (v1 files included); a
#    copy of each GPU reference passes and the same rows 10% slower fail; and
#    every schema column is classified (key, metric kind or ignored);
#  - the noise rule of every time: two identical back-to-back runs of
#    `bench train --preset cpu` compare as PASS, three times (the step's
#    parts — attention_ms ... zero3_ms, sub-millisecond on a CPU — included);
#    a pair is run again (up to 3 times), and says so, when a time moved
#    beyond every spread (the machine's load changed between the two runs);
#    the same run 10% slower with a tight spread fails on its step time; a
#    part that doubled from 0.4 ms (no spread known) passes under the 1 ms
#    floor, and fails with --noise off;
#  - tolerance files: a directory or a FIFO is refused at once (exit 2), a
#    missing file is exit 3; an empty side is exit 3, not a crash.
# Usage: BUILD=build bash suite/cli/test_compare.sh
set -uo pipefail
PL_TEST=test_compare.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
export OMP_NUM_THREADS=1

run=$tmp/run
$MPIRUN -np 2 "$BIN" bench calib --backend cpu --sizes 4Ki:16Ki:x4 --gemm-size 32 -n 5 -w 1 -o "$run" >/dev/null 2>&1 ||
  fail "calib run"
$MPIRUN -np 2 "$BIN" bench sco --backend cpu --preset small --budget-steps 1 -n 3 -w 0 -o "$run" >/dev/null 2>&1 ||
  fail "sco run"
[[ $(find "$run" -name '*.tsv' | wc -l) == 2 ]] || { fail "want 2 result files"; exit 1; }

# transform SRC DST AWK-ACTION: every data row of every file, columns by name
transform() {
  rm -rf "$2"
  mkdir -p "$2"
  for f in "$1"/*.tsv; do
    awk -F'\t' -v OFS='\t' "
      /^#/ { print; next }
      !h { for (i = 1; i <= NF; i++) c[\$i] = i; h = 1; print; next }
      { $3; print }" "$f" >"$2/$(basename "$f")"
  done
}
TIME='split("time_ms time_p10_ms time_p90_ms fwd_ms dense_ms a2a_ms gpu_ms cpu_ms update_ms", T, " ")'
RATE='split("tflops dense_tflops ratio tok_s_gpu gparam_s algbw_gbs busbw_gbs a2a_gbs acc_gbs h2d_gbs d2h_gbs link_h2d_gbs link_d2h_gbs link_bidir_gbs", R, " ")'
# scale every time by F and every rate by 1/F (a run F times slower)
scale() { echo "$TIME; $RATE; for (k in T) if (c[T[k]] && \$c[T[k]] != \"-\") \$c[T[k]] *= $1; for (k in R) if (c[R[k]] && \$c[R[k]] != \"-\") \$c[R[k]] /= $1"; }
# set the spread of time_ms to +-S (fraction)
spread() { echo "if (c[\"time_ms\"] && \$c[\"time_ms\"] != \"-\") { m = \$c[\"time_ms\"]; \$c[\"time_p10_ms\"] = m * (1 - $1); \$c[\"time_p90_ms\"] = m * (1 + $1) }"; }

transform "$run" "$tmp/ref" "$(spread 0.02)"           # the reference: a tight spread
transform "$tmp/ref" "$tmp/same" "1"                    # an identical copy
transform "$tmp/ref" "$tmp/slow" "$(scale 1.10)"        # 10% slower
transform "$run" "$tmp/refwide" "$(spread 0.3)"         # a wide spread
transform "$tmp/refwide" "$tmp/slowwide" "$(scale 1.10)"
transform "$tmp/ref" "$tmp/mem" 'if (c["dev_peak_bytes"] && $c["dev_peak_bytes"] != "-") $c["dev_peak_bytes"] += 1'
transform "$tmp/ref" "$tmp/oom" 'if (c["variant"] && $c["variant"] == "h2d") { $c["status"] = "oom"; $c["note"] = "PL_ENOMEM: injected" }'

cmpr() { # WANT_RC ARGS...: plateau compare ARGS exits WANT_RC; output in $tmp/out
  local want=$1
  shift
  "$BIN" compare "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [[ $rc != "$want" ]]; then
    fail "compare $* -> exit $rc (want $want)"; tail -5 "$tmp/out"; return 1
  fi
  pass
}
has() { if grep -qE -- "$1" "$tmp/out"; then pass; else fail "output lacks /$1/"; tail -5 "$tmp/out"; fi; }

cmpr 0 "$tmp/same" "$tmp/ref" && has "-> PASS$" && has " 0 fail"
cmpr 1 "$tmp/slow" "$tmp/ref" && has "-> REGRESSION$" &&
  has "^   time_ms .* 1\.100 +\+5% +FAIL +beyond the spread" && has "^   algbw_gbs .* 0\.909 +-5% +FAIL"
cmpr 0 "$tmp/slowwide" "$tmp/refwide" && has "time_ms .* PASS +within the noise" && has "-> PASS$"
cmpr 1 "$tmp/slowwide" "$tmp/refwide" --noise off && has "time_ms .* FAIL +spreads overlap"
cmpr 0 "$tmp/slow" "$tmp/ref" --tol time=15% --tol rate=15%
cmpr 1 "$tmp/slow" "$tmp/ref" --tol time=15% --tol rate=15% --tol calib:time_ms=2% && has "^   time_ms .* \+2% +FAIL"
cmpr 0 "$tmp/slow" "$tmp/ref" --tol time=skip --tol rate=skip && has "SKIP"
printf '# loose\ntime = 15%%   # times\nrate=0.15\n' >"$tmp/tolfile"
cmpr 0 "$tmp/slow" "$tmp/ref" --tol-file "$tmp/tolfile"
cp "$tmp/tolfile" "$tmp/ref/tolerances"
cmpr 0 "$tmp/slow" "$tmp/ref"
rm -f "$tmp/ref/tolerances"
cmpr 1 "$tmp/mem" "$tmp/ref" && has "dev_peak_bytes .* exact +FAIL +\+1$"
cmpr 0 "$tmp/mem" "$tmp/ref" --tol memory=1%
cmpr 1 "$tmp/oom" "$tmp/ref" && has "^   status +ok +oom .* FAIL +PL_ENOMEM: injected"
# NEW and MISSING: the calib file alone against both, and the other way
mkdir -p "$tmp/calibonly" && cp "$tmp/ref"/calib.*.tsv "$tmp/calibonly/"
awk -F'\t' -v OFS='\t' '/^#/ {print; next} !h {print; h = 1; next} NR % 2 {print}' "$tmp/calibonly"/calib.*.tsv >"$tmp/half.tsv"
cmpr 0 "$tmp/half.tsv" "$tmp/calibonly" && has "MISSING +not in NEW"
cmpr 1 "$tmp/half.tsv" "$tmp/calibonly" --strict && has "REGRESSION"
cmpr 0 "$tmp/calibonly" "$tmp/half.tsv" && has "NEW +no reference row"
# a metric without a value is never a silent PASS: NEW's nan, "-" or no
# such column fails (--allow-missing: NO VALUE, counted); REF's is NO VALUE;
# every metric "-" fails, and with --allow-missing nothing was compared (4)
transform "$tmp/ref" "$tmp/nan" 'if ($c["variant"] == "h2d" && $c["bytes"] == 4096) $c["time_ms"] = "nan"'
cmpr 1 "$tmp/nan" "$tmp/ref" --brief && has "^   time_ms .* nan +- +- +FAIL +NEW has no value" &&
  has " 1 fail, 0 skipped, 0 without a value; .* -> REGRESSION$"
cmpr 0 "$tmp/nan" "$tmp/ref" --brief --allow-missing && has "^   time_ms .* nan .* NO VALUE NEW has no value" &&
  has " 0 fail, 0 skipped, 1 without a value; .* -> PASS$"
cmpr 0 "$tmp/ref" "$tmp/nan" --brief && has "^   time_ms +nan .* NO VALUE REF has no value" && has "1 without a value"
cmpr 0 "$tmp/ref" "$tmp/nan" --brief --tol calib:time_ms=skip && has " 0 without a value"
METRICS=$("$BIN" compare --classify $(grep -hv '^#' "$tmp/ref"/*.tsv | grep '^bench' | tr '\t' ' ') |
  awk '$1 ~ /^(time|rate|memory|capacity)$/ {printf "%s ", $2}')
transform "$tmp/ref" "$tmp/dash" "split(\"$METRICS\", M, \" \"); for (k in M) if (c[M[k]]) \$c[M[k]] = \"-\""
cmpr 1 "$tmp/dash" "$tmp/ref" --brief && has " 0 pass .* -> REGRESSION$"
cmpr 4 "$tmp/dash" "$tmp/ref" --allow-missing && has " 0 fail, .* -> NOTHING COMPARED$"
cmpr 4 "$tmp/dash" "$tmp/dash" && has "0 metrics: .* -> NOTHING COMPARED$"
mkdir -p "$tmp/nocol"
for f in "$tmp/ref"/*.tsv; do # the column dev_peak_bytes cut out of every line
  awk -F'\t' -v OFS='\t' '/^#/ {print; next} !h {for (i = 1; i <= NF; i++) if ($i == "dev_peak_bytes") d = i; h = 1}
    {o = ""; for (i = 1; i <= NF; i++) if (i != d) o = o (o == "" ? "" : OFS) $i; print o}' "$f" >"$tmp/nocol/$(basename "$f")"
done
cmpr 1 "$tmp/nocol" "$tmp/ref" --brief && has "^   dev_peak_bytes +[0-9]+ +no column .*FAIL +NEW has no value"
# a reference row written before a key column was filled for its
# configuration ("-" there) is matched by its other key columns, and compared
transform "$tmp/ref" "$tmp/oldkey" 'if ($c["variant"] == "h2d" && $c["bytes"] == 4096) $c["dtype"] = "-"'
transform "$tmp/ref" "$tmp/slow1" 'if ($c["variant"] == "h2d" && $c["bytes"] == 4096) { $c["time_ms"] *= 3; $c["time_p10_ms"] *= 3; $c["time_p90_ms"] *= 3 }'
cmpr 1 "$tmp/slow1" "$tmp/oldkey" --brief && has "key .* MATCHED +REF has no value in dtype: matched by the other key columns" &&
  has "time_ms .* FAIL" && has " 0 new, 0 missing -> REGRESSION$"
# the sco rows of REF are not MISSING when NEW has no sco at all
cmpr 0 "$tmp/calibonly" "$tmp/ref" && ! grep -q "^== sco" "$tmp/out" && pass
# usage, I/O, nothing compared
cmpr 2 "$tmp/same"
cmpr 2 "$tmp/same" "$tmp/ref" --tol time
cmpr 2 "$tmp/same" "$tmp/ref" --tol nosuch=5%
cmpr 2 "$tmp/same" "$tmp/ref" --format xml
cmpr 2 "$tmp/same" "$tmp/ref" --bogus
cmpr 3 "$tmp/nonexistent" "$tmp/ref"
mkdir -p "$tmp/empty"
cmpr 3 "$tmp/empty" "$tmp/ref"
cmpr 4 "$tmp/calibonly" "$(ls "$tmp"/ref/sco.*.tsv)"
# formats
cmpr 0 "$tmp/same" "$tmp/ref" --format md && has "^\| bench \| configuration \| metric"
cmpr 0 "$tmp/same" "$tmp/ref" --format tsv && has "^calib	"
# the committed references against themselves (v1 files mapped)
for ref in "$ROOT"/results/reference/*/; do
  cmpr 0 "$ref" "$ref" --brief && has " 0 fail"
done
# the GPU references: a copy of each passes; the same rows 10% slower are
# flagged (exit 1, some time or rate FAIL) with their own recorded spreads
for ref in "$ROOT"/results/reference/h200*/; do
  k=$(basename "$ref")
  transform "$ref" "$tmp/$k-same" "1"
  transform "$ref" "$tmp/$k-slow" "$(scale 1.10)"
  cmpr 0 "$tmp/$k-same" "$ref" --brief && has " 0 fail"
  cmpr 1 "$tmp/$k-slow" "$ref" && has "REGRESSION" && has "(time_ms|tflops|tok_s_gpu|gparam_s).*FAIL"
done
# the noise rule on identical runs of the end-to-end bench (one rank)
same_pass=0
for k in 1 2 3; do
  for try in 1 2 3 4 5; do
    rm -rf "$tmp/ta" "$tmp/tb"
    "$BIN" bench train --preset cpu -o "$tmp/ta" >/dev/null 2>&1 || fail "train run a"
    "$BIN" bench train --preset cpu -o "$tmp/tb" >/dev/null 2>&1 || fail "train run b"
    "$BIN" compare "$tmp/tb" "$tmp/ta" >"$tmp/out" 2>&1
    rc=$?
    # a time beyond every spread in a pair of identical runs: the machine's
    # load changed between them (other work on its cores); run the pair again
    [[ $rc == 1 ]] && ! grep -E "FAIL" "$tmp/out" | grep -qv "beyond the spread" && [[ $try -lt 5 ]] && {
      echo "note: identical train runs, pair $k: $(grep -c FAIL "$tmp/out") time(s) beyond the spread (load changed): again"
      continue
    }
    break
  done
  if [[ $rc == 0 ]] && grep -q "PASS$" "$tmp/out"; then
    same_pass=$((same_pass + 1))
  else
    fail "identical train runs, pair $k: exit $rc"
    grep -E "FAIL" "$tmp/out" | head -5
  fi
done
[[ $same_pass == 3 ]] && pass
PARTS='split("attention_ms moe_ms head_ms optimizer_ms zero3_ms sco_ms", Q, " ")'
transform "$tmp/ta" "$tmp/tref" "$(spread 0.02)"
transform "$tmp/tref" "$tmp/tslow" "$(scale 1.10); $PARTS; for (k in Q) if (\$c[Q[k]] != \"-\") \$c[Q[k]] *= 1.10"
cmpr 1 "$tmp/tslow" "$tmp/tref" && has "^ +time_ms .*FAIL"
# (no spread: the step's percentiles unknown, as in a run of one step)
nospread='$c["time_p10_ms"] = "-"; $c["time_p90_ms"] = "-"'
transform "$tmp/tref" "$tmp/tpart0" "$nospread; \$c[\"optimizer_ms\"] = 0.4"
transform "$tmp/tref" "$tmp/tpart1" "$nospread; \$c[\"optimizer_ms\"] = 0.8"
cmpr 0 "$tmp/tpart1" "$tmp/tpart0" && has "optimizer_ms .*PASS +within the noise: \+0.4 ms, under the 1 ms floor"
cmpr 1 "$tmp/tpart1" "$tmp/tpart0" --noise off && has "optimizer_ms .*FAIL"
# tolerance files that are not files, and empty sides
mkdir -p "$tmp/toldir"
cmpr 2 "$tmp/same" "$tmp/ref" --tol-file "$tmp/toldir" && has "tolerance file .*toldir: not a regular file \(a directory\)"
mkfifo "$tmp/tolfifo"
timeout 10 "$BIN" compare "$tmp/same" "$tmp/ref" --tol-file "$tmp/tolfifo" >"$tmp/out" 2>&1
rc=$?
[[ $rc == 2 ]] && has "not a regular file \(a FIFO\)" || fail "FIFO tolerance file: exit $rc (124: it hung)"
cmpr 3 "$tmp/same" "$tmp/ref" --tol-file "$tmp/nosuchfile" && has "tolerance file .*nosuchfile: No such file"
cmpr 3 "$tmp/same" "$tmp/empty" && has "no result files"
# every schema column is classified
unk=$("$BIN" schema | awk -F'`' '/^\| `/ {print $2}' | while read -r c; do
  "$BIN" compare --classify "$c" 2>/dev/null | grep -q '^unknown' && echo "$c"; done)
[[ -z $unk ]] && pass || fail "schema columns compare does not classify: $unk"

echo "test_compare.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
