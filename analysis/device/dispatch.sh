#!/usr/bin/env bash
# analysis/device/dispatch.sh — the dispatch part of a device lease (called by
# analysis/device/run.sh, or alone from the repository root after `make`):
#   1. the CUDA exactness/bound test of the MoE layer (np = GPUs, max 2);
#   2. `plateau bench dispatch` on the paper's two shapes (65k: N 65,536/rank,
#      H 7168, I 2048, E 128, top-8, c 6554; 32k: N 32,768/rank, H = I = 4096,
#      top-4, c 10,923) x 4 profiles x {ep, llep, pipelined_llep}, with the
#      pipelined variant both strided and contiguous (Table 8);
#   3. `plateau bench moegemm`: the grouped expert GEMM as the layer issues it
#      (one cublasGemmEx per expert slot, expert-major; and per (source,
#      expert) segment as before) vs a dense GEMM of equal FLOPs, K = 1, 10.
# Results go to $RUNS.  Budget: under 4 minutes of GPU time on nvidia-h200-x2
# (few iterations: -w 1 -n 3 at 65k, -w 1 -n 5 at 32k; each step under a
# timeout summing to 240 s: a step cut short keeps the rows it wrote, since
# result rows are appended one by one).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=${BIN:-build/bin/plateau}
RUNS=${RUNS:-results/runs/h200-dispatch-$(date -u +%Y%m%dT%H%M%SZ)}
MPIRUN=${MPIRUN:-mpirun --bind-to none}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
NP=$(( NGPU < 2 ? NGPU : 2 ))
[ "$NP" -ge 1 ] || { echo "dispatch.sh: no GPU"; exit 1; }
[ -x "$BIN" ] || { echo "dispatch.sh: no $BIN (run make first)"; exit 1; }
start=$(date +%s)
stamp() { echo "## dispatch [$(($(date +%s) - start))s] $*"; }

T=build/tests/engine/ops/test_mpi_moe_cuda
if [ -x "$T" ]; then
  stamp "test_mpi_moe_cuda np=$NP"
  CK_FORK=no timeout 45 $MPIRUN -np "$NP" "$T" 2>&1 | grep -v '^\[r' | tail -15
fi

for preset in 65k 32k; do
  if [ "$preset" = 65k ]; then it="-w 1 -n 3"; tl=110; else it="-w 1 -n 5"; tl=45; fi
  stamp "bench dispatch --preset $preset (Ep=$NP)"
  timeout $tl $MPIRUN -np "$NP" "$BIN" bench dispatch --backend cuda \
    --preset "$preset" --variants ep,llep,pipelined_llep \
    --profiles balanced,95/16,80/16,50/4 --chunking strided,contiguous \
    $it -o "$RUNS" 2>&1 | grep -v '^\[r' | tail -25
done
for preset in 65k 32k; do
  stamp "bench moegemm --preset $preset (grouped vs dense GEMM)"
  timeout 20 $MPIRUN -np "$NP" "$BIN" bench moegemm --backend cuda \
    --preset "$preset" --chunks 1,10 -w 2 -n 5 -o "$RUNS" 2>&1 | grep -v '^\[r' | tail -8
done
stamp "done: results in $RUNS"
