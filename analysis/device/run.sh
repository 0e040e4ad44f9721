#!/usr/bin/env bash
# analysis/device/run.sh — run sweeps inside one allocation of a GPU node that
# has CUDA, NCCL and Open MPI but no Slurm inside it (an salloc shell, a
# reserved box, a cloud VM; Check and OpenBLAS optional): build, run each
# sweep with jobs/run (the same run path as jobs/submit, same result files)
# within the allocation's time budget, pack everything into one archive to
# copy home.
#
#   bash analysis/device/run.sh [--budget SECONDS] [--out DIR] [--deps DIR]
#     [--resume NAME] [--only ID,ID] [--tests] SWEEP.tsv...
#
# From the repository root (a copy without .git is fine: the build records the
# tree hash of its sources, `jobs/provenance verify` maps it to a commit).
#   --budget S   the seconds the allocation leaves this script (default 0: no
#                limit); a point whose turn comes too late stays "not run",
#                and a later allocation with --resume runs it
#   --out DIR    where the archive and logs go (default
#                results/device-<machine>-<utc>)
#   --deps DIR   a prefix with Check's check.h and libcheck.a for a node
#                without the package (only --tests needs it)
#   --resume N   run into results/runs/N (the run directory of an earlier
#                allocation: its done points are skipped)
#   --only IDS   only these points (jobs/run --only)
#   --tests      build and run every test binary once first
# (The environment's OUT, DEPS_PREFIX, RESUME and ONLY are the defaults; so
# is DEADLINE, the budget's older name.)
#  1. build: make -j$(nproc) BLAS=none STATIC_DEPS=1 [DEPS_PREFIX=DIR]
#     WERROR=0 all [tests]; the log in OUT/build.log;
#  2. --tests: every test binary once on the GPUs (MPI tests at np 1 and 2),
#     one line each in OUT/tests.txt;
#  3. each SWEEP: jobs/run SWEEP --sweep <name>-<machine>-<utc> (or --resume's
#     name) with the time left of the budget less the packing's share;
#     points needing more GPUs than this machine has are left out;
#  4. OUT/results.tgz: results/runs/<each sweep's directory> (result files,
#     logs, points.status, report/ tables), plus OUT/summary.txt (each
#     sweep's jobs/status) and OUT/device.log (everything printed).
# Exit 0 when every selected point of every sweep is done, 1 otherwise, 2 on
# a build failure or bad usage.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUDGET=${BUDGET:-${DEADLINE:-0}}
DEPS_PREFIX=${DEPS_PREFIX:-}
RESUME=${RESUME:-}
ONLY=${ONLY:-}
tests=0
sweeps=()
usage="usage: bash analysis/device/run.sh [--budget S] [--out DIR] [--deps DIR] [--resume NAME] [--only IDS] [--tests] SWEEP.tsv..."
need() { [[ $1 -ge 2 ]] || { echo "run.sh: $2 needs a value"; echo "$usage"; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --tests) tests=1 ;;
    --budget) need $# "$1"; BUDGET=$2; shift ;;
    --out) need $# "$1"; OUT=$2; shift ;;
    --deps) need $# "$1"; DEPS_PREFIX=$2; shift ;;
    --resume) need $# "$1"; RESUME=$2; shift ;;
    --only) need $# "$1"; ONLY=$2; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option '$1'"; echo "$usage"; exit 2 ;;
    *) [[ -f $1 ]] || { echo "run.sh: no sweep file '$1'"; exit 2; }; sweeps+=("$1") ;;
  esac
  shift
done
[[ ${#sweeps[@]} -gt 0 || $tests == 1 ]] || { echo "$usage"; exit 2; }
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "run.sh: --budget '$BUDGET' must be whole seconds (0: no limit)"; exit 2; }
unlimited=0
((BUDGET > 0)) || { BUDGET=999999999; unlimited=1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
. jobs/lib.sh
machine=$(pl_machine_kind)
utc=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-results/device-$machine-$utc}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
start=$SECONDS
stamp() { echo "## [$((SECONDS - start))s] $*"; }
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
    left=$((BUDGET - (SECONDS - start) - 60))
    ((left > 10)) || { echo "$t: not run (budget spent)" >>"$OUT/tests.txt"; continue; }
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
  left=$((BUDGET - (SECONDS - start) - 30))
  if ((left < 20)); then
    stamp "$s: not started (budget spent)"
    rc=1
    continue
  fi
  if ((unlimited)); then
    stamp "sweep $s -> results/runs/$name"
    jobs/run "$s" --sweep "$name" ${ONLY:+--only "$ONLY"} || rc=1
  else
    stamp "sweep $s -> results/runs/$name (${left}s of the budget left)"
    jobs/run "$s" --sweep "$name" --deadline "$left" ${ONLY:+--only "$ONLY"} || rc=1
  fi
done
exit $rc
