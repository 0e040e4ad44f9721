#!/usr/bin/env bash
# test_maxbatch_kill.sh — `plateau bench maxbatch` under kills:
#  1. a trial killed by a signal (SIGKILL from outside, through its launcher;
#     SIGKILL of the trial process itself) is an `error` row naming the
#     signal, never `oom`, and the search goes on (later trials, a summary
#     that is an error: a kill is no memory bound);
#  2. the search killed (SIGKILL, then SIGINT) while a trial runs under
#     `mpirun -np 2` (whose ranks Open MPI puts in process groups of their
#     own): no trial process, rank or launcher survives (the process table
#     is checked for the ranks' pids and a marker in their command line).
# CPU backend; trials run a shell launcher, so the search is fast.
# Usage: BUILD=build bash suite/bench/maxbatch/test_maxbatch_kill.sh
set -uo pipefail
PL_TEST=test_maxbatch_kill.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"

col() {
  awk -F'\t' -v name="$2" '/^#/ {next}
    !hdr {for (i = 1; i <= NF; i++) if ($i == name) c = i; hdr = 1; next}
    {print (c ? $c : "NOCOL")}' "$1"
}
rows() { grep -v '^#' "$1" | tail -n +2; }

# ---- 1. killed trials ------------------------------------------------------
# killer.sh MODE: run the trial, but kill the one with N >= 512:
#   outside: start it, SIGKILL it from here (the launcher exits 137, as
#            mpirun does for a killed rank); self: the launcher kills itself
cat >"$tmp/killer.sh" <<'SH'
#!/bin/bash
mode=$1; shift
for a in "$@"; do
  case $a in --tokens=*) n=${a#--tokens=} ;; esac
done
if [[ ${n:-0} -ge 512 ]]; then
  if [[ $mode == outside ]]; then
    "$@" & pid=$!
    sleep 0.2; kill -KILL $pid; wait $pid; exit $?
  fi
  kill -KILL $$
fi
exec "$@"
SH
chmod +x "$tmp/killer.sh"
for mode in outside self; do
  out=$tmp/k-$mode
  "$BIN" bench maxbatch --preset small --step 128 --start 128 --max-tokens 2Ki --budgets 0 \
    --launcher "$tmp/killer.sh $mode" -o "$out" >"$tmp/k.log" 2>"$tmp/k.err"
  rc=$?
  f=$(ls "$out"/maxbatch.*.tsv 2>/dev/null | head -1)
  if [[ $rc -ne 0 || -z $f ]]; then
    fail "killed trial ($mode): exit $rc"; tail -5 "$tmp/k.err"; continue
  fi
  st=$(paste <(col "$f" kind) <(col "$f" tokens) <(col "$f" status) <(col "$f" note))
  # the killed trial: an error naming SIGKILL, never oom
  k=$(echo "$st" | awk -F'\t' '$1 == "trial" && $2 == 512')
  if [[ $k == *$'\terror\t'* && ( $k == *"signal 9"* ) ]]; then pass; else fail "killed trial ($mode): row '$k'"; fi
  if echo "$st" | awk -F'\t' '$3 == "oom"' | grep -q .; then fail "killed trial ($mode): an oom row"; else pass; fi
  # the search went on: trials after the kill (bisection down to 384)
  ntr=$(echo "$st" | awk -F'\t' '$1 == "trial"' | wc -l)
  [[ $ntr -ge 4 ]] && pass || fail "killed trial ($mode): the search stopped after $ntr trials"
  s=$(echo "$st" | awk -F'\t' '$1 == "summary"')
  [[ $(echo "$s" | cut -f3) == error && $(col "$f" max_ok_tokens | grep -v '^-$') == 384 ]] && pass ||
    fail "killed trial ($mode): summary '$s' (want error, largest clean N 384)"
done

# ---- 2. the search killed -------------------------------------------------
# a launcher whose trial hangs under mpirun -np 2: each rank records its pid
marker=pl-killtest-$$
cat >"$tmp/hang.sh" <<SH
#!/bin/bash
exec $MPIRUN -np 2 sh -c 'echo \$\$ >> "$tmp/ranks.pid"; exec sleep 300' $marker
SH
chmod +x "$tmp/hang.sh"

nranks() { if [[ -f $tmp/ranks.pid ]]; then wc -l <"$tmp/ranks.pid"; else echo 0; fi; }
# alive: the pids of ranks.pid still running, and any process with the marker
alive() {
  local p out=
  for p in $(cat "$tmp/ranks.pid" 2>/dev/null); do kill -0 "$p" 2>/dev/null && out+="$p "; done
  for p in /proc/[0-9]*; do
    grep -qs -- "$marker" "$p/cmdline" && out+="${p#/proc/} "
  done
  echo "$out"
}

for sig in KILL INT; do
  rm -f "$tmp/ranks.pid"
  "$BIN" bench maxbatch --preset small --budgets 0 --launcher "$tmp/hang.sh" \
    -o "$tmp/s-$sig" >"$tmp/s.log" 2>&1 &
  search=$!
  for _ in $(seq 150); do [[ $(nranks) -ge 2 ]] && break; sleep 0.1; done
  if [[ $(nranks) -lt 2 ]]; then
    fail "search killed ($sig): the ranks never started"; kill -KILL $search; wait $search 2>/dev/null; continue
  fi
  kill -"$sig" $search
  wait $search 2>/dev/null
  left=
  for _ in $(seq 100); do left=$(alive); [[ -z $left ]] && break; sleep 0.1; done
  if [[ -z $left ]]; then
    pass
  else
    fail "search killed ($sig): still running 10 s later: $left"
    for p in $left; do kill -KILL "$p" 2>/dev/null; done
  fi
done

echo "test_maxbatch_kill.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
