#!/usr/bin/env bash
# analysis/device/attn_l2.sh — what the dK/dV kernel's step order does to the
# memory system: Nsight Compute (SpeedOfLight, MemoryWorkloadAnalysis: L2 hit
# rate, DRAM bytes) on one launch of attn_bwd_dkdv_wgmma_kernel per
# PLATEAU_ATTN_BWD_WALK value (WALKS, default "asc desc") with the backward
# variant VARIANT (default bulk2), S = 16Ki, the bench shape; into
# $RUNS/attention_ncu_l2.txt.  About 40 s per order.
set -uo pipefail
RUNS=${RUNS:-results/runs/attn-l2-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=${BIN:-build/bin/plateau}
SHAPE=${SHAPE:---heads 64 --kv-heads 8 --head-dim 128}
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)}
mkdir -p "$RUNS"
out="$RUNS/attention_ncu_l2.txt"
[ -z "$NCU" ] && { echo "ncu not found: no profile" | tee "$out"; exit 0; }
for w in ${WALKS:-asc desc}; do
  echo "## attn_bwd_dkdv_wgmma, variant ${VARIANT:-bulk2}, walk $w (S = 16Ki, $SHAPE)" >>"$out"
  PLATEAU_ATTN_BWD_WALK=$w PLATEAU_ATTN_WGMMA_BWD=${VARIANT:-bulk2} timeout 200 "$NCU" \
    --kernel-name regex:attn_bwd_dkdv_wgmma --launch-count 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis "$BIN" bench attention --backend cuda $SHAPE --seq 16Ki \
    --pass both -w 1 -n 1 -o "$RUNS/ncu-bench" >>"$out" 2>&1 || echo "(ncu, walk $w, failed)" >>"$out"
done
rm -rf "$RUNS/ncu-bench"
grep -E "^## |Duration|Throughput|Hit Rate|DRAM|Mem Busy|Max Bandwidth" "$out" | head -60
