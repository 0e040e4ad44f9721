#!/usr/bin/env bash
# test_cli.sh — the `plateau` command line, end to end on the CPU backend:
#  - usage errors (bad values, unknown option/bench/command) exit 2 with a
#    message naming the value, and leave no file in the output directory;
#  - --help and info exit 0;
#  - a real 2-rank `plateau bench calib` under mpirun writes one result file
#    whose rows are all status ok / check pass, with its metadata and end line;
#  - --no-check, --sweep and --mem-limit (oom rows) behave;
#  - `plateau report` writes the Markdown table and (gnuplot present) the charts,
#    and without gnuplot still writes the tables and exits 0 with a warning.
# Usage: BUILD=build bash suite/cli/test_cli.sh   (run from anywhere)
set -uo pipefail
PL_TEST=test_cli.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

# expect_usage NEEDLE CMD...: exit 2, stderr names NEEDLE, no file under $tmp/out
expect_usage() {
  local needle=$1
  shift
  rm -rf "$tmp/out"
  "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [[ $rc -ne 2 ]]; then
    fail "$* -> exit $rc (want 2)"; cat "$tmp/stderr"; return
  fi
  if ! grep -qF -- "$needle" "$tmp/stderr"; then
    fail "$* -> message does not name '$needle':"; cat "$tmp/stderr"; return
  fi
  if [[ -e $tmp/out ]] && [[ -n $(find "$tmp/out" -type f) ]]; then
    fail "$* -> wrote files:"; find "$tmp/out" -type f; return
  fi
  pass
}

OUT=(-o "$tmp/out")
expect_usage "abc" "$BIN" bench calib --backend cpu --iters=abc "${OUT[@]}"
expect_usage "abc" "$BIN" bench calib --backend cpu -n abc "${OUT[@]}"
expect_usage "--iters=0" "$BIN" bench calib --backend cpu --iters=0 "${OUT[@]}"
expect_usage "12Q" "$BIN" bench calib --backend cpu --sizes=12Q "${OUT[@]}"
expect_usage "tpu" "$BIN" bench calib --backend=tpu "${OUT[@]}"
expect_usage "warp" "$BIN" bench calib --backend cpu --tests=h2d,warp "${OUT[@]}"
expect_usage "--bogus-option" "$BIN" bench calib --backend cpu --bogus-option "${OUT[@]}"
expect_usage "stray" "$BIN" bench calib --backend cpu stray "${OUT[@]}"
expect_usage "--gemm-size=0" "$BIN" bench calib --backend cpu --gemm-size=0 "${OUT[@]}"
expect_usage "nosuchbench" "$BIN" bench nosuchbench "${OUT[@]}"
expect_usage "missing bench name" "$BIN" bench
expect_usage "nosuchcmd" "$BIN" nosuchcmd
expect_usage "--frobnicate" "$BIN" --frobnicate
expect_usage "'x'" "$BIN" info x
expect_usage "--bad" "$BIN" report --bad
expect_usage "$tmp/nodir" "$BIN" report "$tmp/nodir"
# Every rank parses before anything exists: under mpirun too.
expect_usage "12Q" $MPIRUN -np 2 "$BIN" bench calib --backend cpu --sizes=12Q "${OUT[@]}"
# A CUDA request without a GPU is a usage error, not a crash.
ncuda=$("$BIN" info 2>/dev/null | awk -F': ' '/^CUDA devices visible/ {print $2}')
ncuda=${ncuda:-0}
if [[ $ncuda == 0 ]]; then
  expect_usage "--backend=cuda" "$BIN" bench calib --backend cuda "${OUT[@]}"
fi

# help and info
for cmd in "--help" "help" "bench --help" "bench calib --help" "report --help" "info --help"; do
  # shellcheck disable=SC2086
  if "$BIN" $cmd >"$tmp/stdout" 2>"$tmp/stderr"; then pass; else fail "plateau $cmd -> exit $?"; fi
done
"$BIN" bench calib --help >"$tmp/stdout" 2>&1
grep -q -- "--sizes" "$tmp/stdout" && grep -q -- "--iters" "$tmp/stdout" && pass ||
  fail "bench calib --help lists neither --sizes nor --iters"
# bench train --help: its options in the groups model, layout, operators,
# run, in that order, and none left ungrouped (an option a group list lacks)
"$BIN" bench train --help >"$tmp/stdout" 2>&1
[[ $(grep -E '^ (model|layout|operators|run|other):$' "$tmp/stdout" | tr -d ' \n') == "model:layout:operators:run:" ]] && pass ||
  fail "bench train --help groups: $(grep -E '^ [a-z]+:$' "$tmp/stdout" | tr '\n' ' ')"
awk '/^ model:$/ {g = 1} /^ layout:$/ {g = 2} g == 1 && /--experts=/ {m = 1} g == 2 && /--virtual-world=/ {l = 1}
  END {exit !(m && l)}' "$tmp/stdout" && pass || fail "bench train --help: --experts not under model or --virtual-world not under layout"
