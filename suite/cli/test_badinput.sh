#!/usr/bin/env bash
# test_badinput.sh — the bad-input corpus (suite/cli/badinput.tsv): every case is
# a command a careless or hostile user might type; each must exit with the
# code the corpus gives, print a message matching its regex (the value and
# what is allowed), and write nothing: no new file or directory in the case's
# folder (its working directory, $OUT, $SCRATCH) nor under the repository's
# results/runs.
#
# The corpus is one case per line, four tab-separated fields:
#   exit    the expected exit code (2: usage / bad input)
#   regex   an extended regex (grep -E) the command's stderr must match
#   setup   bash run first in the case's working directory ("-": none); what
#           it creates is part of the fixture, not a write of the command
#   command bash, with PL (the plateau binary), MPI2 (mpirun -np 2 ...),
#           OUT (a result directory that must not appear), SCRATCH (a scratch
#           directory made before setup), ROOT (the repository)
# '#' lines and blank lines are ignored.  Other commands (plateau compare,
# plateau plan, ...) add cases by adding lines: nothing here names a bench.
#
# Cases run in parallel (JOBS, default 2 x cores), each in its own folder, with
# a 60 s timeout.  Usage: BUILD=build bash suite/cli/test_badinput.sh [CORPUS]
#   CASES=12,40 runs only those line numbers of the corpus.
set -uo pipefail
PL_TEST=test_badinput.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

corpus=${1:-$ROOT/suite/cli/badinput.tsv}
jobs=${JOBS:-$(($(nproc) * 2))}
MPI2="$MPIRUN -np 2"
export PL="$BIN" MPI2 ROOT
export OMPI_MCA_rmaps_base_oversubscribe=1

runs=$ROOT/results/runs
snap_runs() { find "$runs" -mindepth 1 2>/dev/null | sort; }
before_runs=$(snap_runs)

# run_case LINENO EXIT REGEX SETUP COMMAND: the verdict in $tmp/c<LINENO>/verdict
run_case() {
  local n=$1 want=$2 re=$3 setup=$4 cmd=$5
  local d=$tmp/c$n
  mkdir -p "$d/cwd" "$d/tmp"
  export OUT=$d/out SCRATCH=$d/tmp
  if [[ $setup != - ]]; then
    (cd "$d/cwd" && bash -c "$setup") >"$d/setup.log" 2>&1
    local src=$?
    if [[ $src == 77 ]]; then
      echo "skip" >"$d/verdict"
      return
    elif [[ $src != 0 ]]; then
      echo "FAIL line $n: setup failed: $setup: $(head -c 300 "$d/setup.log")" >"$d/verdict"
      return
    fi
  fi
  local snap0 snap1 rc
  snap0=$(cd "$d" && find cwd tmp out -mindepth 0 2>/dev/null | sort)
  (cd "$d/cwd" && timeout 60 bash -c "$cmd") >"$d/stdout" 2>"$d/stderr" </dev/null
  rc=$?
  snap1=$(cd "$d" && find cwd tmp out -mindepth 0 2>/dev/null | sort)
  local why=()
  [[ $rc == "$want" ]] || why+=("exit $rc, want $want")
  grep -Eq -- "$re" "$d/stderr" || why+=("stderr does not match /$re/")
  if [[ $snap0 != "$snap1" ]]; then
    why+=("wrote: $(comm -13 <(echo "$snap0") <(echo "$snap1") | tr '\n' ' ')")
  fi
  if ((${#why[@]})); then
    {
      echo "FAIL line $n: $cmd"
      for w in "${why[@]}"; do echo "    $w"; done
      echo "    stderr: $(head -c 600 "$d/stderr" | tr '\n' '|')"
    } >"$d/verdict"
  else
    echo "ok" >"$d/verdict"
  fi
}

declare -a lines=()
nskip=0
only=",${CASES:-},"
n=0
running=0
while IFS= read -r line || [[ -n $line ]]; do
  n=$((n + 1))
  [[ -z ${line//[[:space:]]/} || $line == \#* ]] && continue
  [[ $only == ",," || $only == *",$n,"* ]] || continue
  IFS=$'\t' read -r want re setup cmd extra <<<"$line"
  if [[ -z ${cmd:-} || -n ${extra:-} || ! $want =~ ^[0-9]+$ ]]; then
    fail "$corpus:$n: not 4 tab-separated fields (exit, regex, setup, command)"
    continue
  fi
  lines+=("$n")
  run_case "$n" "$want" "$re" "$setup" "$cmd" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done <"$corpus"
wait

for n in "${lines[@]}"; do
  v=$(cat "$tmp/c$n/verdict" 2>/dev/null || echo "FAIL line $n: no verdict")
  if [[ $v == ok ]]; then pass; elif [[ $v == skip ]]; then nskip=$((nskip + 1)); else fail "${v#FAIL }"; fi
done
after_runs=$(snap_runs)
if [[ $before_runs != "$after_runs" ]]; then
  fail "the repository's results/runs changed: $(comm -13 <(echo "$before_runs") <(echo "$after_runs") | tr '\n' ' ')"
fi
echo "test_badinput.sh: ${#lines[@]} cases: $npass passed, $nfail failed, $nskip skipped"
[[ $nfail -eq 0 ]]
