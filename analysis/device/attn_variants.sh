#!/usr/bin/env bash
# analysis/device/attn_variants.sh — the quick A/B of the wgmma attention
# kernels in one lease: the CUDA attention test (every forward V path and
# backward variant against the SIMPLE kernel; fails on a mismatch), then
# `plateau bench attention` fwd+bwd with each backward variant (BWD, default
# "bulk fused split") in each step order of the dK/dV kernel (WALK, default
# "desc") with each synchronization scheme (SYNC, default "one tma"; sequence
# lengths BSEQ, default SEQ), forward with each V path (V, default "mn128tma
# ovtma"), and the PyTorch SDPA peer on the same shapes in the same lease
# (PEER=0 skips it, TEST=0 the test; an empty BWD or V skips those).
# Run from the repository root on the GPU machine after `make all tests`:
#     RUNS=results/runs/<dir> bash analysis/device/attn_variants.sh
# About 3 minutes.  Exits non-zero if a step failed.
set -uo pipefail
RUNS=${RUNS:-results/runs/attn-variants-$(date -u +%Y%m%dT%H%M%SZ)}
BUILD=${BUILD:-build}
BIN=${BIN:-$BUILD/bin/plateau}
SHAPE=${SHAPE:---heads 64 --kv-heads 8 --head-dim 128}
SEQ=${SEQ:-16Ki,32Ki,64Ki,128Ki}
export NCCL_NVLS_ENABLE=0
mkdir -p "$RUNS"
fail=0
step() { echo "== [$SECONDS s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv 2>/dev/null |
  tee "$RUNS/attention_gpu.txt"
if [ "${TEST:-1}" = 1 ]; then
  step "CUDA attention test (every wgmma path against SIMPLE)"
  CK_FORK=no timeout 420 "$BUILD/tests/engine/backend/cuda/test_attention_cuda" >"$RUNS/attention_test_cuda.txt" 2>&1 || fail=1
  grep -E "Checks|tflops wgmma|FAIL|fail|mismatch" "$RUNS/attention_test_cuda.txt" | head -30
fi
for y in ${SYNC-one tma}; do
  for w in ${WALK-desc}; do
    for v in ${BWD-bulk fused split}; do
      step "fwd+bwd, wgmma backward $v, step order $w, $y barrier(s) per step"
      PLATEAU_ATTN_WGMMA_SYNC=$y PLATEAU_ATTN_BWD_WALK=$w PLATEAU_ATTN_WGMMA_BWD=$v timeout 150 \
        "$BIN" bench attention --backend cuda $SHAPE --seq "${BSEQ:-$SEQ}" --pass both -w 1 -n 3 \
        -o "$RUNS" 2>&1 | awk -v l="$v/$w/$y" '/^#/ {next} $9 == "fwdbwd" {
          print l, "S=" $4, $10 " ms", $13 " TFLOP/s"}' || fail=1
    done
  done
done
for v in ${V-mn128tma ovtma}; do
  step "fwd, wgmma V path $v"
  PLATEAU_ATTN_WGMMA_V=$v timeout 120 "$BIN" bench attention --backend cuda $SHAPE --algo wgmma \
    --seq "$SEQ" --pass fwd -w 1 -n 3 -o "$RUNS" 2>&1 |
    awk -v l="$v" '$1 ~ /^#/ || $4 !~ /^[0-9]+$/ {next} $9 == "fwd" {print l, "S=" $4, $10 " ms", $13 " TFLOP/s"}' || fail=1
done
if [ "${PEER:-1}" = 1 ] && python3 -c "import torch" 2>/dev/null; then
  step "peer: PyTorch SDPA (flash, cuDNN)"
  timeout 300 python3 analysis/peers/torch_sdpa.py --seq "$SEQ" --heads 64 --kv-heads 8 --head-dim 128 \
    --iters 2 --warmup 1 --out "$RUNS/peer_torch_sdpa.tsv" || fail=1
  column -t "$RUNS/peer_torch_sdpa.tsv" 2>/dev/null | head -20
fi
step "done: $RUNS"
exit $fail
