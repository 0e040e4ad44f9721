#!/usr/bin/env bash
# analysis/device/speed.sh — the vocabulary head's time and the optimizer at
# the host's limits, each beside its peer in the same run, on ONE H200
# (nvidia-h200: 16 host cores, ~125 GiB of host memory).  It builds nothing:
# build first (analysis/device/run.sh's build, or `make` with the machine's
# flags), then run from the repository root:
#
#   bash analysis/device/speed.sh [OUT_DIR]        (default results/runs/speed-<UTC>)
#
# Every part writes its result files into OUT_DIR; the last part prints a short
# comparison table (and writes it to OUT_DIR/speed-table.md).  Liger's peer
# needs the liger-kernel package: when it is not importable and a wheel is in
# .whl/ (copy it to the node), it is installed from there with pip
# --no-index --no-deps (Triton and PyTorch are on the machine); without either
# the Liger row is missing and the table says so.
#
# Expected time on the H200 (about 4.5 minutes in all):
#   1. CUDA tests of the new paths (test_ce, test_mpi_ring_dtp np 1,
#      test_mpi_ce_heads np 1, test_cpu_adamw_cuda, test_adamw_cuda)     ~35 s
#   2. vocab bf16, N 16K and 32K: dense, fused (three GEMMs), ring (P=1),
#      chunk, blocked, 3 timed after 1 warm-up, checked                   ~45 s
#   3. vocab bf16 N 16K: ring --schedule blocked, --strip-budget
#      0,4Gi,8Gi,14Gi (the budget -> time curve)                           ~15 s
#   4. vocab f32 N 16K: dense, fused, ring in fp32 math, then --tf32        ~60 s
#   5. peers: Liger (bf16 16K, 32K) and torch dense (bf16 16K, 32K; f32
#      16K with and without TF32), one GPU                                 ~60 s
#   6. calib host memory (mem_read, mem_write, mem_copy at 2 GiB) and the
#      link each way and both (256 MiB)                                    ~10 s
#   7. adam at 2.625 B params, one rank, 16 threads: cpu; stream at
#      (25M, 4 slots) and (100M, 2); hybrid auto at (25M, 4) and (100M, 2),
#      4 warm-ups (the share converges) and 3 timed steps                  ~50 s
#   8. torch fused CPU AdamW at 2.625 B params, 16 threads                 ~25 s
#   9. the table                                                            ~1 s
# Each part has its own timeout; a part that fails leaves the others running.
set -uo pipefail
PL_SCRIPT=speed
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pl_dev_begin "${1:-results/runs/speed-$(date -u +%Y%m%dT%H%M%SZ)}"
PARAMS=${PARAMS:-2625M}
vocab() { bench "$1" vocab --preset paper "${@:2}"; }

stamp "1. CUDA tests of the new paths"
run_tests 90 build/tests/baselines/test_ce build/tests/baselines/test_cpu_adamw_cuda \
  build/tests/engine/ops/test_adamw_cuda build/tests/engine/ops/test_mpi_ring_dtp \
  build/tests/baselines/test_mpi_ce_heads

stamp "2. vocab bf16 N 16K, 32K: dense, fused, ring (P=1), chunk, blocked"
vocab 150 --dtypes bf16 -N 16384,32768 --variants dense,fused,ring,chunk,blocked -w 1 -n 3

stamp "3. vocab bf16 N 16K: ring blocked, strip budget -> time"
vocab 60 --dtypes bf16 -N 16384 --variants ring --schedule blocked \
  --strip-budget 0,4Gi,8Gi,14Gi -w 1 -n 3 --no-check

stamp "4. vocab f32 N 16K: fp32 math, then TF32"
vocab 100 --dtypes f32 -N 16384 --variants dense,fused,ring -w 1 -n 2
vocab 50 --dtypes f32 -N 16384 --variants dense,fused,ring --tf32 -w 1 -n 3

stamp "5. peers: Liger fused linear CE, torch dense linear + cross_entropy"
if ! python3 -c 'import liger_kernel' 2>/dev/null; then
  whl=$(ls .whl/liger_kernel-*.whl 2>/dev/null | tail -1)
  if [ -n "$whl" ]; then
    echo "installing $whl (no index, no deps)"
    timeout 60 python3 -m pip install --no-index --no-deps "$whl" 2>&1 | tail -1
  fi
fi
peer 90 liger_ce.py --tokens 16384,32768 --dtypes bf16 -w 2 -n 5 -o "$OUT"
peer 60 torch_ce.py --tokens 16384,32768 --dtypes bf16 -w 1 -n 3 -o "$OUT"
peer 80 torch_ce.py --tokens 16384 --dtypes f32 --tf32 -w 1 -n 2 -o "$OUT"

stamp "6. calib: host memory and the link (one rank)"
OMP_NUM_THREADS=$THREADS bench 60 calib --tests mem_read,mem_write,mem_copy,h2d,d2h,bidir \
  --mem-size 2Gi --sizes 256Mi -w 2 -n 5

stamp "7. adam: cpu, stream, hybrid at $PARAMS params, one rank, $THREADS threads"
free -g | head -2
OMP_NUM_THREADS=$THREADS bench 150 adam --params "$PARAMS" --mode cpu,stream,hybrid \
  --bucket 25M,100M --slots 4,2 --share auto --threads "$THREADS" -w 4 -n 3

