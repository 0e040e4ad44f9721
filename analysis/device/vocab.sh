#!/usr/bin/env bash
# analysis/device/vocab.sh — the vocabulary head on the H200 machine (issue 4):
# its CUDA tests, `plateau bench vocab` on the paper preset over all GPUs
# (P = NGPU, 2 on nvidia-h200-x2), and the PyTorch peer on one GPU.
#
# Run from the repository root after `make` (analysis/device/run.sh sets RUNS,
# BIN, MPIRUN, NGPU; defaults below).  Budget: under 4 minutes of GPU time
# (estimate ≈ 3 min: tests 20 s, f32 120 s, bf16 20 s, PyTorch 30 s) — an fp32
# dense fwd+bwd at N = 32K is ≈ 5.5 s, so iterations are few.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
RUNS=${RUNS:-results/runs/h200-vocab-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=${BIN:-build/bin/plateau}
MPIRUN=${MPIRUN:-mpirun --bind-to none}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
[ "$NGPU" -ge 1 ] || { echo "vocab.sh: no GPU"; exit 1; }
start=$(date +%s)
stamp() { echo "## vocab [$(($(date +%s) - start))s] $*"; }

stamp "tests"
for t in build/tests/baselines/test_ce; do
  [ -x "$t" ] && CK_FORK=no timeout 120 "$t" 2>&1 | tail -4
done
for t in build/tests/engine/ops/test_mpi_ring_dtp build/tests/baselines/test_mpi_ce_heads; do
  [ -x "$t" ] || continue
  for np in 1 "$NGPU"; do
    echo "== $t np=$np"
    CK_FORK=no timeout 120 $MPIRUN -np "$np" "$t" 2>&1 | tail -3
  done
done

# fp32 GEMMs (no TF32) dominate: ≈0.94 s per 2·N·H·V GEMM at N = 16K.  N = 16K:
# every variant with the check; N = 32K: dense, chunk and ring only, no check
# (≈ 56 s instead of ≈ 125 s).
stamp "bench vocab f32 N=16384 (paper preset, P=$NGPU)"
timeout 150 $MPIRUN -np "$NGPU" "$BIN" bench vocab --backend cuda --preset paper \
  --dtypes f32 -N 16384 -w 1 -n 2 -o "$RUNS" 2>&1 | grep -v '^\[vocab\] point' | tail -12
stamp "bench vocab f32 N=32768"
timeout 120 $MPIRUN -np "$NGPU" "$BIN" bench vocab --backend cuda --preset paper \
  --dtypes f32 -N 32768 --variants dense,chunk,ring --no-check -w 1 -n 2 \
  -o "$RUNS" 2>&1 | grep -v '^\[vocab\] point' | tail -8
stamp "bench vocab bf16 (both N)"
timeout 120 $MPIRUN -np "$NGPU" "$BIN" bench vocab --backend cuda --preset paper \
  --dtypes bf16 -w 1 -n 3 -o "$RUNS" 2>&1 | grep -v '^\[vocab\] point' | tail -16

stamp "PyTorch peer (dense linear + cross_entropy, one GPU)"
if python3 -c 'import torch' 2>/dev/null; then
  CUDA_VISIBLE_DEVICES=0 timeout 150 python3 analysis/peers/torch_ce.py \
    --tokens 16384,32768 --dtypes f32,bf16 -w 1 -n 2 -o "$RUNS" 2>&1 | tail -12
else
  echo "skipped: python3 cannot import torch here"
fi
stamp "done; results in $RUNS"
