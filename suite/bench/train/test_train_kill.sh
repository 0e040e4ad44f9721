#!/usr/bin/env bash
# test_train_kill.sh — `plateau bench train` killed in the middle of a step
# (CPU backend): SIGTERM and SIGKILL of the process, and SIGTERM of mpirun
# over 2 ranks.  The promise of doc/guide/results.md for a killed writer: the result file is
# left unfinished (no `# end:` line), the rows written before the kill are
# whole (every row as many fields as the header; at most one torn last line,
# without its newline), nothing of the run is left running, and the readers
# handle the file (`plateau report` exits 0 and lists it as unfinished).
# Each run is killed while the second of two points steps (S = 2048: some
# seconds a step), after the first point's row is in the file.  About half a minute on 2 cores.
# Usage: BUILD=build bash suite/bench/train/test_train_kill.sh
set -uo pipefail
PL_TEST=test_train_kill.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# the result file of DIR once it has its first row (10 s at most), else ""
first_row() {
  local f
  for _ in $(seq 1 100); do
    f=$(ls "$1"/train.*.tsv 2>/dev/null | head -1)
    if [[ -n $f && $(grep -vc '^#' "$f") -ge 2 ]]; then
      echo "$f"
      return
    fi
    sleep 0.1
  done
}

# processes whose command line names DIR (the run's ranks, mpirun)
alive() {
  local p out=
  for p in /proc/[0-9]*; do
    [[ $p == /proc/$$ || $p == /proc/$BASHPID ]] && continue
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$1" && out+="${p#/proc/} "
  done
  echo "$out"
}

# killed NAME SIGNAL WANT_RC LAUNCH...: run, kill mid-step, check
killed() {
  local name=$1 sig=$2 want=$3
  shift 3
  local d=$tmp/$name
  "$@" bench train --backend cpu --preset cpu --seq 64,2048 -w 0 -n 3 -o "$d" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local pid=$! f
  f=$(first_row "$d")
  if [[ -z $f ]]; then
    fail "$name: no first row within 10 s: $(tail -3 "$tmp/$name.err")"
    kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
    return
  fi
  sleep 1 # the second point is stepping
  kill "-$sig" $pid
  local t0=$SECONDS rc
  wait $pid 2>/dev/null # (bash's own "Killed" report stays out of the log)
  rc=$?
  [[ $rc -eq $want ]] && pass || fail "$name: exit $rc after SIG$sig (want $want)"
  [[ $((SECONDS - t0)) -le 20 ]] && pass || fail "$name: took $((SECONDS - t0)) s to stop"
  sleep 1
  local left
  left=$(alive "$d")
  [[ -z $left ]] && pass || fail "$name: still running after the kill: $left"
  # the file: unfinished, its rows whole
  ! grep -q '^# end:' "$f" && pass || fail "$name: a killed run's file has '$(grep '^# end:' "$f")'"
  local bad
  bad=$(awk -F'\t' '/^#/ {next} !hdr {hdr = NF; next} NF != hdr {print NR ": " NF " fields"}' "$f")
  if [[ -n $bad ]]; then # only a last line without its newline may be torn
    local last
    last=$(awk 'END {print NR}' "$f")
    [[ $(echo "$bad" | wc -l) -eq 1 && ${bad%%:*} -eq $last && -n $(tail -c 1 "$f") ]] && pass ||
      fail "$name: rows not whole: $bad"
  else
    pass
  fi
  local rows
  rows=$(awk -F'\t' '/^#/ {next} !hdr {hdr = 1; next} $NF != "" {n++} END {print n + 0}' "$f")
  [[ $rows -ge 1 ]] && pass || fail "$name: the first point's row is gone"
  # the reader: report exits 0 and lists the file as unfinished
  "$BIN" report "$d" >"$tmp/$name.rep" 2>&1
  rc=$?
  [[ $rc -eq 0 ]] && pass || fail "$name: plateau report exited $rc: $(tail -3 "$tmp/$name.rep")"
  grep -q "unfinished" "$d/report/train.md" 2>/dev/null && pass ||
    fail "$name: report/train.md does not list the file as unfinished"
}

killed term TERM 143 "$BIN"
killed kill KILL 137 "$BIN"
# under mpirun: it passes SIGTERM to the ranks, stops them and exits 1
killed mpi TERM 1 $MPIRUN -np 2 "$BIN"

echo "$PL_TEST: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
