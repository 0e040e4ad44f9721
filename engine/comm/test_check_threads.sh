#!/usr/bin/env bash
# engine/comm/test_check_threads.sh — an MPI test runs with as many OpenMP
# threads per rank as its share of the node's cores (comm/check_mpi.h,
# pl_check_mpi_threads), whatever the environment says: `make test-mpi` sets
# OMP_NUM_THREADS=1, but a direct run or a script may set nothing (libgomp
# then starts one thread per core in every rank) or too many.  Ranks whose
# threads outnumber the cores spin on the cores another rank needs: two ranks
# of test_mpi_sco ran 15-20 times slower on 2 cores, test_mpi_step past its
# time limit.  Checked here on test_mpi_sco at np 2:
#   1. with no OMP_NUM_THREADS, and with OMP_NUM_THREADS far above the cores,
#      rank 0 reports threads x ranks <= cores (at least one thread);
#   2. with no OMP_NUM_THREADS it finishes within 3x (+10 s) of the same run
#      with OMP_NUM_THREADS=1.
# Usage: BUILD=build bash engine/comm/test_check_threads.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build}
T=$BUILD/tests/engine/train/test_mpi_sco
[[ -x $T ]] || { echo "test_check_threads.sh: $T not built"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 CK_FORK=no
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
npass=0 nfail=0
pass() { npass=$((npass + 1)); }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
tmp=$(mktemp -d /tmp/pl_test_threads.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cores=$(nproc)

# run NAME ENV...: test_mpi_sco at np 2 with ENV; its seconds in $secs
run() {
  local name=$1 t0
  shift
  t0=$(date +%s.%N)
  env "$@" timeout 600 mpirun --bind-to none -np 2 "$T" >"$tmp/$name.out" 2>&1
  local rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  [[ $rc == 0 ]] && pass || { fail "$name: exit $rc"; tail -5 "$tmp/$name.out"; }
}
threads_ok() { # NAME: "# OpenMP: T thread(s) per rank (R rank(s) ..., C core(s))" with T x R <= max(C, R)
  local line
  line=$(grep -m1 '^# OpenMP: ' "$tmp/$1.out")
  if [[ $line =~ ^\#\ OpenMP:\ ([0-9]+)\ thread.*\(([0-9]+)\ rank.*\ ([0-9]+)\ core ]] &&
    ((BASH_REMATCH[1] >= 1 && BASH_REMATCH[2] == 2 && BASH_REMATCH[3] == cores)) &&
    ((BASH_REMATCH[1] * BASH_REMATCH[2] <= (cores > 2 ? cores : 2))); then
    pass
  else
    fail "$1: threads per rank not capped to the cores: '${line:-no '# OpenMP:' line}'"
  fi
}

run one OMP_NUM_THREADS=1
base=$secs
run unset
free=$secs
threads_ok unset
run many OMP_NUM_THREADS=$((4 * cores))
threads_ok many
echo "test_mpi_sco np 2: ${base}s with OMP_NUM_THREADS=1, ${free}s without, on $cores core(s)"
if awk -v a="$free" -v b="$base" 'BEGIN {exit !(a <= 3 * b + 10)}'; then pass; else
  fail "without OMP_NUM_THREADS it took ${free}s, more than 3 x ${base}s + 10s"
fi
echo "test_check_threads.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
