#!/usr/bin/env bash
# analysis/device/verify.sh — a short check of code changed after the main
# H200 run (router selection kernel, expert-major MoE grouping, Ring-DTP
# in-place gradients): the CUDA tests of those parts, then the two benches
# at the paper shapes with few iterations.  Results to "$RUNS".
set -uo pipefail
RUNS=${RUNS:-results/runs/h200-verify-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=${BIN:-build/bin/plateau}
MPIRUN=${MPIRUN:-mpirun --bind-to none}
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$RUNS"
{
  for t in build/tests/engine/model/test_router build/tests/baselines/test_ce; do
    echo "$t: $(CK_FORK=no timeout 60 "$t" 2>&1 | tail -2 | tr '\n' ' ')"
  done
  for t in build/tests/engine/ops/test_mpi_moe_cuda build/tests/engine/ops/test_mpi_ring_dtp \
           build/tests/baselines/test_mpi_ce_heads; do
    echo "$t np=2: $(CK_FORK=no timeout 60 $MPIRUN -np 2 "$t" 2>&1 | grep -v '^\[r' | tail -2 | tr '\n' ' ')"
  done
} | tee "$RUNS/verify-tests.txt"
timeout 50 $MPIRUN -np 2 "$BIN" bench vocab --backend cuda --preset paper -N 16384 --dtypes bf16 \
  --variants dense,ring -w 1 -n 2 -o "$RUNS" 2>&1 | grep -v '^# ' | tail -4
timeout 90 $MPIRUN -np 2 "$BIN" bench dispatch --backend cuda --preset 65k --variants llep,pipelined_llep \
  --profiles balanced,95/16 --chunking strided -w 1 -n 3 -o "$RUNS" 2>&1 | grep -v '^# ' | tail -6
