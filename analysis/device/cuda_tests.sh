#!/usr/bin/env bash
# analysis/device/cuda_tests.sh — every CUDA test binary once on the GPUs of
# one machine (the tests CI cannot run: it has no GPU), after a build of what
# is missing or stale, with one summary line each in OUT_DIR/cuda-tests.txt
# and each test's whole output in OUT_DIR/<test>.txt.  From the repository
# root:
#
#   [NP=1] bash analysis/device/cuda_tests.sh [--deps DIR] OUT_DIR

# (--deps DIR: a prefix with Check's check.h and libcheck.a where the node
# lacks the package: the test binaries need it.)
#
# The binaries: every test_*cuda* the build has, and the MPI tests whose
# CUDA cases run where a GPU is (test_mpi_ulysses, test_mpi_layer,
# test_mpi_virtual), under
# mpirun -np NP (1 by default: a one-GPU machine; a test needing more GPUs
# than the node has says "skipped").  Each has its own timeout (TEST_TIMEOUT,
# 300 s).  Exit 0 when every line reads 100%, 1 otherwise, 2 when the build
# fails.  About two minutes on one H200 after the build.
set -uo pipefail
PL_SCRIPT=cuda_tests
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pl_dev_args 0 "$@"
OUT=${PL_ARGS[0]:?usage: bash analysis/device/cuda_tests.sh [--deps DIR] OUT_DIR}
NP=${NP:-1}
mkdir -p "$OUT"
make -j"$(nproc)" DEPS=0 BLAS=none STATIC_DEPS=1 DEPS_PREFIX="$DEPS_PREFIX" WERROR=0 all tests \
  >"$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; echo "build failed"; exit 2; }
pl_dev_begin "$OUT"
{
  grep "^# plateau build" "$OUT/build.log"
  "$BIN" info | grep -E "^plateau|cuDNN|NCCL"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
} | sed 's/^/# /' >"$OUT/cuda-tests.txt"
rc=0
for t in $(find build/tests -type f -perm -u+x \( -name 'test_*cuda*' -o -name test_mpi_ulysses \
  -o -name test_mpi_layer -o -name test_mpi_virtual \) | sort); do
  name=${t#build/tests/}
  log="$OUT/$(basename "$t").txt"
  CK_FORK=no timeout "${TEST_TIMEOUT:-300}" $MPIRUN -np "$NP" "$t" >"$log" 2>&1
  code=$?
  line=$(grep -E '^[0-9]+%: Checks' "$log" | tail -1)
  echo "$name np=$NP: ${line:-no summary (exit $code)}" | tee -a "$OUT/cuda-tests.txt"
  case $line in 100%*) ;; *) rc=1; grep -E ':[FE]:' "$log" | head -3 ;; esac
done
exit $rc