# --ep's help states its two defaults (fsdp2 1, plateau all W_v) and no
# third "(default: 1)" against them
ep=$(grep -- '--ep=' "$tmp/stdout")
[[ $ep == *"not given: 1"* && $ep == *"not given: all W_v ranks"* && $ep != *"(default: "* ]] && pass ||
  fail "bench train --help --ep: $ep"
if "$BIN" info >"$tmp/stdout" 2>"$tmp/stderr"; then
  grep -q "^backends built: cpu" "$tmp/stdout" && grep -q "^MPI: " "$tmp/stdout" && pass ||
    { fail "info output"; cat "$tmp/stdout"; }
  # the lines doc/guide/benches.md's "plateau info" says: ten, three more per GPU
  [[ $(wc -l <"$tmp/stdout") == $((10 + 3 * ncuda)) ]] && pass ||
    fail "info prints $(wc -l <"$tmp/stdout") lines, doc/guide/benches.md says $((10 + 3 * ncuda))"
else
  fail "plateau info -> exit $?"; cat "$tmp/stderr"
fi

# col FILE NAME: the values of column NAME of the data rows of a result file
col() {
  awk -F'\t' -v name="$2" '
    /^#/ {next}
    !hdr {for (i = 1; i <= NF; i++) if ($i == name) c = i; hdr = 1; next}
    {print (c ? $c : "NOCOL")}' "$1"
}

# The real thing: 2 ranks, CPU backend, tiny sizes.
run=$tmp/run
$MPIRUN -np 2 "$BIN" bench calib --backend cpu -n 2 -w 1 --sizes 4Ki:64Ki:x4 \
  --gemm-size 64 -o "$run" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "mpirun -np 2 plateau bench calib -> exit $rc"; cat "$tmp/stdout" "$tmp/stderr"
