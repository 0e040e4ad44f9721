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
#   4. the 65k shape with E = 32 (16 experts per rank at Ep = 2: the per-rank
#      weights, gradients and accumulator traffic of the paper's Ep = 8 with
#      E = 128), llep vs pipelined_llep, balanced and 95/16.
# LANES (default "2", the layer's default): the layer's compute lanes, one row per value
# (--lanes).  PRESETS (default "65k 32k"), PROFILES (default all four),
# E32=0 skips step 4 (default: run it only with 2 ranks).  NP (default: every
# GPU) is Ep.
# Results go to $RUNS.  Budget: about 5 minutes of GPU time on nvidia-h200-x2
# (-w 1 -n 5 everywhere; each step under its own timeout, TL65 / TL32 / TLE32
# seconds: a step cut short keeps the rows it wrote, since result rows are
# appended one by one).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=${BIN:-build/bin/plateau}
RUNS=${RUNS:-results/runs/h200-dispatch-$(date -u +%Y%m%dT%H%M%SZ)}
MPIRUN=${MPIRUN:-mpirun --bind-to none}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
NP=${NP:-$NGPU}  # every GPU: Ep = 2 on nvidia-h200-x2, 8 on nvidia-h200-x8
[ "$NP" -ge 1 ] || { echo "dispatch.sh: no GPU"; exit 1; }
[ -x "$BIN" ] || { echo "dispatch.sh: no $BIN (run make first)"; exit 1; }
start=$(date +%s)
stamp() { echo "## dispatch [$(($(date +%s) - start))s] $*"; }

T=build/tests/engine/ops/test_mpi_moe_cuda
if [ -x "$T" ]; then
  stamp "test_mpi_moe_cuda np=$NP"
  TNP=$(( NP < 4 ? NP : 4 )) # the test's shapes are sized for 1..4 ranks
  CK_FORK=no timeout 45 $MPIRUN -np "$TNP" "$T" 2>&1 | grep -v '^\[r' | tail -15
fi

LANES=${LANES:-2}
PRESETS=${PRESETS:-65k 32k}
PROFILES=${PROFILES:-balanced,95/16,80/16,50/4}
VARIANTS=${VARIANTS:-ep,llep,pipelined_llep}
CHUNKING=${CHUNKING:-strided,contiguous}
for preset in $PRESETS; do
  if [ "$preset" = 65k ]; then tl=${TL65:-300}; else tl=${TL32:-120}; fi
  stamp "bench dispatch --preset $preset (Ep=$NP, lanes $LANES)"
  timeout $tl $MPIRUN -np "$NP" "$BIN" bench dispatch --backend cuda \
    --preset "$preset" --variants "$VARIANTS" --profiles "$PROFILES" \
    --chunking "$CHUNKING" --lanes "$LANES" -w 1 -n 5 -o "$RUNS" 2>&1 |
    grep -v '^\[r' | tail -40
done
for preset in $PRESETS; do
  stamp "bench moegemm --preset $preset (grouped vs dense GEMM, lanes $LANES)"
  timeout 40 $MPIRUN -np "$NP" "$BIN" bench moegemm --backend cuda \
    --preset "$preset" --chunks 1,10 --lanes "$LANES" -w 2 -n 5 -o "$RUNS" 2>&1 |
    grep -v '^\[r' | tail -16
done
if [ "${E32:-$([ "$NP" -eq 2 ] && echo 1 || echo 0)}" = 1 ]; then # Ep = 8 stand-in: 2 ranks only
  stamp "bench dispatch --preset 65k --experts 32 (16 experts per rank, as at Ep = 8)"
  timeout ${TLE32:-120} $MPIRUN -np "$NP" "$BIN" bench dispatch --backend cuda \
    --preset 65k --experts 32 --variants llep,pipelined_llep \
    --profiles balanced,95/16 --lanes "$LANES" -w 1 -n 5 -o "$RUNS" 2>&1 |
    grep -v '^\[r' | tail -12
fi
stamp "done: results in $RUNS"
