#!/usr/bin/env bash
# analysis/device/adam.sh — the optimizer on the H200 machine (nvidia-h200-x2:
# 2 ranks sharing one host, as the paper's 8 ranks share a node).  Run from the
# repository root after `make` (analysis/device/run.sh calls it as the `adam`
# part).  Writes result files into $RUNS; budget: about 3 minutes of GPU time.
#
#   1. exactness on the GPU: CUDA stream/hybrid/baseline == reference, bit for
#      bit (test_adamw_cuda), plus the CPU-side tests (SIMD paths incl. AVX-512)
#   2. Table 4 / Table 14: 2.625G params per rank, both ranks at once:
#      cpu baseline, stream over beta x s, hybrid (auto share)
#   3. peer: PyTorch fused CPU AdamW on the same size, both ranks at once
set -uo pipefail
BIN=${BIN:-build/bin/plateau}
RUNS=${RUNS:-results/runs/adam-$(date -u +%Y%m%dT%H%M%SZ)}
MPIRUN=${MPIRUN:-mpirun --bind-to none}
NP=${NP:-$(nvidia-smi -L 2>/dev/null | wc -l)}  # every GPU of the machine (8 on nvidia-h200-x8)
PARAMS=${PARAMS:-2625M}
THREADS=${THREADS:-$(( $(nproc) / NP ))}
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=$THREADS
mkdir -p "$RUNS"
start=$(date +%s)
stamp() { echo "## adam [$(($(date +%s) - start))s] $*"; }

stamp "tests"
for t in build/tests/engine/ops/test_adamw_cuda build/tests/engine/ops/test_adamw \
         build/tests/engine/ops/test_adamw_simd build/tests/baselines/test_cpu_adamw \
         build/tests/baselines/test_cpu_adamw_cuda build/tests/engine/ops/test_stream_adamw; do
  if [ -x "$t" ]; then
    echo "== $t: $(timeout 180 "$t" 2>&1 | tail -4 | tr '\n' ' ')"
  else
    echo "== $t: missing (build failed?)"
  fi
done
for t in build/tests/engine/ops/test_mpi_stream_adamw build/tests/baselines/test_mpi_cpu_adamw; do
  [ -x "$t" ] && echo "== $t np=2: $(CK_FORK=no timeout 120 $MPIRUN -np 2 "$t" 2>&1 | tail -2 | tr '\n' ' ')"
done

free -g | head -2
stamp "bench adam: cpu baseline + stream beta x s ($PARAMS params/rank, $NP ranks, $THREADS threads each)"
timeout 240 $MPIRUN -np "$NP" -x OMP_NUM_THREADS "$BIN" bench adam --backend cuda \
  --params "$PARAMS" --mode cpu,stream --bucket 25M,100M,400M --slots 1,2,5 \
  --threads "$THREADS" -n 3 -w 1 -o "$RUNS" 2>&1 | grep -v '^# \(env\|argv\)' | tail -30

stamp "bench adam: hybrid (auto share, fixed 0.3, and 1 = pipelined CPU offload)"
timeout 200 $MPIRUN -np "$NP" -x OMP_NUM_THREADS "$BIN" bench adam --backend cuda \
  --params "$PARAMS" --mode hybrid --bucket 50M --slots 2 --share auto,0.3,1 \
  --threads "$THREADS" -n 3 -w 3 -o "$RUNS" 2>&1 | grep -v '^#' | tail -8

stamp "peer: torch fused CPU AdamW ($NP processes at once)"
if python3 -c 'import torch' 2>/dev/null; then
  pids=()
  for r in $(seq 0 $((NP - 1))); do
    timeout 180 python3 analysis/peers/torch_adamw.py --params "$PARAMS" \
      --threads "$THREADS" --ranks "$NP" --rank "$r" --out "$RUNS" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  grep -h torch_fused "$RUNS"/torch_adamw.*.tsv
else
  python3 analysis/peers/torch_adamw.py --params "$PARAMS" --out "$RUNS"
  echo "torch not installed here: peer row records status error"
fi
stamp "done"
