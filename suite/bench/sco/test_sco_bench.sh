#!/usr/bin/env bash
# test_sco_bench.sh — `plateau bench sco` and `plateau bench maxbatch` end to
# end on the CPU backend:
#  - bad options exit 2 (harness-parsed ones) with a message and no result
#    file; a bad --budgets list (checked by the bench) also exits 2 and
#    leaves no result file; maxbatch under mpirun -np 2 is refused;
#  - the small preset under mpirun -np 2: every row ok, check pass (bit-exact
#    vs budget 0, Eq. 4 bound), |S| and pinned host bytes = |S|·N·H·b growing
#    with the budget, device peak non-increasing with the budget and lower at
#    "all" than at 0; the same with --release step;
#  - maxbatch with --mem-limit (the CPU "device" capacity), trials under
#    mpirun -np 2: exits 0, per budget a summary with largest clean N and first
#    failing N = clean + step, the trial at the first failing N is an oom row,
#    the one at the clean N ok, budget all fits more than budget 0; each trial's
#    own result file exists;
#  - a trial that crashes (SIGSEGV from a launcher wrapper above some N) does
#    not kill the search: its rows say error/signal, the largest clean N is
#    still found, and the summary is an error (a crash is no memory bound);
#  - pl_report_sco (through `plateau report` when wired) is covered by
#    build/tests/suite/test_report_sco.
# Usage: BUILD=build bash suite/bench/sco/test_sco_bench.sh   (run from anywhere)
set -uo pipefail
PL_TEST=test_sco_bench.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# col FILE NAME: index (1-based) of a column in a result file's header
col() { awk -F'\t' -v n="$2" '!/^#/ { for (i = 1; i <= NF; i++) if ($i == n) { print i; exit } print "NOCOL:" n; exit 1 }' "$1"; }
# rows FILE: the data rows (no '#' lines, no header)
rows() { awk '!/^#/ && h++' "$1"; }

# expect_bad RCS NEEDLE CMD...: exit code in RCS (e.g. "2" or "2 3"), stderr names NEEDLE, no .tsv under $tmp/bad
expect_bad() {
  local rcs=$1 needle=$2
  shift 2
  rm -rf "$tmp/bad"
  "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [[ " $rcs " != *" $rc "* ]]; then
    fail "$* -> exit $rc (want $rcs)"; tail -3 "$tmp/stderr"; return
  fi
  if ! grep -q -- "$needle" "$tmp/stderr"; then
    fail "$*: stderr does not name '$needle'"; tail -3 "$tmp/stderr"; return
  fi
  if [[ -n $(find "$tmp/bad" -name '*.tsv' 2>/dev/null) ]]; then
    fail "$*: left a result file"; return
  fi
  pass
}

echo "== bad options"
O=(-o "$tmp/bad")
expect_bad 2 "tokens" "$BIN" bench sco "${O[@]}" --tokens=12Q
expect_bad 2 "dtype" "$BIN" bench sco "${O[@]}" --dtype=f16
expect_bad 2 "layers" "$BIN" bench sco "${O[@]}" --layers=0
expect_bad 2 "release" "$BIN" bench sco "${O[@]}" --release=never
expect_bad 2 "budget-steps" "$BIN" bench sco "${O[@]}" --budget-steps=0
expect_bad 2 "preset" "$BIN" bench sco "${O[@]}" --preset=huge
expect_bad 2 "step" "$BIN" bench maxbatch "${O[@]}" --step=0
expect_bad 2 "bench" "$BIN" bench maxbatch "${O[@]}" --bench=vocab
# checked by the bench itself after the harness has opened its file: the
# harness exits 3 for any failing run (2 would need bench.c to map PL_EINVAL)
expect_bad 2 "budgets" "$BIN" bench sco "${O[@]}" --preset small --budgets=0,lots
expect_bad 2 "budgets" "$BIN" bench sco "${O[@]}" --preset small --budgets=0,,all
expect_bad "2 3" "budget-steps" "$BIN" bench maxbatch "${O[@]}" --preset small --budget-steps=2
expect_bad "2 3" "one process" $MPIRUN -np 2 "$BIN" bench maxbatch "${O[@]}" --preset small

