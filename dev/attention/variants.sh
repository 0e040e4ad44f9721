#!/usr/bin/env bash
# dev/attention/variants.sh — the quick A/B of the attention kernels in
# one run of the GPU machine: the CUDA attention test (every engine kernel
# choice against SIMPLE; fails on a mismatch), the dev programs (every kernel
# version of dev/attention, the engine's and the ones it was chosen over,
# validated against the CPU reference, then timed at each S of SEQ; VF / VB
# pick forward / backward versions, e.g. VB="3 8", empty runs all), `plateau
# bench attention` fwd+bwd with the engine's backward choices (BWD, default
# "wgmma split"), and the PyTorch SDPA peer on the same shapes (PEER=0 skips
# it, TEST=0 the test, DEV=0 the dev programs).  Run from the repository root
# on the GPU machine after `make all tests dev`:
#     RUNS=results/runs/<dir> bash dev/attention/variants.sh
# About 4 minutes.  Exits non-zero if a step failed.  What the versions
# measured so far: doc/performance/attention.md.
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
  step "CUDA attention test (every kernel choice against SIMPLE)"
  CK_FORK=no timeout 420 "$BUILD/tests/engine/model/test_attention_cuda" >"$RUNS/attention_test_cuda.txt" 2>&1 || fail=1
  grep -E "Checks|tflops|FAIL|fail|MISMATCH" "$RUNS/attention_test_cuda.txt" | head -30
fi
if [ "${DEV:-1}" = 1 ]; then
  for p in attention_forward:${VF-} attention_backward:${VB-}; do
    prog=${p%%:*} vers=${p#*:}
    [ -x "$BUILD/dev/attention/$prog" ] || { echo "no $BUILD/dev/attention/$prog: run make dev"; fail=1; continue; }
    for S in ${SEQ//,/ }; do
      for v in ${vers:-0}; do
        step "dev/attention/$prog ${v/#0/(all versions)} at S = $S"
        args=(--seq "$S" --heads 64 --kv-heads 8 -n 3 -w 1)
        [ "$v" != 0 ] && args+=(-v "$v")
        timeout 300 "$BUILD/dev/attention/$prog" "${args[@]}" >>"$RUNS/dev_$prog.txt" 2>&1 || fail=1
      done
    done
    grep -E "MISMATCH|BAD|^[0-9]" "$RUNS/dev_$prog.txt" | head -60
  done
fi
for b in ${BWD-wgmma split}; do
  step "fwd+bwd, backward $b"
  # the rows from the result file (its path is the bench's last line)
  f=$(timeout 150 "$BIN" bench attention --backend cuda $SHAPE --bwd-kernel "$b" --seq "$SEQ" \
    --pass both -w 1 -n 3 -o "$RUNS" 2>&1 | tail -n 1)
  [ -f "$f" ] && awk -F'\t' '/^#/ {next} !h {for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next}
      $c["pass"] == "fwdbwd" {print $c["kernel"], "S=" $c["seq"], $c["time_ms"] " ms", $c["tflops"] " TFLOP/s"}' "$f" || fail=1
done
if [ "${PEER:-1}" = 1 ] && python3 -c "import torch" 2>/dev/null; then
  step "peer: PyTorch SDPA (flash, cuDNN)"
  timeout 300 python3 analysis/peers/torch_sdpa.py --seq "$SEQ" --heads 64 --kv-heads 8 --head-dim 128 \
    --iters 2 --warmup 1 --out "$RUNS/peer_torch_sdpa.tsv" || fail=1
  column -t "$RUNS/peer_torch_sdpa.tsv" 2>/dev/null | head -20
fi
step "done: $RUNS"
exit $fail
