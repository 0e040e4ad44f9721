#!/usr/bin/env bash
# analysis/device/run.sh — run sweeps on a GPU machine that has CUDA, NCCL and
# Open MPI but neither Check nor OpenBLAS, nor Slurm, in one call: build, run
# each sweep with jobs/run (the same run path as jobs/submit, same result
# files), pack everything into one archive.
#
#   [OUT=DIR] [DEADLINE=S] [DEPS_PREFIX=DIR] [RESUME=NAME] [ONLY=IDS]
#     bash analysis/device/run.sh [--tests] SWEEP.tsv...
#
# From the repository root (a copy without .git is fine: the build records the
# tree hash of its sources, `jobs/provenance verify` maps it to a commit).
#  1. build: make -j$(nproc) BLAS=none STATIC_DEPS=1 DEPS_PREFIX=$DEPS_PREFIX
#     (default .carry/deps: Check's check.h and libcheck.a, needed only for
#     --tests) WERROR=0 all [tests]; the log in $OUT/build.log;
#  2. --tests: every test binary once on the GPUs (MPI tests at np 1 and 2),
#     one line each in $OUT/tests.txt;
#  3. each SWEEP: jobs/run SWEEP --sweep <name>-<machine>-<utc> with the time
#     left before DEADLINE (seconds from the start, default 540) less the
#     packing's share: a point whose turn comes too late stays "not run" (a
#     later call with the same --sweep name would resume it: RESUME=<name>;
#     ONLY=id,id runs only those points, jobs/run --only);
#     points needing more GPUs than this machine has are left out;
#  4. $OUT/results.tgz: results/runs/<each sweep's directory> (result files,
#     logs, points.status, report/ tables), plus $OUT/summary.txt (each
#     sweep's jobs/status) and $OUT/device.log (everything printed).
# Exit 0 when every selected point of every sweep is done, 1 otherwise, 2 on
# a build failure or bad usage.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-/tmp/plateau-out}
DEADLINE=${DEADLINE:-540}
DEPS_PREFIX=${DEPS_PREFIX:-.carry/deps}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
start=$SECONDS
stamp() { echo "## [$((SECONDS - start))s] $*"; }
tests=0
sweeps=()
for a in "$@"; do
  case $a in
    --tests) tests=1 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) [[ -f $a ]] || { echo "run.sh: no sweep file '$a'"; exit 2; }; sweeps+=("$a") ;;
  esac
done
[[ ${#sweeps[@]} -gt 0 || $tests == 1 ]] || { echo "usage: bash analysis/device/run.sh [--tests] SWEEP.tsv..."; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
. jobs/lib.sh
machine=$(pl_machine_kind)
utc=$(date -u +%Y%m%dT%H%M%SZ)
dirs=()
pack() {
  stamp "packing"
  : >"$OUT/summary.txt"
  for d in "${dirs[@]}"; do
    [[ -f $d/sweep.points ]] && jobs/status "$d" >>"$OUT/summary.txt" 2>&1
  done
  [[ ${#dirs[@]} -gt 0 ]] && tar czf "$OUT/results.tgz" "${dirs[@]}" 2>/dev/null
  cat "$OUT/summary.txt"
  stamp "packed: $(cd "$OUT" && ls | tr '\n' ' ')"
}
trap pack EXIT

stamp "build on $machine ($(nproc) cores)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
targets=(all)
[[ $tests == 1 ]] && targets+=(tests)
if ! make -j"$(nproc)" DEPS=0 BLAS=none STATIC_DEPS=1 DEPS_PREFIX="$DEPS_PREFIX" WERROR=0 \
  "${targets[@]}" >"$OUT/build.log" 2>&1; then
  grep -E "error|Error" "$OUT/build.log" | head -20
  stamp "build failed: $OUT/build.log"
  exit 2
fi
grep -E "^# plateau build" "$OUT/build.log"
build/bin/plateau info | tee "$OUT/info.txt"

if [[ $tests == 1 ]]; then
  stamp "tests"
  : >"$OUT/tests.txt"
  for t in $(find build/tests -type f -perm -u+x | sort); do
    left=$((DEADLINE - (SECONDS - start) - 60))
    ((left > 10)) || { echo "$t: not run (deadline)" >>"$OUT/tests.txt"; continue; }
    tl=$((left < 300 ? left : 300))
    case $t in
      */test_mpi_*)
        for np in 1 2; do
          echo "$t np=$np: $(CK_FORK=no timeout "$tl" mpirun --bind-to none -np $np "$t" 2>&1 | tail -1)" >>"$OUT/tests.txt"
        done ;;
      *) echo "$t: $(CK_FORK=no timeout "$tl" "$t" 2>&1 | tail -1)" >>"$OUT/tests.txt" ;;
    esac
  done
  grep -v "100%" "$OUT/tests.txt" | head -20
fi

rc=0
for s in "${sweeps[@]}"; do
  name=${RESUME:-$(basename "$s" .tsv)-$machine-$utc}
  dirs+=("results/runs/$name")
  left=$((DEADLINE - (SECONDS - start) - 30))
  if ((left < 20)); then
    stamp "$s: not started (deadline)"
    rc=1
    continue
  fi
  stamp "sweep $s -> results/runs/$name (deadline ${left}s)"
  jobs/run "$s" --sweep "$name" --deadline "$left" ${ONLY:+--only "$ONLY"} || rc=1
done
exit $rc