# check_sweep FILE LABEL: the sweep's invariants
check_sweep() {
  local f=$1 label=$2
  local cs cc cb csel cp ch ct cn cl
  cs=$(col "$f" status) cc=$(col "$f" check) cb=$(col "$f" budget_bytes) csel=$(col "$f" selected)
  cp=$(col "$f" dev_peak_bytes) ch=$(col "$f" host_peak_bytes) ct=$(col "$f" tokens) cn=$(col "$f" hidden)
  cl=$(col "$f" layers)
  local n
  n=$(rows "$f" | wc -l)
  [[ $n -ge 2 ]] || { fail "$label: $n rows"; return; }
  local bad
  bad=$(rows "$f" | awk -F'\t' -v s="$cs" -v c="$cc" '$s != "ok" || $c != "pass" { print }')
  [[ -z $bad ]] || { fail "$label: rows not ok/pass:"; echo "$bad"; return; }
  # sorted by budget: |S| and pinned bytes non-decreasing, host = |S|·N·H·2 (bf16), peak non-increasing
  bad=$(rows "$f" | sort -t$'\t' -k"$cb,$cb"n | awk -F'\t' -v sel="$csel" -v p="$cp" -v h="$ch" -v t="$ct" -v hh="$cn" -v l="$cl" '
    NR == 1 { p0 = $p }
    NR > 1 && ($sel < ps || $p > pp) { print "not monotone at budget row " NR ": |S| " $sel " peak " $p }
    $h != $sel * $t * $hh * 2 { print "pinned " $h " != |S|·N·H·2 = " $sel * $t * $hh * 2 }
    { ps = $sel; pp = $p; lastsel = $sel; lastp = $p; L = $l }
    END { if (lastsel != L) print "largest budget selects " lastsel " of " L;
          if (!(lastp < p0)) print "peak at all (" lastp ") not below budget 0 (" p0 ")" }')
  [[ -z $bad ]] || { fail "$label: $bad"; return; }
  pass
}

echo "== small preset, 2 ranks"
out=$tmp/sweep
if $MPIRUN -np 2 "$BIN" bench sco --preset small -n 3 -w 0 -o "$out" >"$tmp/sweep.log" 2>&1; then
  f=$(ls "$out"/sco.*.tsv 2>/dev/null | head -1)
  if [[ -z $f ]]; then fail "sweep: no result file"; else
    check_sweep "$f" "sweep (release context)"
    [[ $(rows "$f" | wc -l) -eq 5 ]] && pass || fail "sweep: want 5 budgets (0, 1/4 … all)"
    grep -q "boundary=" "$f" && pass || fail "sweep: no live set with boundary bytes"
  fi
else
  fail "sweep: exit $?"; tail -20 "$tmp/sweep.log"
fi

echo "== release step, explicit budgets, 2 ranks"
out=$tmp/step
if $MPIRUN -np 2 "$BIN" bench sco --preset small --release step --budgets 0,32Ki,all -n 2 -o "$out" >"$tmp/step.log" 2>&1; then
  f=$(ls "$out"/sco.*.tsv | head -1)
  check_sweep "$f" "sweep (release step)"
  # 32Ki of 256·64·2 = 32 KiB boundaries: exactly one selected
  [[ $(rows "$f" | awk -F'\t' -v b="$(col "$f" budget)" -v s="$(col "$f" selected)" '$b == "32Ki" { print $s }') == 1 ]] &&
    pass || fail "budget 32Ki should select 1 boundary"
else
  fail "step sweep: exit $?"; tail -20 "$tmp/step.log"
fi

# check_search FILE BUDGET STEP: summary and trial rows of one budget; prints max_ok
check_search() {
  local f=$1 b=$2 step=$3
  local ck cb cst cmo cff ctok
  ck=$(col "$f" kind) cb=$(col "$f" budget) cst=$(col "$f" status) cmo=$(col "$f" max_ok_tokens)
  cff=$(col "$f" first_fail_tokens) ctok=$(col "$f" tokens)
  local line lo hi
  line=$(rows "$f" | awk -F'\t' -v k="$ck" -v bb="$cb" -v b="$b" '$k == "summary" && $bb == b')
  lo=$(echo "$line" | cut -f"$cmo") hi=$(echo "$line" | cut -f"$cff")
  if [[ -z $line || $(echo "$line" | cut -f"$cst") != ok ]]; then fail "maxbatch budget $b: summary: $line" >&2; return; fi
  [[ $lo -gt 0 && $hi -eq $((lo + step)) ]] || { fail "maxbatch budget $b: lo=$lo hi=$hi step=$step" >&2; return; }
  local slo shi
  slo=$(rows "$f" | awk -F'\t' -v k="$ck" -v bb="$cb" -v b="$b" -v t="$ctok" -v n="$lo" -v s="$cst" '$k == "trial" && $bb == b && $t == n { print $s }')
  shi=$(rows "$f" | awk -F'\t' -v k="$ck" -v bb="$cb" -v b="$b" -v t="$ctok" -v n="$hi" -v s="$cst" '$k == "trial" && $bb == b && $t == n { print $s }')
  [[ $slo == ok ]] || { fail "maxbatch budget $b: trial at N=$lo is '$slo'" >&2; return; }
  echo "$shi" >"$tmp/shi"
  echo "$lo"
}

echo "== maxbatch with --mem-limit, trials under mpirun -np 2"
out=$tmp/mb
step=64
if "$BIN" bench maxbatch --preset small --mem-limit 2Mi --step $step --start 256 --budgets 0,all \
  --launcher "$MPIRUN -np 2" -o "$out" >"$tmp/mb.log" 2>"$tmp/mb.err"; then
  f=$(ls "$out"/maxbatch.*.tsv | head -1)
  lo0=$(check_search "$f" 0 $step)
  [[ $(cat "$tmp/shi" 2>/dev/null) == oom ]] && pass || fail "maxbatch budget 0: first failing trial is not oom"
  rm -f "$tmp/shi"
  loa=$(check_search "$f" all $step)
  [[ $(cat "$tmp/shi" 2>/dev/null) == oom ]] && pass || fail "maxbatch budget all: first failing trial is not oom"
  [[ -n $lo0 && -n $loa && $loa -gt $lo0 ]] && pass || fail "maxbatch: budget all ($loa) should fit more than budget 0 ($lo0)"
  ntrial=$(rows "$f" | awk -F'\t' -v k="$(col "$f" kind)" '$k == "trial"' | wc -l)
  nfiles=$(ls "$out"/sco.*.tsv | wc -l)
  [[ $ntrial -ge 4 && $nfiles -eq $ntrial ]] && pass || fail "maxbatch: $ntrial trial rows, $nfiles trial files"
  # the trials ran on 2 ranks
  [[ $(rows "$f" | awk -F'\t' -v k="$(col "$f" kind)" -v r="$(col "$f" ranks)" '$k == "trial" && $r != 2' | wc -l) -eq 0 ]] &&
    pass || fail "maxbatch: trials not on 2 ranks"
  echo "   budget 0: $lo0 tokens/rank, all: $loa"
else
  fail "maxbatch: exit $?"; tail -20 "$tmp/mb.err"; tail -20 "$tmp/mb.log"
fi

echo "== maxbatch survives crashing trials"
cat >"$tmp/crash.sh" <<'EOF'
#!/bin/sh
# a launcher that crashes (SIGSEGV) any trial with N >= 512, runs the others
for a in "$@"; do
  case "$a" in --tokens=*) n=${a#--tokens=}; [ "$n" -ge 512 ] && kill -SEGV $$ ;; esac
done
exec "$@"
EOF
chmod +x "$tmp/crash.sh"
out=$tmp/crash
if "$BIN" bench maxbatch --preset small --step 128 --start 128 --budgets 0 --launcher "$tmp/crash.sh" -o "$out" \
  >"$tmp/crash.log" 2>"$tmp/crash.err"; then
  f=$(ls "$out"/maxbatch.*.tsv | head -1)
  # a crash is an error, not a memory bound: the summary says so
  sum=$(rows "$f" | awk -F'\t' -v k="$(col "$f" kind)" '$k == "summary"')
  [[ $(echo "$sum" | cut -f"$(col "$f" max_ok_tokens)") == 384 &&
     $(echo "$sum" | cut -f"$(col "$f" first_fail_tokens)") == 512 &&
     $(echo "$sum" | cut -f"$(col "$f" status)") == error ]] && pass ||
    fail "crash search: summary $sum (want 384, 512, error)"
  grep -q $'error\tskip\tkilled by signal 11' "$f" && pass || fail "crash search: no 'killed by signal 11' error row"
else
  fail "crash search: exit $?"; tail -20 "$tmp/crash.err"
fi

echo "== a signal to the search stops the running trial too"
printf '#!/bin/sh\necho $$ > "%s"\nsleep 60\n' "$tmp/slow.pid" >"$tmp/slow.sh"
chmod +x "$tmp/slow.sh"
"$BIN" bench maxbatch --preset small --budgets 0 --launcher "$tmp/slow.sh" -o "$tmp/sig" >"$tmp/sig.log" 2>&1 &
parent=$!
for _ in $(seq 100); do [[ -s $tmp/slow.pid ]] && break; sleep 0.1; done
kill -TERM $parent
for _ in $(seq 50); do kill -0 $parent 2>/dev/null || break; sleep 0.1; done
if kill -0 $parent 2>/dev/null; then
  fail "maxbatch did not stop on SIGTERM"; kill -KILL $parent
  [[ -s $tmp/slow.pid ]] && kill -KILL "$(cat "$tmp/slow.pid")" 2>/dev/null
elif [[ ! -s $tmp/slow.pid ]]; then
  fail "the slow trial never started"
elif sleep 0.5; kill -0 "$(cat "$tmp/slow.pid")" 2>/dev/null; then
  fail "the trial survived the search's SIGTERM"; kill -KILL "$(cat "$tmp/slow.pid")"
else
  pass
fi
wait $parent 2>/dev/null

echo "== maxbatch whose trials cannot run: error rows, exit 3"
out=$tmp/false
"$BIN" bench maxbatch --preset small --budgets 0 --launcher false -o "$out" >"$tmp/false.log" 2>&1
rc=$?
f=$(ls "$out"/maxbatch.*.tsv 2>/dev/null | head -1)
[[ $rc -eq 3 && -n $f ]] && grep -q $'summary\tsco\t0' "$f" && pass || fail "launcher false: exit $rc (want 3) and a summary row"

echo "test_sco_bench.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
