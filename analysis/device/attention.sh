#!/usr/bin/env bash
# analysis/device/attention.sh — attention on the GPU machine: build check
# (registers, spills and serialized wgmma of the attention kernels, from
# ptxas), the CUDA test (every kernel choice against SIMPLE, SIMPLE and MMA
# against the CPU reference; errors and TFLOP/s printed), the layer, Ulysses
# and MoE tests with AUTO's kernels inside (tests.txt), the `plateau bench
# attention` sweep with AUTO's kernels (S = 4Ki…128Ki fwd and fwd+bwd; 256Ki,
# 512Ki and 1Mi forward only, one iteration), the engine's other kernel
# choices (--bwd-kernel split, mma; --fwd-kernel mma), the dev programs (every
# kernel version, validated then timed; needs `make dev`), and the PyTorch
# SDPA peer (flash and cuDNN) on the same shapes; with 2 GPUs also Ulysses
# D = 2 (attention and the decoder layer).  Run from the repo root after
# `make all tests dev`:
#     RUNS=results/runs/<sweep> bash analysis/device/attention.sh
# Budget: about 6 minutes of GPU time, the last one for the ncu profile
# (analysis/device/attn_profile.sh; ATTN_PROFILE=0 skips it).  Each step has
# its own timeout; a step that fails is reported and the script goes on,
# exiting non-zero at the end.  ATTN_MEMCHECK=1 adds compute-sanitizer
# memcheck of the small test shapes at the end; DEV=0 skips the dev programs,
# DEV_SEQ (default 16Ki) sets their timed lengths.
set -uo pipefail
RUNS=${RUNS:-results/runs/attention-$(date -u +%Y%m%dT%H%M%SZ)}
BUILD=${BUILD:-build}
BIN=${BIN:-$BUILD/bin/plateau}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
SHAPE=${SHAPE:---heads 64 --kv-heads 8 --head-dim 128}
export NCCL_NVLS_ENABLE=0
mkdir -p "$RUNS"
fail=0
step() { echo "== $*"; }

if [ "${PTXAS:-1}" = 1 ]; then # PTXAS=0 skips it (one nvcc run per kernel file, twice)
step "build check: nvcc -Xptxas -v (registers, spills) of the attention kernels"
: >"$RUNS/attention_ptxas.txt"
for f in engine/backend/cuda/attention*.cu; do
  # sm_90: the mma.sync kernels; sm_90a: the wgmma kernels too, where a ptxas
  # "serialized" line (C75xx) means a kernel lost its wgmma pipelining
  for arch in 90 90a; do
    "$NVCC" -std=c++17 -O3 -arch=sm_$arch -Iengine/include -Iengine -DPL_HAVE_CUDA=1 \
      $(mpicc --showme:compile 2>/dev/null) --expt-relaxed-constexpr -Xptxas -v -c "$f" \
      -o "$RUNS/attention_check.o" 2>&1 | grep -A3 -E "Compiling entry|serialized|injected" |
      grep -E "entry|spill|registers|serialized|injected" >>"$RUNS/attention_ptxas.txt" || true
  done
done
grep -E "entry.*(mma|wgmma)|spill|serialized" "$RUNS/attention_ptxas.txt" | head -40
rm -f "$RUNS/attention_check.o"
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv 2>/dev/null |
  tee "$RUNS/attention_gpu.txt"

step "CUDA tests (every kernel choice: errors and TFLOP/s)"
CK_FORK=no timeout 420 "$BUILD/tests/engine/model/test_attention_cuda" 2>&1 |
  tee "$RUNS/attention_test_cuda.txt" || fail=1
timeout 300 "$BUILD/tests/engine/model/test_attention" 2>&1 | tail -3 || fail=1

NG=$(nvidia-smi -L 2>/dev/null | wc -l)
step "tests with AUTO's attention inside: layer; Ulysses, layer, MoE at np 2 with 2 GPUs (tests.txt)"
{
  echo "test_layer_cuda: $(CK_FORK=no timeout 120 "$BUILD/tests/engine/model/test_layer_cuda" 2>&1 | tail -1)"
  if [ "$NG" -ge 2 ]; then
    for t in model/test_mpi_ulysses model/test_mpi_layer ops/test_mpi_moe_cuda; do
      echo "engine/$t np=2: $(CK_FORK=no timeout 150 ${MPIRUN:-mpirun --bind-to none} --allow-run-as-root \
        -np 2 "$BUILD/tests/engine/$t" 2>&1 | grep Checks | tail -1)"
    done
  fi
} | tee "$RUNS/tests.txt"
grep -qv "100%" "$RUNS/tests.txt" && fail=1

step "bench attention: S = 4Ki..128Ki, fwd and fwd+bwd"
timeout 300 "$BIN" bench attention --backend cuda $SHAPE --seq 4Ki,8Ki,16Ki,32Ki,64Ki,128Ki \
  --pass both -w 1 -n 3 -o "$RUNS" || fail=1

