#!/usr/bin/env bash
# analysis/device/sco.sh — SCO on the H200 machine (nvidia-h200-x2, 2 ranks):
# the checkpoint/SCO test on CUDA, the paper preset's host-budget sweep
# (Table 3), a FLOP-faithful variant, and the max-batch search with host
# budget 0 vs all (Table 13).  Results go to "$RUNS"; about 3–4 minutes.
#
# Run from the repository root after `make` (analysis/device/run.sh sco does
# both and sets RUNS, BIN, MPIRUN).  Knobs:
#   SCO_MB_LIMIT  device capacity per GPU for the max-batch search (default
#                 16Gi, via --mem-limit: the tracked allocator refuses beyond
#                 it, exactly as on the CPU).  At the full 141 GB HBM a budget
#                 of "all" needs 24·N·H·2 B of pinned host memory per rank —
#                 past this 2-GPU host's RAM before the GPU is full — and each
#                 trial would pin ~100 GB; 0 = the whole HBM (slow; careful).
#   SCO_MB_STEP   granularity of the search (default 16Ki tokens per rank)
#   SCO_MB_START  first N tried, then doubled (default 64Ki)
# Expected from the tracked allocator (the same figures on the CPU backend:
# 3.34 GiB of weights + fp32 grads, then 35·N·H·2 B per token at budget 0 and
# 13·N·H·2 B at all): at 16 GiB the bound is 67.4K tokens/rank at budget 0 and
# 181.6K at all, i.e. 64Ki/80Ki and 176Ki/192Ki (clean/first failing) at a
# 16Ki step; the sweep's peak at N=64Ki: 15.64 GiB -> 7.91 GiB.
#   SCO_STEP_RELEASE=1  also sweep --release step (pins every step: slow)
set -uo pipefail
RUNS=${RUNS:-results/runs/h200-sco-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=${BIN:-build/bin/plateau}
MPIRUN=${MPIRUN:-mpirun --bind-to none}
NP=${NP:-$(nvidia-smi -L 2>/dev/null | wc -l)}  # every GPU of the machine (8 on nvidia-h200-x8)
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SCO_MB_LIMIT=${SCO_MB_LIMIT:-16Gi}
SCO_MB_STEP=${SCO_MB_STEP:-16Ki}
SCO_MB_START=${SCO_MB_START:-64Ki}
start=$(date +%s)
stamp() { echo "## sco [$(($(date +%s) - start))s] $*"; }
mkdir -p "$RUNS"

stamp "test_mpi_sco on CUDA (np 1, $NP)"
for np in 1 "$NP"; do
  CK_FORK=no timeout 180 $MPIRUN -np "$np" build/tests/engine/train/test_mpi_sco 2>&1 | tail -2
done

stamp "sweep: paper preset (L=24, H=I=2880, N=64Ki/rank, bf16), budgets 0, 1/4 … all"
timeout 240 $MPIRUN -np "$NP" "$BIN" bench sco --backend cuda --preset paper -n 3 -w 1 -o "$RUNS" 2>&1 | grep -v '^# ' | tail -12

# gpt-oss-20b routes each token to 4 experts of width 2880: the MLP FLOPs per
# token are those of one dense block with I = 4·2880.  With I = 2880 each layer
# computes for about as long as one boundary takes to cross the host link
# (N·H·2 B at ~55 GB/s), so the forward copies can show in the step time.
stamp "sweep: FLOP-faithful variant I = 4·2880 = 11520, budgets 0 and all"
timeout 240 $MPIRUN -np "$NP" "$BIN" bench sco --backend cuda --preset paper -n 3 -w 1 --ffn 11520 --budget-steps 1 \
  -o "$RUNS" 2>&1 | grep -v '^# ' | tail -6

if [ "${SCO_STEP_RELEASE:-0}" = 1 ]; then
  stamp "sweep: --release step (pinned per step, as the paper)"
  timeout 240 $MPIRUN -np "$NP" "$BIN" bench sco --backend cuda --preset paper -n 3 -w 1 --release step --budget-steps 1 \
    -o "$RUNS" 2>&1 | grep -v '^# ' | tail -6
fi

# The search is one process on the CPU backend (it must hold no CUDA context);
# each trial is `mpirun -np 2 plateau bench sco --backend cuda …`.
stamp "maxbatch: budget 0 vs all, capacity ${SCO_MB_LIMIT}/GPU, step ${SCO_MB_STEP}"
lim=()
[ "$SCO_MB_LIMIT" != 0 ] && lim=(--mem-limit "$SCO_MB_LIMIT")
timeout 420 "$BIN" bench maxbatch --backend cpu --trial-backend cuda --bench sco --preset paper \
  --budgets 0,all --step "$SCO_MB_STEP" --start "$SCO_MB_START" "${lim[@]}" --trial-timeout 120 \
  --launcher "$MPIRUN -np $NP" -o "$RUNS" 2>"$RUNS/sco-maxbatch-trials.log" | grep -v '^# '

stamp "done: results in $RUNS"
ls -la "$RUNS"
