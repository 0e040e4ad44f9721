#!/usr/bin/env bash
# analysis/device/run.sh — one lease on the H200 machine: build, the CUDA/NCCL
# tests, and the benches, in one call (device time is scarce: see
# /work/.library/device/METHOD.md).  Run from the repository root there:
#
#   GIT_SHA=<sha> bash analysis/device/run.sh [build] [tests] [calib] [dispatch] [vocab] [adam] [sco] [attention]
#
# The GPU image has CUDA, NCCL and Open MPI but neither Check nor OpenBLAS, so
# the build uses BLAS=none and Check from DEPS_PREFIX (.carry/deps: check.h and
# libcheck.a copied from this project's Debian machine).  Each bench part is
# analysis/device/<part>.sh, writing result files into $RUNS.  Everything that
# must come back is packed into $OUT: device.log, tests.txt, runs.tgz.
#
# Issue 8 (nvidia-h200-x8; the parts use every GPU, so Ep = P = 8 there): three
# calls of at most 10 minutes, each packing its own runs.tgz (the device tool
# returns few files per call: keep everything in the one archive):
#   1. DEADLINE=560 bash analysis/device/run.sh build calib dispatch
#   2. DEADLINE=560 bash analysis/device/run.sh build vocab adam
#   3. DEADLINE=560 bash analysis/device/run.sh build sco
# then commit the unpacked files under results/reference/h200x8/<date>/ and run
# `plateau report` there.
set -uo pipefail
OUT=${OUT:-/tmp/plateau-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PLATEAU_GIT_SHA=${GIT_SHA:-unknown}
export RUNS=${RUNS:-results/runs/h200-$(date -u +%Y%m%dT%H%M%SZ)}
export BIN=build/bin/plateau
export MPIRUN="mpirun --bind-to none"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
export NGPU
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(build tests calib)
start=$(date +%s)
stamp() { echo "## [$(($(date +%s) - start))s] $*"; }
# DEADLINE (seconds from start) caps every part so that the results are packed
# before the device tool's own limit kills the command.
part_timeout() {
  local left=$((${DEADLINE:-100000} - ($(date +%s) - start) - 25))
  [ "$left" -lt 10 ] && left=10
  echo $((left < $1 ? left : $1))
}

pack() {
  if [ -d "$RUNS" ]; then tar czf "$OUT/runs.tgz" "$RUNS"; fi
  stamp "packed $(ls "$OUT" | tr '\n' ' ')"
}
trap pack EXIT

for p in "${parts[@]}"; do
  case "$p" in
  build)
    stamp "build"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    nproc; free -g | head -2
    make -k -j"$(nproc)" DEPS=0 BLAS=none STATIC_DEPS=1 DEPS_PREFIX=.carry/deps WERROR=0 \
      GIT_SHA="$PLATEAU_GIT_SHA" all tests dev >"$OUT/build.log" 2>&1
    grep -E "error|warning:|plateau build" "$OUT/build.log" | head -40
    if [ -x "$BIN" ]; then $BIN info; else echo "no $BIN (build failed or suite absent)"; fi
    ;;
  tests)
    stamp "tests"
    : >"$OUT/tests.txt"
    for t in $(find build/tests -type f -perm -u+x | sort); do
      case "$t" in
      */test_mpi_*)
        for np in 1 2; do
          r=$(CK_FORK=no timeout 300 $MPIRUN -np $np "$t" 2>&1 | tee -a "$OUT/tests.log" | tail -3 | tr '\n' ' ')
          echo "$t np=$np: $r" | tee -a "$OUT/tests.txt"
        done ;;
      *)
        r=$(CK_FORK=no timeout 300 "$t" 2>&1 | tee -a "$OUT/tests.log" | tail -3 | tr '\n' ' ')
        echo "$t: $r" | tee -a "$OUT/tests.txt" ;;
      esac
    done
    for t in engine/comm/test_timeout.sh; do
      [ -f "$t" ] && { r=$(BUILD=build timeout 120 bash "$t" 2>&1 | tee -a "$OUT/tests.log" | tail -2 | tr '\n' ' '); echo "$t: $r" | tee -a "$OUT/tests.txt"; }
    done
    ;;
  calib)
    stamp "calib"
    # every GPU at once (the host link shared), then one GPU alone (its ceiling)
    timeout 200 $MPIRUN -np "$NGPU" $BIN bench calib --backend cuda --sizes 64Ki:1Gi:x4 -o "$RUNS" 2>&1 | grep -v "^# " | tail -45
    timeout 200 $MPIRUN -np "$NGPU" $BIN bench calib --backend cuda --sizes 64Ki:1Gi:x4 --solo -o "$RUNS" 2>&1 | grep -v "^# " | tail -45
    ;;
  *)
    if [ -f "analysis/device/$p.sh" ]; then
      stamp "$p"
      timeout "$(part_timeout "${PART_MAX:-480}")" bash "analysis/device/$p.sh" 2>&1 | tail -60
    else
      echo "unknown part $p"
    fi ;;
  esac
done
stamp "done"