step "peer: PyTorch SDPA (flash, cuDNN), same shapes"
if python3 -c "import torch" 2>/dev/null; then
  timeout 300 python3 analysis/peers/torch_sdpa.py --seq 4Ki,8Ki,16Ki,32Ki,64Ki,128Ki \
    --heads 64 --kv-heads 8 --head-dim 128 --iters 2 --warmup 1 \
    --out "$RUNS/peer_torch_sdpa.tsv" || fail=1
else
  echo "torch not importable: peer skipped" | tee "$RUNS/peer_torch_sdpa.skipped"
fi

# the engine's other kernel choices, fwd+bwd (the rows' variant and kernel
# columns say which ran)
step "bench attention, the other kernels: --bwd-kernel split, mma; --fwd-kernel mma (fwd+bwd)"
timeout 180 "$BIN" bench attention --backend cuda $SHAPE --bwd-kernel split \
  --seq 16Ki,32Ki,64Ki,128Ki --pass both -w 1 -n 3 -o "$RUNS" || fail=1
timeout 180 "$BIN" bench attention --backend cuda $SHAPE --fwd-kernel mma --bwd-kernel mma \
  --seq 16Ki,32Ki,64Ki --pass both -w 1 -n 2 -o "$RUNS" || fail=1

# every kernel version of dev/attention (the engine's and the ones it was
# chosen over; doc/performance/attention.md), each validated, then timed
if [ "${DEV:-1}" = 1 ]; then
  for p in attention_forward attention_backward; do
    step "dev/attention/$p: every version, validated then timed at S = ${DEV_SEQ:-16Ki}"
    if [ -x "$BUILD/dev/attention/$p" ]; then
      for S in ${DEV_SEQ:-16Ki}; do
        timeout 240 "$BUILD/dev/attention/$p" --seq $S -n 3 -w 1 >"$RUNS/dev_${p}_$S.txt" 2>&1 || fail=1
        grep -vE "^#  " "$RUNS/dev_${p}_$S.txt" | grep -E "MISMATCH|BAD|^[0-9]|ver" | head -20
      done
    else
      echo "no $BUILD/dev/attention/$p: run make dev" | tee "$RUNS/dev_$p.skipped"
    fi
  done
fi

step "bench attention: S = 256Ki, 512Ki, 1Mi forward only (1 run each, no warm-up)"
timeout 120 "$BIN" bench attention --backend cuda $SHAPE --seq 256Ki,512Ki \
  --pass fwd -w 0 -n 1 -o "$RUNS" || fail=1
timeout 150 "$BIN" bench attention --backend cuda $SHAPE --seq 1Mi --pass fwd -w 0 -n 1 -o "$RUNS"
rc=$?
if [ $rc -eq 2 ]; then # the harness refused -w 0: one warm-up then
  timeout 150 "$BIN" bench attention --backend cuda $SHAPE --seq 1Mi --pass fwd -w 1 -n 1 \
    -o "$RUNS" || fail=1
elif [ $rc -ne 0 ]; then fail=1; fi

if [ "$NG" -ge 2 ]; then
  step "bench attention, Ulysses D = 2 (2 GPUs): S = 8Ki..128Ki fwd and fwd+bwd"
  timeout 180 ${MPIRUN:-mpirun --bind-to none} --allow-run-as-root -np 2 "$BIN" bench attention \
    --backend cuda $SHAPE --seq 8Ki,32Ki,128Ki --pass both -w 1 -n 2 -o "$RUNS" || fail=1
  step "bench layer, D = 1 and D = 2"
  timeout 120 "$BIN" bench layer --backend cuda --seq 8Ki,32Ki --pass both -w 1 -n 2 -o "$RUNS" || fail=1
  timeout 120 ${MPIRUN:-mpirun --bind-to none} --allow-run-as-root -np 2 "$BIN" bench layer \
    --backend cuda --seq 8Ki,32Ki,64Ki --pass both -w 1 -n 2 -o "$RUNS" || fail=1
else
  step "bench layer, D = 1 (one GPU: no D = 2 run)"
  timeout 120 "$BIN" bench layer --backend cuda --seq 8Ki,32Ki --pass both -w 1 -n 2 -o "$RUNS" || fail=1
fi

if [ "${ATTN_MEMCHECK:-0}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  step "compute-sanitizer memcheck on the small shapes (out-of-bounds / misaligned accesses)"
  PLATEAU_TEST_SMALL=1 CK_FORK=no timeout 150 compute-sanitizer --tool memcheck --print-limit 20 \
    "$BUILD/tests/engine/model/test_attention_cuda" 2>&1 | tail -25 |
    tee "$RUNS/attention_memcheck.txt" || fail=1
fi

if [ "${ATTN_PROFILE:-1}" = 1 ]; then # ATTN_PROFILE=0 skips it (about a minute)
  step "ncu profile of the wgmma forward and backward (tensor pipe, occupancy)"
  RUNS="$RUNS" BIN="$BIN" SHAPE="$SHAPE" bash analysis/device/attn_profile.sh || fail=1
fi

echo "# results in $RUNS"
exit $fail
