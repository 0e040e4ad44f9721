#!/usr/bin/env bash
# analysis/device/ringattn.sh — the FSDP2 baseline's ring attention on ONE
# H200 (nvidia-h200: 16 host cores) after its full-mask blocks moved to the
# wgmma kernels (doc/performance/ring-attention.md): the CUDA tests that prove
# the full mask and the ring exact, the causal rate at the ring's block
# length, then the paper grid's FSDP2-best rows at 128K again (f120-128k,
# f241-128k of jobs/sweeps/paper-grid.tsv: the 120B / 241B one-GPU proxies,
# virtual CP 4), set against the rows of 2026-12-03 that measured the
# mma.sync full blocks (results/reference/h200x1/).  It builds what is
# missing or stale first (analysis/device/run.sh's flags), so a machine that
# already built this tree starts at part 1:
#
#   bash analysis/device/ringattn.sh [--budget SECONDS] [--deps DIR] OUT_DIR
#
# from the repository root.  Every result file, log and the table go into
# OUT_DIR, and all of it into OUT_DIR/ringattn.tgz at the end.  Expected time
# (one H200; a build from scratch adds its own minutes):
#   1. test_attention_cuda (every kernel against SIMPLE and the CPU; the full
#      mask on simple, mma, wgmma and AUTO at d = 128 edges; TFLOP/s of each
#      kernel, the full mask's mma and wgmma side by side at 16K)       ~70 s
#   2. test_mpi_ring_attn np 1 (the CPU cases, then CUDA: the ring's 1 full
#      and 2 causal blocks against whole-sequence CUDA attention, d 128 and
#      64, a partial tile, GQA 4; the full blocks' kernels named)        ~20 s
#   3. bench attention, causal fwd+bwd at 16Ki (the ring's block length at
#      128K, CP 4: the rate the planner scales to it)                    ~10 s
#   4. f120-128k: bench train --preset proxy120b --system fsdp2 --seq 128Ki
#      -w 1 -n 2 with the knobs --config auto chose on 2026-12-03 given
#      (--cp 4 --ep 4 --ac none --fsdp2-optim cpu), so that the planner's new
#      attention model cannot move the point (was 125 s of wall time)  ~100 s
#   5. f241-128k: the same with proxy241b, --ac selective (was 157 s)   ~130 s
#   6. the table (ringattn-table.md) and the archive                      ~2 s
# about 5.5 minutes of measurements in all; each part has a timeout, skips
# itself when less than its share of the budget (--budget: the seconds your
# allocation leaves it, default 520; 0 for no limit) is left, and a failing part leaves the others running.
# TESTS=0 skips parts 1-3 (a second run on a node that ran them).
set -uo pipefail
PL_SCRIPT=ringattn
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pl_dev_args 520 "$@"
[ ${#PL_ARGS[@]} -eq 1 ] || { echo "usage: bash analysis/device/ringattn.sh [--budget S] [--deps DIR] OUT_DIR"; exit 2; }
OUT=${PL_ARGS[0]}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/ringattn.log") 2>&1
MK=(make -j"$(nproc)" BLAS=none STATIC_DEPS=1 DEPS_PREFIX="$DEPS_PREFIX" WERROR=0)
tests=(build/tests/engine/model/test_attention_cuda build/tests/baselines/fsdp2/test_mpi_ring_attn)
echo "## ringattn: 0. build (what is missing or stale)"
"${MK[@]}" all >"$OUT/build.log" 2>&1 || { echo "build failed: see $OUT/build.log"; tail -5 "$OUT/build.log"; exit 2; }
"${MK[@]}" "${tests[@]}" >>"$OUT/build.log" 2>&1 ||
  echo "the CUDA test binaries did not build (Check missing? --deps DIR names a prefix with it): parts 1-2 skipped"
pl_dev_begin "$OUT"
REF=${REF:-results/reference/h200x1}
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
  echo "# ringattn.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  "$BIN" info 2>&1
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
} >"$OUT/ringattn-meta.txt"

if [ "${TESTS:-1}" = 1 ]; then
  if part "1. test_attention_cuda" 90 && [ -x "${tests[0]}" ]; then
    CK_FORK=no timeout 240 "${tests[0]}" >"$OUT/test_attention_cuda.txt" 2>&1
    echo "== test_attention_cuda: rc $?; $(grep -c 'full' "$OUT/test_attention_cuda.txt") full-mask lines"
    grep -E "full mask|/full|KERNEL|wgmma/full|# tflops|Checks" "$OUT/test_attention_cuda.txt" | tail -50
  fi
  if part "2. test_mpi_ring_attn np 1 (CPU, then CUDA)" 40 && [ -x "${tests[1]}" ]; then
    CK_FORK=no timeout 180 $MPIRUN -np 1 "${tests[1]}" >"$OUT/test_mpi_ring_attn.txt" 2>&1
    echo "== test_mpi_ring_attn: rc $?"
    tail -6 "$OUT/test_mpi_ring_attn.txt"
  fi
  part "3. causal fwd+bwd at 16Ki (the ring's block length)" 30 &&
    bench 60 attention --heads 64 --kv-heads 8 --head-dim 128 --seq 16Ki --pass both -w 1 -n 3 --point ring-block
fi

# the paper grid's FSDP2 points, as jobs/sweeps/paper-grid.tsv gives them
if part "4. f120-128k (proxy120b, fsdp2, 128Ki)" 150; then
  bench 240 train --preset proxy120b --system fsdp2 --seq 128Ki -w 1 -n 2 --point f120-128k \
    --cp 4 --ep 4 --ac none --fsdp2-optim cpu
fi
if part "5. f241-128k (proxy241b, fsdp2, 128Ki)" 180; then
  bench 280 train --preset proxy241b --system fsdp2 --seq 128Ki -w 1 -n 2 --point f241-128k \
    --cp 4 --ep 4 --ac selective --fsdp2-optim cpu
fi

stamp "6. the table"
python3 - "$OUT" "$REF" <<'EOF' | tee "$OUT/ringattn-table.md"
import glob, os, sys
out, ref = sys.argv[1], sys.argv[2]

def rows(paths):
    got = []
    for path in sorted(paths):
        hdr, meta = None, {}
        for line in open(path):
            if line.startswith("#"):
                k, _, v = line[2:].partition(":")
                meta[k.strip()] = v.strip()
                continue
            if not line.strip():
                continue
            cells = line.rstrip("\n").split("\t")
            if hdr is None:
                hdr = cells
            elif len(cells) == len(hdr):
                r = dict(zip(hdr, cells))
                r["_point"], r["_file"] = meta.get("point", "-"), os.path.basename(path)
                got.append(r)
    return got

def num(r, k):
    try:
        return float(r.get(k, "nan"))
    except (TypeError, ValueError):
        return float("nan")

new = {r["_point"]: r for r in rows(glob.glob(os.path.join(out, "train.*.tsv")))}
old = {r["_point"]: r for r in rows(glob.glob(os.path.join(ref, "train.*.tsv")))
       if r["_point"] in ("f120-128k", "f241-128k")}
print("# ringattn.sh: %s (before: %s)\n" % (out, ref))
print("## FSDP2-best at 128K, virtual CP 4: the full blocks on mma.sync (before) and on wgmma (now)\n")
print("| point | run | file | status | step s | TFLOP/s | attention s | moe s | optimizer s | zero3 s "
      "| predicted s | pred/measured | peak GiB | pred peak GiB | losses |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for p in ("f120-128k", "f241-128k"):
    for tag, r in (("before", old.get(p)), ("now", new.get(p))):
        if r is None:
            print("| %s | %s | - | not run | | | | | | | | | | | |" % (p, tag))
            continue
        s = lambda k: num(r, k) / 1e3
        print("| %s | %s | `%s` | %s | %.3f | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %s |" % (
            p, tag, r["_file"], r.get("status"), s("time_ms"), num(r, "tflops"), s("attention_ms"), s("moe_ms"),
            s("optimizer_ms"), s("zero3_ms"), s("pred_time_ms"), num(r, "pred_time_ms") / num(r, "time_ms"),
            num(r, "dev_peak_bytes") / 2**30, num(r, "pred_dev_peak_bytes") / 2**30, r.get("losses")))
print()
for p in ("f120-128k", "f241-128k"):
    a, b = old.get(p), new.get(p)
    if a is None or b is None or b.get("status") != "ok":
        continue
    print("- %s: attention %.3f -> %.3f s (%.2fx), step %.3f -> %.3f s, %.1f -> %.1f TFLOP/s; the plan "
          "predicts %.3f s (%+.0f%%); losses before %s, now %s (the same data and seed: equal up to bf16 "
          "rounding of the kernels' summation order)" % (
              p, num(a, "attention_ms") / 1e3, num(b, "attention_ms") / 1e3,
              num(a, "attention_ms") / num(b, "attention_ms"), num(a, "time_ms") / 1e3, num(b, "time_ms") / 1e3,
              num(a, "tflops"), num(b, "tflops"), num(b, "pred_time_ms") / 1e3,
              100 * (num(b, "pred_time_ms") / num(b, "time_ms") - 1), a.get("losses"), b.get("losses")))
blk = rows(glob.glob(os.path.join(out, "attention.*.tsv")))
for r in blk:
    print("- causal attention at S = %s, %s: %.2f ms, %.1f TFLOP/s (%s)" % (
        r.get("seq"), r.get("pass"), num(r, "ms") if "ms" in r else num(r, "time_ms"), num(r, "tflops"),
        r.get("kernel", r.get("note", "-"))))
EOF
stamp "7. the archive"
(cd "$OUT" && tar czf ringattn.tgz --exclude=ringattn.tgz -- *) && ls -la "$OUT/ringattn.tgz"
stamp "done: $OUT"
