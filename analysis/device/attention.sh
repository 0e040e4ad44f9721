#!/usr/bin/env bash
# analysis/device/attention.sh — the attention path on ONE GPU in one
# allocation: build (cuDNN found as the Makefile finds it: the toolkit, the
# system, PyTorch's nvidia-cudnn wheel, or DEPS_PREFIX), the CUDA tests of the
# attention kernels and of what runs on them (layer, composed step, FSDP2
# baseline, Ulysses), then `plateau bench attention` (AUTO: cuDNN where built;
# our wgmma kernels beside it) and PyTorch's SDPA (cuDNN and flash backends,
# analysis/peers/torch_sdpa.py) on the same shapes in the same run, and the
# table of ratios.  From the repository root:
#
#   [SEQS=4Ki,...] [TESTS=0] bash analysis/device/attention.sh [--budget S] [--deps DIR] OUT_DIR
#
# Expected time on one H200 (a build from scratch adds about two minutes):
#   1. CUDA tests: attention (correctness of every kernel, cuDNN's
#      workspaces, rates), the layer, the composed step and the FSDP2
#      baseline against the CPU, Ulysses                               ~200 s
#   2. bench attention 4K-128K, AUTO and wgmma, fwd and fwd+bwd          ~90 s
#   3. PyTorch SDPA on the same shapes                                   ~60 s
#   4. the table                                                          ~1 s
# Each part has its own timeout; a part that fails leaves the others
# running; the CUDA tests of part 1's second half run only while the budget
# (--budget: the seconds your allocation leaves it, default 540; 0 for no
# limit) lasts.  Results: OUT_DIR/*.tsv, attention-table.md, attention.log.
set -uo pipefail
PL_SCRIPT=attention
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pl_dev_args 540 "$@"
OUT=${PL_ARGS[0]:?usage: bash analysis/device/attention.sh [--budget S] [--deps DIR] OUT_DIR}
SEQS=${SEQS:-4Ki,8Ki,16Ki,32Ki,64Ki,128Ki}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/attention.log") 2>&1
PL_START=$(date +%s)

stamp "0. build (what is missing or stale)"
# cuDNN's runtime-compiled engines load NVRTC by name: the toolkit's
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 -c 'import nvidia.cudnn as m, os; d = list(m.__path__)[0]; print("nvidia-cudnn wheel:", d, sorted(os.listdir(d)))' 2>&1 | tail -1
make -j"$(nproc)" DEPS=0 BLAS=none STATIC_DEPS=1 DEPS_PREFIX="$DEPS_PREFIX" WERROR=0 all tests \
  >"$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; echo "build failed"; exit 2; }
grep "^# plateau build" "$OUT/build.log"
pl_dev_begin "$OUT"
"$BIN" info | grep -E "cuDNN|NCCL|GPU|driver"

if [ "${TESTS:-1}" = 1 ]; then
  stamp "1. CUDA test of the attention kernels"
  CK_FORK=no timeout 200 build/tests/engine/model/test_attention_cuda >"$OUT/test_attention_cuda.txt" 2>&1
  grep -E "^# (tflops|cudnn workspace)|MISMATCH|BAD|KERNEL NAMES|refuses|Checks|FAIL|Error" \
    "$OUT/test_attention_cuda.txt" | head -60
fi

stamp "2. bench attention $SEQS: AUTO, then our wgmma kernels at 32K and 128K"
bench 150 attention --seq "$SEQS" --heads 64 --kv-heads 8 --head-dim 128 -w 1 -n 5
bench 60 attention --seq 32Ki,128Ki --heads 64 --kv-heads 8 --head-dim 128 \
  --fwd-kernel wgmma --bwd-kernel wgmma -w 1 -n 3 --no-check

stamp "3. PyTorch SDPA on the same shapes"
peer 120 torch_sdpa.py --seq "$SEQS" --heads 64 --kv-heads 8 --head-dim 128 \
  --backends cudnn,flash --iters 5 --warmup 1 --out "$OUT/peer_torch_sdpa.tsv"

if [ "${TESTS:-1}" = 1 ]; then
  stamp "3b. CUDA tests of what runs on the attention (the time left of --budget ${BUDGET} s)"
  for t in build/tests/engine/model/test_layer_cuda build/tests/engine/train/test_mpi_step_cuda \
    build/tests/baselines/fsdp2/test_mpi_fsdp2_cuda build/tests/engine/model/test_mpi_ulysses; do
    left=$(($(pl_left) - 15))
    if ((left < 20)); then echo "== $t: not run (budget spent)"; continue; fi
    CK_FORK=no timeout "$left" $MPIRUN -np 1 "$t" >"$OUT/$(basename "$t").txt" 2>&1
    echo "== $t: exit $? $(grep -E '^[0-9]+%: Checks' "$OUT/$(basename "$t").txt")"
    grep -E ':[FE]:' "$OUT/$(basename "$t").txt" | head -5
  done
fi

stamp "4. the table"
pl_table '*.tsv' <<'EOF' | tee "$OUT/attention-table.md"
ours = [r for r in rows if r.get("bench") == "attention" and r.get("status") == "ok"]
peer = [dict(r, backend=r.get("variant")) for r in rows
        if r.get("bench") == "peer_torch_sdpa" and r.get("status") == "ok"]
def rate(r):
    return num(r, "tflops")
print("# attention.sh: %s\n" % out)
print("| S | pass | kernel | TFLOP/s | torch cuDNN | ratio | torch flash |")
print("|---|---|---|---|---|---|---|")
for r in sorted(ours, key=lambda r: (num(r, "seq"), r.get("pass", ""), r.get("kernel", ""))):
    S, p = num(r, "seq"), r.get("pass", "")
    def peer_rate(b):
        m = [x for x in peer if num(x, "seq") == S and x.get("pass") == p and x.get("backend") == b]
        return rate(m[0]) if m else float("nan")
    c, f = peer_rate("cudnn"), peer_rate("flash")
    print("| %d | %s | %s | %.1f | %.1f | %.3fx | %.1f |" % (S, p, r.get("kernel", "-"), rate(r), c,
          rate(r) / c if c == c and c > 0 else float("nan"), f))
print("\nTargets: fwd+bwd >= 0.98x torch's cuDNN backend at 32K and 128K, >= 0.95x at 4K-16K; fwd alone >= 0.98x.")
EOF
stamp "done"
