#!/usr/bin/env bash
# test_timeout.sh — the communicator never hangs, and refuses a bad launch.
#
# 1. Watchdog: test_mpi_comm in its hidden hang mode (PLATEAU_TEST_MODE=hang):
#    rank 0 skips a collective under a 2 s timeout; the other ranks' watchdog
#    must print "pl_comm: <op> (group of N, rank r) did not complete within 2 s;
#    aborting all ranks" and MPI_Abort the job: non-zero exit well within 20 s.
#    CPU/MPI (barrier, allreduce) always; CUDA/NCCL (allreduce) when there are
#    at least 2 GPUs.
# 2. A stopped rank (PLATEAU_TEST_MODE=stop, PLATEAU_COMM_TIMEOUT=8): rank 0
#    SIGSTOPs itself; the survivor must announce the wait ("waiting for"),
#    abort at the deadline, and meanwhile not spin: its CPU time over 3 s of
#    waiting (utime + stime from /proc/PID/stat) must stay under 25% of one
#    core (a busy-polling MPI wait is about 100%).
# 3. Launch check (PLATEAU_TEST_MODE=init): one rank with SLURM_NTASKS=4 is
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

# expect_stop: the survivor of a stopped rank waits cheaply, says so, aborts
expect_stop() {
  local log=$tmp/stop pf=$tmp/stop.pid rc=0 t0 t1
  t0=$(date +%s%N)
  PLATEAU_TEST_MODE=stop PLATEAU_COMM_TIMEOUT=8 PLATEAU_TEST_PIDFILE=$pf \
    timeout 60 $MPIRUN -np 2 "$BIN" >"$log" 2>&1 &
  local job=$!
  for _ in $(seq 100); do [[ -s $pf.1 ]] && break; sleep 0.1; done
  local pid cpu=-1
  pid=$(cat "$pf.1" 2>/dev/null)
  if [[ -n $pid ]]; then
    sleep 1
    local a b hz
    hz=$(getconf CLK_TCK)
    a=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null)
    sleep 3
    b=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null)
    [[ -n $a && -n $b ]] && cpu=$(( (b - a) * 100 / (3 * hz) ))
  fi
  wait $job || rc=$?
  t1=$(date +%s%N)
  local secs=$(( (t1 - t0) / 1000000000 ))
  if [[ -z $pid ]] || (( cpu < 0 || cpu >= 25 )) || [[ $rc -eq 0 || $rc -eq 124 ]] || (( secs >= 30 )) ||
     ! grep -q "pl_comm: barrier (group of 2, rank 1) waiting for" "$log" ||
     ! grep -q "pl_comm: barrier (group of 2, rank 1) did not complete within 8 s" "$log"; then
    echo "FAIL stopped rank: survivor pid ${pid:-?} used ${cpu}% of a core while waiting (want < 25%), exit $rc after ${secs}s; log:"
    sed 's/^/    /' "$log"
    fails=$((fails + 1))
  else
    echo "ok   stopped rank: the survivor used ${cpu}% of a core while waiting; exit $rc after ${secs}s"
  fi
}
expect_stop

expect_init 1 SLURM_NTASKS=4 -- 2 \
  "launched with 1 MPI rank but SLURM_NTASKS=4: start with srun --mpi=pmix"
expect_init 2 SLURM_NTASKS=2 -- 0 "init ok: world size 2"
expect_init 1 SLURM_NTASKS=four -- 2 "SLURM_NTASKS=four: not a positive integer"
expect_init 1 PLATEAU_COMM_TIMEOUT=0 -- 2 "PLATEAU_COMM_TIMEOUT=0: must be"
expect_init 1 PLATEAU_COMM_TIMEOUT=1e9x -- 2 "PLATEAU_COMM_TIMEOUT=1e9x: must be"

if (( fails )); then echo "test_timeout.sh: $fails failed"; exit 1; fi
echo "test_timeout.sh: all passed"
