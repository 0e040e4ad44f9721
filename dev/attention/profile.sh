#!/usr/bin/env bash
# dev/attention/profile.sh — what bounds the attention kernels: Nsight Compute
# (ncu) on one launch of each wgmma kernel of `plateau bench attention` (the
# forward, the backward's dK/dV kernel with its dQ bulk reductions) at S =
# $SEQ, and with PEER=1 on PyTorch's cuDNN SDPA forward and backward kernels
# of the same shape (analysis/peers/torch_sdpa.py, one fwd+bwd), for
# comparison.  Sections: speed of light (SM and memory throughput), compute
# workload (pipe utilization, the tensor pipe included), memory workload (L1 /
# shared, L2 and DRAM throughput, L2 hit rate), warp states (issue stall
# reasons), occupancy and launch statistics (registers, shared memory per
# block, block size).  The full reports go to $RUNS/attention_ncu.txt (and
# attention_ncu_cudnn.txt); the lines that answer "what bounds it" to
# $RUNS/attention_ncu_summary.txt, printed at the end.  Run from the
# repository root on the GPU machine after `make`:
#     RUNS=results/runs/<sweep> [SEQ=32Ki] [PEER=1] [WALKS=1] bash dev/attention/profile.sh
# About a minute per kernel; each ncu call has its own timeout (NCU_TIMEOUT,
# seconds).  Without ncu it records why and exits 0.
set -uo pipefail
RUNS=${RUNS:-results/runs/attn-profile-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=${BIN:-build/bin/plateau}
SEQ=${SEQ:-16Ki}
SHAPE=${SHAPE:---heads 64 --kv-heads 8 --head-dim 128}
NCU_TIMEOUT=${NCU_TIMEOUT:-150}
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section WarpStateStats --section Occupancy --section LaunchStats)
mkdir -p "$RUNS"
out="$RUNS/attention_ncu.txt"
sum="$RUNS/attention_ncu_summary.txt"
if [ -z "$NCU" ]; then
  echo "ncu not found: no profile" | tee "$out" "$sum"
  exit 0
fi
# the tensor pipes' utilization and the issue stall reasons as raw metrics,
# taken only by the names this ncu lists for Hopper (an unknown name would
# fail the whole profile); the section bodies (stall breakdown) when this ncu
# prints them
mets=()
for m in $("$NCU" --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' |
  grep -E '^sm__pipe_tensor_op_(gmma|hmma)_cycles_active$|^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active$'); do
  case $m in
    sm__*) mets+=("$m.avg.pct_of_peak_sustained_active") ;;
    *) mets+=("$m.ratio") ;;
  esac
done
[ ${#mets[@]} -gt 0 ] && SECTIONS+=(--metrics "$(IFS=,; echo "${mets[*]}")")
"$NCU" --help 2>/dev/null | grep -q -- --print-details && SECTIONS+=(--print-details body)
# the clocks as found (METHOD.md: leave them alone); one launch of each kernel
ncu_run() {
  timeout "$NCU_TIMEOUT" "$NCU" --clock-control none --launch-count 1 "${SECTIONS[@]}" "$@"
}
for k in attn_fwd_wgmma attn_bwd_dkdv_wgmma; do
  echo "## kernel $k (S = $SEQ, $SHAPE)" >>"$out"
  ncu_run --kernel-name "regex:$k" "$BIN" bench attention --backend cuda $SHAPE --seq "$SEQ" \
    --pass both -w 1 -n 1 --no-check -o "$RUNS/ncu-bench" >>"$out" 2>&1 ||
    echo "(ncu on $k failed or timed out: see above)" >>"$out"
done
# the peer: cuDNN's SDPA kernels (names differ by cuDNN version: anything
# with sdpa, fmha, flash, fprop or bprop in it), one launch each of the first
# three (forward, the backward's preprocessing and its main kernel)
if [ "${PEER:-0}" = 1 ]; then
  peer="$RUNS/attention_ncu_cudnn.txt"
  echo "## cuDNN SDPA through PyTorch (S = $SEQ, $SHAPE, fwd+bwd)" >>"$peer"
  timeout "$NCU_TIMEOUT" "$NCU" --clock-control none --target-processes all \
    --kernel-name 'regex:sdpa|fmha|flash|fprop|bprop|Sdpa|Fmha|Flash' --launch-count 3 "${SECTIONS[@]}" \
    python3 analysis/peers/torch_sdpa.py --seq "$SEQ" --backends cudnn --passes fwdbwd \
    --iters 1 --warmup 1 $SHAPE --out "$RUNS/ncu-peer.tsv" >>"$peer" 2>&1 ||
    echo "(ncu on the cuDNN peer failed or timed out: see above)" >>"$peer"
fi
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
  grep -E "^## |Duration|Throughput|Hit Rate" "$RUNS/attention_ncu_l2.txt" | head -40
fi
rm -rf "$RUNS/ncu-bench" "$RUNS/ncu-peer.tsv"

# the summary: per kernel profiled, the lines that say what bounds it
{
  echo "# attention kernels under ncu, S = $SEQ ($SHAPE); full reports beside this file"
  for f in "$out" ${PEER:+"$RUNS/attention_ncu_cudnn.txt"}; do
    [ -f "$f" ] || continue
    awk '
      /^## / { print ""; print; next }
      /^  [A-Za-z_0-9:<>, ]+\(.*\)[^|]*$/ && /[Cc]ontext|Stream|Device/ { print "### " $0; next }
      /^  [a-z_0-9]+.*\([0-9]+, [0-9]+, [0-9]+\)x\([0-9]+, [0-9]+, [0-9]+\)/ { print "### " $0; next }
      /Duration|Compute \(SM\) Throughput|^ *Memory Throughput|DRAM Throughput|L1\/TEX Cache Throughput|L2 Cache Throughput|L2 Hit Rate|Mem Busy|Max Bandwidth|Mem Pipes Busy|Executed Ipc Active|Issue Slots Busy|SM Busy|Registers Per Thread|Shared Memory Configuration Size|Dynamic Shared Memory Per Block|Block Size|Theoretical Occupancy|Achieved Occupancy|Block Limit|Warp Cycles Per Issued Instruction|Avg. Active Threads Per Warp/ { print; next }
      /sm__pipe_tensor_op|issue_stalled_/ { print; next }
      /(OPT|INF|WRN) .*([Ss]tall|[Tt]ensor|pipe|bound|[Bb]ank|uncoalesced|occupancy)/ { sub(/^ +/, "  "); print substr($0, 1, 400); next }
      /failed|timed out|ERR|==ERROR==|not found/ { print }
    ' "$f"
  done
} >"$sum"
cat "$sum"
