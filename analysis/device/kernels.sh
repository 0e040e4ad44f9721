#!/usr/bin/env bash
# analysis/device/kernels.sh — the kernel round on ONE H200 (nvidia-h200: 16
# host cores), each measurement beside its peer in the same run: the CPU
# AdamW update at the host-memory roofline, the vocabulary head in TF32, the
# expert weight-gradient GEMM, and Nsight Compute profiles of the attention
# kernels (ours and cuDNN's).  It builds nothing: build first, as
# analysis/device/run.sh does,
#
#   make -j$(nproc) BLAS=none STATIC_DEPS=1 [DEPS_PREFIX=DIR] WERROR=0 all tests
#   bash analysis/device/kernels.sh [--budget SECONDS] OUT_DIR
#
# from the repository root.  Every part writes its result files (the
# harness's metadata in each) and logs into OUT_DIR, plus kernels-meta.txt
# (the machine: plateau info, GPU, host CPU and its caches) and, last,
# kernels-table.md (the comparison, also printed).  Expected time about 5.5
# minutes; each part has a timeout, skips itself when less than its share of
# the budget (--budget: the seconds your allocation leaves it, default 350;
# 0 for no limit) is left (the profiles of
# part 6 share what is left), and a failing part leaves the others running:
#   1. CUDA tests of the touched code, and the SIMD AdamW's tests on this
#      host's AVX-512 (test_adamw_simd, test_cpu_adamw)                  ~40 s
#   2. adam at 2.625 B params, one rank, 16 threads: the SIMD update alone
#      (update), the classic step with full staging, the default ring (3 x
#      32M) and a ring kept in cache (2 x 1Mi), the hybrid (auto share at
#      β 25M, 2 slots); 2 warm-ups, 3 timed steps                         ~70 s
#   3. torch fused CPU AdamW, same params and threads (the peer)          ~30 s
#   4. vocab f32 N 16K in TF32: fused at block 4096 (the old default) and
#      16384 (the new f32 default), dense; torch TF32 dense (the peer)   ~45 s
#   5. moegemm weight gradient, Ep 2's per-rank shape, expert-major: 32K
#      (H = I = 4096, top-4) at K = 3 and 65K (H 7168, I 2048, top-8) at
#      K = 10; the loop at lanes 0, 2, 4, each beside dense cuBLAS of
#      equal FLOPs; ncu on one loop GEMM at 32K / K = 3                   ~40 s
#   6. ncu: our attention forward and dK/dV kernels and cuDNN SDPA's at S =
#      32Ki (dev/attention/profile.sh, SEQ=32Ki PEER=1)                  ~120 s
set -uo pipefail
PL_SCRIPT=kernels
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pl_dev_args 350 "$@"
[ ${#PL_ARGS[@]} -eq 1 ] || { echo "usage: bash analysis/device/kernels.sh [--budget S] OUT_DIR"; exit 2; }
pl_dev_begin "${PL_ARGS[0]}"
PARAMS=${PARAMS:-2625M}
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
# part NAME SECONDS: true when at least SECONDS of the budget are left
part() {
  local left=$(pl_left)
  if ((left < $2)); then
    stamp "$1: not run ($left s left of the budget, needs $2)"
    return 1
  fi
  stamp "$1"
}

{
  echo "# kernels.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  "$BIN" info 2>&1
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
  lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|Thread|NUMA node\(s\)|L1d|L2|L3|Flags" | cut -c1-200
  free -g | head -2
  echo "ncu: ${NCU:-none}"
} >"$OUT/kernels-meta.txt"
grep -E "Model name|L3|NVIDIA" "$OUT/kernels-meta.txt"

if part "1. tests: the touched CUDA code, the SIMD AdamW on this host" 40; then
  run_tests 45 build/tests/engine/ops/test_adamw_simd build/tests/baselines/test_cpu_adamw \
    build/tests/baselines/test_cpu_adamw_cuda \
    build/tests/baselines/test_ce build/tests/engine/ops/test_mpi_ring_dtp | tee "$OUT/tests.txt"
fi

if part "2. adam: update, cpu (full, ring3, ring2:1Mi), hybrid; $PARAMS params, $THREADS threads" 100; then
  OMP_NUM_THREADS=$THREADS bench 150 adam --params "$PARAMS" --mode update,cpu,hybrid \
    --cpu-staging full,ring3,ring2:1Mi --bucket 25M --slots 2 --share auto \
    --threads "$THREADS" -w 2 -n 3
fi

if part "3. torch fused CPU AdamW, $PARAMS params, $THREADS threads" 40; then
  peer 90 torch_adamw.py --params "$PARAMS" --threads "$THREADS" --ranks 1 --rank 0 --out "$OUT"
fi

if part "4. vocab f32 N 16K, TF32: fused (block 4096, 16384), dense; torch TF32" 60; then
  bench 90 vocab --preset paper --dtypes f32 -N 16384 --variants fused --blocks 4096,16384 \
    --tf32 -w 1 -n 3
  bench 45 vocab --preset paper --dtypes f32 -N 16384 --variants dense --tf32 -w 1 -n 3 --no-check
  peer 60 torch_ce.py --tokens 16384 --dtypes f32 --tf32-only -w 1 -n 3 -o "$OUT"
fi

if part "5. moegemm wgrad, Ep 2's shape: 32K K=3, 65K K=10; loop (lanes 0,2,4)" 40; then
  for shape in "32k 3" "65k 10"; do
    set -- $shape
    bench 60 moegemm --preset "$1" --ep 2 --chunks "$2" --kinds wgrad --layouts expert_major \
      --lanes 0,2,4 -w 3 -n 10
  done
  if [ -n "$NCU" ]; then
    echo "## ncu: one weight-gradient GEMM launch, 32K K=3 Ep 2" >>"$OUT/moegemm_ncu.txt"
    timeout 60 "$NCU" --clock-control none --kernel-name 'regex:gemm|Gemm|GEMM|xmma|cutlass' \
      --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section LaunchStats --section Occupancy "$BIN" bench moegemm --backend cuda \
      --preset 32k --ep 2 --chunks 3 --kinds wgrad --layouts expert_major --lanes 0 \
      -w 0 -n 1 -o "$OUT/ncu-moegemm" >>"$OUT/moegemm_ncu.txt" 2>&1 ||
      echo "(ncu: failed or timed out)" >>"$OUT/moegemm_ncu.txt"
    rm -rf "$OUT/ncu-moegemm"
    grep -E "^## |^  [a-z_].*\(.*\)x\(|Duration|Compute \(SM\) Throughput|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|failed" \
      "$OUT/moegemm_ncu.txt" | cut -c1-160
  fi
fi

if part "6. ncu: attention at 32Ki, ours and cuDNN's" 90; then
  # three ncu calls share what is left of the deadline, 80 s each at most
  per=$((($(pl_left) - 10) / 3))
  RUNS="$OUT" SEQ=32Ki PEER=1 NCU="$NCU" NCU_TIMEOUT=$((per < 80 ? per : 80)) \
    bash dev/attention/profile.sh
fi

stamp "the table"
pl_table '*.tsv' <<'EOF' | tee "$OUT/kernels-table.md"

print("# kernels.sh: %s\n" % out)
adam = [r for r in rows if r.get("bench") in ("adam", "torch_adamw") and r.get("status") == "ok"]
torch_ms = min([num(r, "time_ms") for r in adam if r.get("bench") == "torch_adamw"] or [float("nan")])
if adam:
    print("## CPU AdamW, %s params, one rank (torch fused CPU AdamW: %.1f ms)\n"
          % (adam[0].get("params"), torch_ms))
    print("| variant | staging | B/param | time ms | update ms | vs torch (update) | Gparam/s | % mem roofline (step) | % mem roofline (update) | check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in adam:
        v = r.get("variant")
        st = "-"
        if v == "cpu":
            st = "full" if r.get("slots") == "0" else "ring %s x %s" % (r.get("slots"), r.get("bucket"))
        upd = num(r, "update_ms") if v in ("cpu", "update") else num(r, "time_ms")
        print("| %s | %s | %s | %.1f | %s | %.3fx | %.3f | %s | %s | %s |" % (
            v, st, r.get("host_bpp", "28"), num(r, "time_ms"),
            "%.1f" % upd if upd == upd else "-", upd / torch_ms, num(r, "gparam_s"),
            r.get("pct_mem_roof", "-"), r.get("pct_update_roof", "-"), r.get("check", "-")))
    mem = [num(r, "mem_copy_gbs") for r in adam if r.get("bench") == "adam"]
    print("\nHost memory copy rate in the run: %.1f GB/s.  Targets: the update <= torch's time; "
          "the hybrid >= 1.0x torch (Gparam/s).\n" % (mem[0] if mem else float("nan")))

voc = [r for r in rows if r.get("bench") == "vocab" and r.get("status") == "ok" and r.get("math") == "tf32"]
if voc:
    tt = [num(r, "time_ms") for r in voc if r.get("variant") == "torch-tf32"]
    t0 = tt[0] if tt else float("nan")
    print("## Vocabulary head, f32 N 16K in TF32 (torch TF32 dense: %.1f ms)\n" % t0)
    print("| variant | block | time ms | vs torch TF32 | peak GiB | check | max_err |")
    print("|---|---|---|---|---|---|---|")
    for r in voc:
        print("| %s | %s | %.1f | %.3fx | %.2f | %s | %s |" % (
            r.get("variant"), r.get("block", "-"), num(r, "time_ms"), num(r, "time_ms") / t0,
            num(r, "dev_peak_bytes") / 2 ** 30, r.get("check", "-"), r.get("max_err", "-")))
    print("\nTarget: the one-rank head (fused) <= 1.10x torch TF32 dense.\n")

mg = [r for r in rows if r.get("bench") == "moegemm" and r.get("status") == "ok"]
if mg:
    print("## Expert weight-gradient GEMM vs dense cuBLAS of equal FLOPs (Ep %s's per-rank shape)\n"
          % mg[0].get("ep", "?"))
    print("| tokens | H | I | K | groups x rows | kernel | lanes | loop ms | dense ms | TFLOP/s | ratio | acc GB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in mg:
        print("| %s | %s | %s | %s | %s x %s | %s | %s | %.3f | %.3f | %.0f | %.3f | %s |" % (
            r.get("tokens"), r.get("hidden"), r.get("ffn"), r.get("K"), r.get("groups"),
            r.get("rows"), r.get("kernel"), r.get("lanes"), num(r, "time_ms"),
            num(r, "dense_ms"), num(r, "tflops"), num(r, "ratio"), r.get("acc_gbs", "-")))
    print("\nTarget: ratio >= 0.70 at 32K / K = 3 and 65K / K = 10.\n")
for f in ("attention_ncu_summary.txt", "moegemm_ncu.txt"):
    p = os.path.join(out, f)
    print("%s: %s" % (f, "written" if os.path.exists(p) else "missing"))
EOF
stamp "done: $OUT"
