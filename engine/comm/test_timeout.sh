#!/usr/bin/env bash
# test_timeout.sh — the communicator never hangs, and refuses a bad launch.
#
# 1. Watchdog: test_mpi_comm in its hidden hang mode (PLATEAU_TEST_MODE=hang):
#    rank 0 skips a collective under a 2 s timeout; the other ranks' watchdog
#    must print "pl_comm: <op> (group of N, rank r) did not complete within 2 s;
#    aborting all ranks" and MPI_Abort the job: non-zero exit well within 20 s.
#    CPU/MPI (barrier, allreduce) always; CUDA/NCCL (allreduce) when there are
#    at least 2 GPUs.
# 2. Launch check (PLATEAU_TEST_MODE=init): one rank with SLURM_NTASKS=4 is
#    refused with the srun hint and exit 2; two ranks with SLURM_NTASKS=2 pass;
#    a malformed SLURM_NTASKS or PLATEAU_COMM_TIMEOUT is refused.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=$BUILD/tests/engine/comm/test_mpi_comm
[[ -x $BIN ]] || { echo "missing $BIN: run 'make tests' first" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
unset SLURM_NTASKS PLATEAU_COMM_TIMEOUT
MPIRUN=${MPIRUN:-mpirun --bind-to none}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect_hang NP BACKEND OP
expect_hang() {
  local np=$1 be=$2 op=$3 log=$tmp/hang.$1.$2.$3 rc=0 t0 t1
  t0=$(date +%s%N)
  PLATEAU_TEST_MODE=hang PLATEAU_TEST_BACKEND=$be PLATEAU_TEST_HANG_OP=$op \
    timeout 60 $MPIRUN -np "$np" "$BIN" >"$log" 2>&1 || rc=$?
  t1=$(date +%s%N)
  local secs=$(( (t1 - t0) / 1000000000 ))
  local want="pl_comm: $op (group of $np, rank [1-9][0-9]*) did not complete within 2 s; aborting all ranks"
  if [[ $rc -eq 0 || $rc -eq 124 ]] || (( secs >= 20 )) || ! grep -q "$want" "$log"; then
    echo "FAIL hang $be $op np=$np: exit $rc after ${secs}s; want non-zero within 20 s and /$want/; log:"
    sed 's/^/    /' "$log"
    fails=$((fails + 1))
  else
    echo "ok   hang $be $op np=$np: exit $rc after ${secs}s: $(grep -o "pl_comm: $op .*" "$log" | head -1)"
  fi
}

# expect_init NP ENV... -- WANT_RC PATTERN
expect_init() {
  local np=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local want_rc=$1 pat=$2 log=$tmp/init rc=0
  env "${envs[@]}" PLATEAU_TEST_MODE=init timeout 60 $MPIRUN -np "$np" "$BIN" >"$log" 2>&1 || rc=$?
  if [[ $want_rc -eq 0 && $rc -ne 0 ]] || [[ $want_rc -ne 0 && $rc -eq 0 ]] || ! grep -q -- "$pat" "$log"; then
    echo "FAIL init np=$np ${envs[*]}: exit $rc (want $([[ $want_rc -eq 0 ]] && echo 0 || echo non-zero)) and /$pat/; log:"
    sed 's/^/    /' "$log"
    fails=$((fails + 1))
  else
    echo "ok   init np=$np ${envs[*]}: exit $rc: $(grep -o -- "$pat.*" "$log" | head -1)"
  fi
}

expect_hang 2 cpu barrier
expect_hang 3 cpu allreduce
ngpu=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  ngpu=$(nvidia-smi -L | grep -c '^GPU')
fi
if (( ngpu >= 2 )); then
  expect_hang 2 cuda allreduce
else
  echo "skip hang cuda allreduce: $ngpu GPUs (needs 2)"
fi

expect_init 1 SLURM_NTASKS=4 -- 2 \
  "launched with 1 MPI rank but SLURM_NTASKS=4: start with srun --mpi=pmix"
expect_init 2 SLURM_NTASKS=2 -- 0 "init ok: world size 2"
expect_init 1 SLURM_NTASKS=four -- 2 "SLURM_NTASKS=four: not a positive integer"
expect_init 1 PLATEAU_COMM_TIMEOUT=0 -- 2 "PLATEAU_COMM_TIMEOUT=0: must be"
expect_init 1 PLATEAU_COMM_TIMEOUT=1e9x -- 2 "PLATEAU_COMM_TIMEOUT=1e9x: must be"

if (( fails )); then echo "test_timeout.sh: $fails failed"; exit 1; fi
echo "test_timeout.sh: all passed"