else
  mapfile -t files < <(find "$run" -name '*.tsv')
  if [[ ${#files[@]} -ne 1 ]]; then
    fail "calib wrote ${#files[@]} files (want 1)"
  else
    f=${files[0]}
    # printed path = the file
    [[ $(tail -n 1 "$tmp/stdout") == "$f" ]] && pass || fail "last stdout line is not the result path"
    nrows=$(col "$f" status | wc -l)
    # 7 transfer tests x 3 sizes + 1 GEMM
    [[ $nrows -eq 22 ]] && pass || fail "calib rows: $nrows (want 22)"
    [[ $(col "$f" status | sort -u) == ok ]] && pass || { fail "status not all ok"; col "$f" status | sort | uniq -c; }
    [[ $(col "$f" check | sort -u) == pass ]] && pass || { fail "check not all pass"; col "$f" check | sort | uniq -c; }
    [[ $(col "$f" variant | sort -u | tr '\n' ' ') == "allreduce alltoall bidir d2d d2h gemm h2d sendrecv " ]] && pass ||
      fail "calib tests: $(col "$f" variant | sort -u | tr '\n' ' ')"
    # bandwidths are positive numbers on every transfer row
    bad=$(awk -F'\t' '/^#/ {next} !h {for (i=1;i<=NF;i++) {if ($i=="variant") t=i; if ($i=="algbw_gbs") a=i; if ($i=="tflops") g=i}; h=1; next}
                     $t=="gemm" {if (!($g+0 > 0)) n++; next} {if (!($a+0 > 0)) n++} END {print n+0}' "$f")
    [[ $bad -eq 0 ]] && pass || fail "$bad rows without a positive rate"
    for key in "plateau-results: 2" "bench: calib" "backend: cpu" "ranks: 2" "git_sha: " "mpi: " "start_utc: " "argv: " "hostname: "; do
      grep -q "^# $key" "$f" && pass || fail "metadata '# $key' missing"
    done
    grep -q "^# end: ok " "$f" && pass || fail "no '# end: ok' line"
  fi
fi

# On a GPU machine: the same small calib on the CUDA backend (NCCL), one rank
# per GPU up to 2; every row ok and pass.
if [[ $ncuda -ge 1 ]]; then
  np=$((ncuda >= 2 ? 2 : 1))
  $MPIRUN -np $np "$BIN" bench calib --backend cuda -n 3 -w 2 --sizes 64Ki:4Mi:x4 \
    --gemm-size 512 -o "$tmp/cuda" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  f=$(find "$tmp/cuda" -name '*.tsv' 2>/dev/null | head -n 1)
  if [[ $rc -ne 0 || -z $f ]]; then
    fail "cuda calib on $np rank(s): exit $rc"; cat "$tmp/stdout" "$tmp/stderr"
  else
    [[ $(col "$f" status | sort -u) == ok ]] && [[ $(col "$f" check | sort -u) == pass ]] && pass ||
      { fail "cuda calib rows not all ok/pass"; grep -v '^#' "$f"; }
    grep -q "^# backend: cuda" "$f" && pass || fail "cuda calib: backend metadata"
  fi
else
  echo "note: no CUDA device: the CUDA calib check is skipped"
fi

# --no-check, --sweep, --point: one rank, no mpirun (singleton)
"$BIN" bench calib --backend cpu -n 1 -w 0 --sizes 4Ki --tests h2d,d2h --no-check \
  -o "$tmp/out2" --sweep sw1 --point p7 >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
f=$(find "$tmp/out2/sw1" -name '*.tsv' 2>/dev/null | head -n 1)
if [[ $rc -ne 0 || -z $f ]]; then
  fail "--no-check --sweep run: exit $rc, file '$f'"; cat "$tmp/stderr"
else
  [[ $(col "$f" check | sort -u) == skip ]] && pass || fail "--no-check rows are not check=skip"
  grep -q "^# point: p7" "$f" && grep -q "^# sweep: sw1" "$f" && pass || fail "point/sweep metadata"
fi

# --solo: per-rank tests on rank 0 alone (ranks = 1), collectives on all
$MPIRUN -np 2 "$BIN" bench calib --backend cpu -n 1 -w 0 --sizes 4Ki --tests h2d,allreduce --solo \
  -o "$tmp/out5" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
f=$(find "$tmp/out5" -name '*.tsv' 2>/dev/null | head -n 1)
if [[ $rc -ne 0 || -z $f ]]; then
  fail "--solo run: exit $rc"; cat "$tmp/stderr"
else
  [[ $(paste <(col "$f" variant) <(col "$f" ranks) <(col "$f" check) | tr '\t\n' ': ') == "h2d:1:pass allreduce:2:pass " ]] &&
    pass || { fail "--solo rows"; grep -v '^#' "$f"; }
fi

# --mem-limit: device allocations beyond it are oom rows, not a crash (exit 0)
"$BIN" bench calib --backend cpu -n 1 -w 0 --sizes 4Ki --tests d2d,h2d --mem-limit 1Ki \
  -o "$tmp/out3" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
f=$(find "$tmp/out3" -name '*.tsv' 2>/dev/null | head -n 1)
if [[ $rc -ne 0 || -z $f ]]; then
  fail "--mem-limit run: exit $rc"; cat "$tmp/stderr"
else
  [[ $(col "$f" status | sort -u) == oom ]] && pass || { fail "--mem-limit rows not oom"; cat "$f"; }
fi

# a wrong result must fail its row and make the exit code 1 (fault injected
# into every received buffer just before the comparison)
PLATEAU_CALIB_INJECT_FAULT=1 $MPIRUN -np 2 "$BIN" bench calib --backend cpu -n 1 -w 0 \
  --sizes 4Ki --gemm-size 32 -o "$tmp/out4" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
f=$(find "$tmp/out4" -name '*.tsv' 2>/dev/null | head -n 1)
[[ $rc -eq 1 ]] && pass || { fail "injected fault -> exit $rc (want 1)"; cat "$tmp/stderr"; }
if [[ -n $f ]]; then
  [[ $(col "$f" check | sort -u) == fail ]] && pass || { fail "injected fault: rows not all check=fail"; col "$f" check | sort | uniq -c; }
  [[ $(col "$f" status | wc -l) -eq 8 ]] && pass || fail "injected fault: want 8 rows"
else
  fail "injected fault: no result file"
fi

# report
if "$BIN" report "$run" >"$tmp/stdout" 2>"$tmp/stderr"; then
  md=$run/report/calib.md
  [[ -s $md ]] && grep -q "| h2d |" "$md" && grep -q "| sendrecv |" "$md" && pass ||
    fail "report: $md missing or without rows"
  grep -qF "$md" "$tmp/stdout" && pass || fail "report did not print $md"
  if command -v gnuplot >/dev/null; then
    for fig in calib-bandwidth calib-gemm; do
      [[ -s $run/report/$fig.svg ]] && grep -q "<svg" "$run/report/$fig.svg" && pass || fail "no $fig.svg"
      [[ -s $run/report/$fig.png ]] && [[ $(head -c 4 "$run/report/$fig.png" | od -An -c | tr -d ' ') == "211PNG" ]] &&
        pass || fail "no $fig.png"
    done
  else
    echo "note: gnuplot not installed: chart checks skipped"
  fi
else
  fail "plateau report -> exit $?"; cat "$tmp/stderr"
fi
# without gnuplot: tables still written, exit 0, a warning
rm -rf "$run/report"
if PLATEAU_GNUPLOT=/nonexistent/gnuplot "$BIN" report "$run" >"$tmp/stdout" 2>"$tmp/stderr"; then
  [[ -s $run/report/calib.md ]] && pass || fail "report without gnuplot: no calib.md"
  grep -q "charts were skipped" "$tmp/stderr" && pass || fail "report without gnuplot: no warning"
  [[ ! -e $run/report/calib-bandwidth.svg ]] && pass || fail "report without gnuplot wrote a chart?"
else
  fail "report without gnuplot -> exit $?"
fi
# an empty directory has nothing to report: exit 3
mkdir -p "$tmp/empty"
"$BIN" report "$tmp/empty" >/dev/null 2>&1
rc=$?
[[ $rc -eq 3 ]] && pass || fail "report of an empty dir -> exit $rc (want 3)"

echo "test_cli.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