stamp "8. torch fused CPU AdamW at $PARAMS params, $THREADS threads"
peer 120 torch_adamw.py --params "$PARAMS" --threads "$THREADS" --ranks 1 --rank 0 \
  --out "$OUT"

stamp "9. the table"
pl_table '*.tsv' <<'EOF' | tee "$OUT/speed-table.md"

GIB = 2.0 ** 30
def above(r):  # device peak above X and W (what Liger's number is)
    es = 2 if r.get("dtype") == "bf16" else 4
    n, h, v = num(r, "tokens"), num(r, "hidden"), num(r, "vocab")
    return (num(r, "dev_peak_bytes") - (n * h + h * v) * es) / GIB

vocab = [r for r in rows if r.get("bench") == "vocab" and r.get("status") == "ok"]
print("# speed.sh: %s\n" % out)
print("## Vocabulary head, one H200 (fwd+bwd; H 7168, V 200,000)\n")
print("| dtype | math | N | variant | kernel | budget GiB | time ms | peak GiB | above inputs GiB | vs Liger time | vs Liger mem |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
def key(r):
    order = ["liger", "torch", "torch-tf32", "dense", "fused", "ring", "chunk", "blocked"]
    v = r.get("variant", "")
    return (r.get("dtype", ""), r.get("math", "-"), num(r, "tokens"),
            order.index(v) if v in order else 99, num(r, "strip_budget_bytes"))
for r in sorted(vocab, key=key):
    lig = [x for x in vocab if x.get("variant") == "liger" and x.get("dtype") == r.get("dtype")
           and num(x, "tokens") == num(r, "tokens")]
    lt = lm = "-"
    if lig and r.get("variant") != "liger":
        lt = "%.3fx" % (num(r, "time_ms") / num(lig[0], "time_ms"))
        lm = "%.3fx" % (above(r) / above(lig[0]))
    b = num(r, "strip_budget_bytes")
    print("| %s | %s | %d | %s | %s | %s | %.1f | %.2f | %.2f | %s | %s |" % (
        r.get("dtype"), r.get("math", "-"), num(r, "tokens"), r.get("variant"),
        r.get("kernel", "-"), "-" if b != b else "%.3g" % (b / GIB), num(r, "time_ms"),
        num(r, "dev_peak_bytes") / GIB, above(r), lt, lm))
if not any(r.get("variant") == "liger" for r in vocab):
    print("\n(no Liger rows: liger_kernel was not importable and no wheel in .whl/)")
print("\nTarget: the one-rank head (fused, ring at P = 1) <= Liger's time at <= its memory "
      "above the inputs, bf16 at N 16K and 32K (both ratios <= 1.000x).  Above inputs = peak - X - W; "
      "our peak is the tracked allocator's (no cuBLAS workspace), Liger's torch.cuda.max_memory_allocated "
      "(its 32 MiB cuBLAS workspace included): subtract 0.031 GiB from Liger's for like with like.\n")

calib = [r for r in rows if r.get("bench") == "calib" and r.get("status") == "ok"]
if calib:
    print("## Host ceilings (calib)\n")
    print("| test | bytes | GB/s | note |\n|---|---|---|---|")
    for r in calib:
        print("| %s | %s | %.1f | %s |" % (r.get("variant"), r.get("bytes"),
                                            num(r, "algbw_gbs"), r.get("note", "")[:60]))
    print()

adam = [r for r in rows if r.get("bench") in ("adam", "torch_adamw")]
if adam:
    print("## Optimizer step, %s params, one rank\n" % (adam[0].get("params")))
    print("| variant | bucket | slots | share | time ms | Gparam/s | % link floor | joint floor ms | % joint floor | cpu share | status |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    torch_rate = float("nan")
    for r in adam:
        if r.get("bench") == "torch_adamw":
            torch_rate = num(r, "gparam_s")
    best_h = float("nan")
    for r in adam:
        if r.get("variant") == "hybrid" and r.get("status") == "ok":
            best_h = max(num(r, "gparam_s"), best_h) if best_h == best_h else num(r, "gparam_s")
        print("| %s | %s | %s | %s | %.1f | %.3f | %s | %s | %s | %s | %s |" % (
            r.get("variant"), r.get("bucket", "-"), r.get("slots", "-"), r.get("share", "-"),
            num(r, "time_ms"), num(r, "gparam_s"), r.get("pct_floor", "-"),
            r.get("joint_floor_ms", "-"), r.get("pct_joint_floor", "-"),
            r.get("cpu_share", "-"), r.get("status")))
    print("\nTargets: hybrid >= 1.0x torch fused CPU AdamW (Gparam/s): %.3f / %.3f = %.2fx; "
          "stream >= 90%% of its link floor (pct_floor); the SIMD update (cpu row's update_ms) "
          "<= torch's step." % (best_h, torch_rate, best_h / torch_rate if torch_rate == torch_rate else float("nan")))
    for r in adam:
        if r.get("variant") == "cpu":
            print("cpu: update_ms %s (the SIMD update alone) vs torch %s ms" % (
                r.get("update_ms"), [x.get("time_ms") for x in adam if x.get("bench") == "torch_adamw"]))
EOF
stamp "done: $OUT"
