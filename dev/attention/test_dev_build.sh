#!/usr/bin/env bash
# test_dev_build.sh — the dev/attention programs build (`make dev`: nvcc and
# libplateau) and answer --help; nothing runs on a GPU.  Without nvcc, or in
# a CUDA=0 build, it says so and passes: the programs are CUDA only.
# Usage: BUILD=build bash dev/attention/test_dev_build.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build}
NVCC=${NVCC:-$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })}
if [[ -z $NVCC || ${CUDA:-auto} == 0 ]] || ! grep -q "PL_HAVE_CUDA=1" "$BUILD/gen/nvcc_flags" 2>/dev/null; then
  echo "test_dev_build.sh: skipped: no CUDA build (nvcc not found or CUDA=0)"
  exit 0
fi
fail=0
if ! make --no-print-directory BUILD="$BUILD" dev >"$BUILD/dev_build.log" 2>&1; then
  tail -30 "$BUILD/dev_build.log"
  echo "FAIL: make dev"
  exit 1
fi
for p in attention/attention_forward attention/attention_backward; do
  if ! "$BUILD/dev/$p" --help | grep -q "^usage:"; then
    echo "FAIL: $BUILD/dev/$p --help"
    fail=1
  fi
  # the version table: versions numbered 1, 2, ... without gaps, the engine's first
  if ! "$BUILD/dev/$p" --list | awk '$1 == "#" && $2 ~ /^[0-9]+$/ {n++; if ($2 != n) bad = 1}
      END {exit (bad || n < 3)}'; then
    echo "FAIL: $p --list: no version table numbered 1.."
    fail=1
  fi
done
if [[ $fail -ne 0 ]]; then echo "test_dev_build.sh: failed"; exit 1; fi
echo "test_dev_build.sh: all passed"
