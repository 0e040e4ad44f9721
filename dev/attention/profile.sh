#!/usr/bin/env bash
# dev/attention/profile.sh — where the wgmma attention kernels' time
# goes: Nsight Compute (ncu) on one forward and one backward launch of the
# `plateau bench attention` shape at S = 16Ki (speed of light, compute
# workload (pipe utilization, incl. the tensor pipe), warp states (stall
# reasons), occupancy), written to $RUNS/attention_ncu.txt.  Run from the
# repository root on the GPU machine after `make`:
#     RUNS=results/runs/<sweep> bash dev/attention/profile.sh
# About one minute.  Without ncu it records why and exits 0.
set -uo pipefail
RUNS=${RUNS:-results/runs/attn-profile-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=${BIN:-build/bin/plateau}
SHAPE=${SHAPE:---heads 64 --kv-heads 8 --head-dim 128}
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)}
mkdir -p "$RUNS"
out="$RUNS/attention_ncu.txt"
if [ -z "$NCU" ]; then
  echo "ncu not found: no profile" | tee "$out"
  exit 0
fi
for k in attn_fwd_wgmma attn_bwd_dkdv_wgmma; do
  echo "## kernel $k (S = 16Ki, $SHAPE)" >>"$out"
  timeout 240 "$NCU" --kernel-name "regex:$k" --launch-count 1 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy \
    "$BIN" bench attention --backend cuda $SHAPE --seq 16Ki --pass both -w 1 -n 1 \
    -o "$RUNS/ncu-bench" >>"$out" 2>&1 || echo "(ncu on $k failed: see above)" >>"$out"
done
# WALKS=1: also what the dK/dV kernel's step order does to the memory system:
# SpeedOfLight and MemoryWorkloadAnalysis (L2 hit rate, DRAM throughput) of
# the engine's kernel in its order (desc: dev/attention backward version 3)
# and in the other (asc: version 6), into $RUNS/attention_ncu_l2.txt (about
# 40 s each; needs make dev)
if [ "${WALKS:-0}" = 1 ]; then
  for v in "3 desc" "6 asc"; do
    set -- $v
    echo "## kernel attn_bwd_dkdv_wgmma, walk $2 (S = 16Ki, 64 q / 8 kv heads)" >>"$RUNS/attention_ncu_l2.txt"
    # (--launch-skip 1: the first launch is the validation at S = 1031)
    timeout 200 "$NCU" --kernel-name regex:attn_bwd_dkdv_wgmma --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight \
      --section MemoryWorkloadAnalysis "${BUILD:-build}/dev/attention/attention_backward" -v "$1" \
      --seq 16Ki -n 1 -w 0 >>"$RUNS/attention_ncu_l2.txt" 2>&1 ||
      echo "(ncu, walk $2, failed)" >>"$RUNS/attention_ncu_l2.txt"
  done
fi
rm -rf "$RUNS/ncu-bench"
[ "${WALKS:-0}" = 1 ] && grep -E "^## |Duration|Throughput|Hit Rate" "$RUNS/attention_ncu_l2.txt" | head -40
grep -E "^## kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|Tensor|Executed Ipc|Achieved Occupancy|Stall|Warp Cycles Per Issued|Issue Slots Busy|Registers Per" "$out" | head -80
