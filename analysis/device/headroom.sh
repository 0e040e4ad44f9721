#!/usr/bin/env bash
# analysis/device/headroom.sh — the headroom knobs on ONE H200 (nvidia-h200:
# 16 host cores, ~125 GiB of host memory, 139.8 GiB of HBM): the 120B
# one-GPU proxy (`bench train --preset proxy120b`, one rank of the 16-GPU
# run, 7.66 B parameters) at 32K and 128K with today's defaults (the
# optimizer state all streamed, every layer recomputed, no SCO) and with the
# plan's choice of the knobs it is left (`--config auto` with the chunk cap,
# the bucket and the streamed optimizer pinned to the preset's: the SCO
# budget, the optimizer state resident in HBM and the kept activations, the
# headroom filled) side by side in one run, after the CUDA tests of the knobs
# (bit identity on the GPU).  From the repository root:
#
#   bash analysis/device/headroom.sh [--deps DIR] OUT_DIR
#
# It builds what is missing or stale first (analysis/device/run.sh's flags:
# BLAS=none STATIC_DEPS=1 WERROR=0, DEPS_PREFIX from --deps DIR when Check is
# not installed); the two CUDA test binaries need Check and are skipped,
# with a line saying so, when it cannot build them), then writes every result
# file into OUT_DIR with OUT_DIR/headroom-table.md (the comparison) and
# OUT_DIR/headroom.log (everything printed).
#
# Expected time (one H200; a build from scratch adds its own minutes, none
# when the machine already built this tree):
#   1. CUDA tests: test_adamw_cuda (residency bit-exact), test_mpi_step_cuda
#      np 1 (the step against the CPU, then every knob bit-identical)  ~60 s
#   2. 32K, today's defaults, 1 warm-up + 3 steps (pinning 85.6 GiB)   ~70 s
#   3. 32K, the plan's knobs, 1 + 3 steps                               ~45 s
#   4. 128K, today's defaults, 1 warm-up + 2 steps                     ~130 s
#   5. 128K, the plan's knobs, 1 warm-up + 2 steps                     ~110 s
#   6. the table                                                         ~1 s
# about 7 minutes in all.  Each part has its own timeout; a part that fails
# leaves the others running.  What the plan predicts (`plateau plan --gpus 1
# --virtual 16 --gpus-per-node 1 --host-mem 125Gi --set host_reserve=8Gi
# --seq 32Ki|128Ki --D 1 --P 1 --c 8Ki --beta 100M --optim stream`, the
# H200 defaults; --sco 0 --optim-resident 0 --keep 0 for today's): 32K 5.03
# -> 3.34 s per step (1.51x: every boundary offloaded, every layer's
# attention output and LSE kept, 62 of 77 optimizer buckets resident; 3.45 s
# without SCO), 128K 29.0 -> 24.7 s (1.17x: SCO, attention kept, 26 buckets
# resident; 24.9 s without SCO).  The targets: 32K >= 1.35x today's tok/s
# (269 -> >= 365 TFLOP/s), 128K >= 1.15x (346 -> >= 400).  By default the
# knobbed runs keep the preset's layout and fill the headroom alone
# (--optim-resident auto --keep auto); PLAN=1 lets the plan choose the SCO
# budget as well.  SEQS="32Ki" or "128Ki" runs one context, N128 sets the
# timed steps at 128K, TESTS=0 skips part 1 (a second run on a node
# that ran it).
set -uo pipefail
PL_SCRIPT=headroom
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pl_dev_args 0 "$@"
OUT=${PL_ARGS[0]:?usage: bash analysis/device/headroom.sh [--deps DIR] OUT_DIR}
BIN=${BIN:-build/bin/plateau}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --bind-to none}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
exec > >(tee -a "$OUT/headroom.log") 2>&1
PL_START=$(date +%s)

stamp "0. build (what is missing or stale)"
MK=(make -j"$(nproc)" BLAS=none STATIC_DEPS=1 DEPS_PREFIX="$DEPS_PREFIX" WERROR=0)
"${MK[@]}" all >"$OUT/build.log" 2>&1 || { echo "build failed: see $OUT/build.log"; tail -5 "$OUT/build.log"; exit 2; }
tests=(build/tests/engine/ops/test_adamw_cuda build/tests/engine/train/test_mpi_step_cuda)
"${MK[@]}" "${tests[@]}" >>"$OUT/build.log" 2>&1 ||
  echo "the CUDA test binaries did not build (Check missing? --deps DIR names a prefix with it): part 1 skipped"

stamp "1. CUDA tests of the knobs"
[ "${TESTS:-1}" = 1 ] && [ -x build/tests/engine/ops/test_adamw_cuda ] &&
  echo "== test_adamw_cuda: $(CK_FORK=no timeout 120 build/tests/engine/ops/test_adamw_cuda 2>&1 | tail -3 | tr '\n' ' ')"
[ "${TESTS:-1}" = 1 ] && [ -x build/tests/engine/train/test_mpi_step_cuda ] &&
  CK_FORK=no timeout 240 $MPIRUN -np 1 build/tests/engine/train/test_mpi_step_cuda 2>&1 |
  grep -v '^#   ' | tail -25

# FILL: extra options of the plan's runs, e.g. FILL="--mem-limit 128Gi" to fill
# below 128 GiB exactly (the fill then keeps no reserve of its own)
FILL=${FILL:-}
# The preset's layout (D = P = 1, fused head, SCO 0, --config explicit) with
# the headroom filled by the plan (--optim-resident auto --keep auto): the
# two knobs alone against today's step.  PLAN=1 instead lets the plan choose
# the SCO budget too (--config auto, D = P = 1 and c, β, the optimizer
# pinned to the preset's).
if [ "${PLAN:-0}" = 1 ]; then
  KNOBS=(--config auto -D 1 -P 1 --chunk-cap 8Ki --bucket 100M --optim stream)
else
  KNOBS=(--config explicit --optim-resident auto --keep auto)
fi
# SEQS: the contexts (default both); N128: timed steps at 128K (default 2)
SEQS=${SEQS:-"32Ki 128Ki"}
train() { # TIMEOUT SEQ WARMUP ITERS [OPTIONS...]
  timeout "$1" "$BIN" bench train --backend cuda --preset proxy120b --seq "$2" -w "$3" -n "$4" \
    "${@:5}" -o "$OUT" 2>&1 | grep -v '^# [a-z_.]*:' | grep -v '^\[train\] point'
}
n=2
for S in $SEQS; do
  case $S in 32Ki) w=1 it=3 to=200 ;; *) w=1 it=${N128:-2} to=260 ;; esac
  stamp "$n. $S, today's defaults (--config explicit)"
  train $to "$S" $w $it --config explicit
  stamp "$((n + 1)). $S, the plan's knobs (${KNOBS[*]})"
  train $to "$S" $w $it "${KNOBS[@]}" $FILL
  n=$((n + 2))
done
stamp "6. the table"
pl_table 'train.*.tsv' <<'EOF' | tee "$OUT/headroom-table.md"

GIB = 2.0 ** 30
def knobbed(r):  # a row of the plan's knobs (--config auto, or the fill)
    return r.get("kind") == "auto" or r.get("optim_resident", "0") != "0" or r.get("keep", "0") != "0"
print("# headroom.sh: %s\n" % out)
print("## The 120B one-GPU proxy: today's defaults against the plan's headroom fill\n")
print("| seq | knobs | sco | status | step s | tok/s/GPU | TFLOP/s | attention s | of it recompute s | moe s | head s "
      "| optimizer s | other s | peak GiB | pool GiB | host GiB | resident params | kept attn / whole | kept GiB "
      "| predicted s | pred peak GiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
base = {}
for r in sorted(rows, key=lambda r: (num(r, "seq"), knobbed(r))):
    knobs = "res=%s keep=%s" % (r.get("optim_resident", "-"), r.get("keep", "-"))
    s = lambda k: num(r, k) / 1e3
    print("| %dK | %s | %s/%s | %s | %.3f | %.0f | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f | %s "
          "| %s / %s | %.2f | %.3f | %.2f |" % (
              num(r, "seq") / 1024, knobs, r.get("budget", "-"), r.get("selected", "-"), r.get("status"), s("time_ms"), num(r, "tok_s_gpu"), num(r, "tflops"),
              s("attention_ms"), s("recompute_ms"), s("moe_ms"), s("head_ms"), s("optimizer_ms"), s("other_ms"),
              num(r, "dev_peak_bytes") / GIB, num(r, "pool_peak_bytes") / GIB, num(r, "host_peak_bytes") / GIB,
              r.get("resident_params", "-"), r.get("kept_attn", "-"), r.get("kept_full", "-"),
              num(r, "kept_bytes") / GIB, num(r, "pred_time_ms") / 1e3, num(r, "pred_dev_peak_bytes") / GIB))
    if not knobbed(r) and r.get("status") == "ok":
        base[num(r, "seq")] = r
print()
targets = {32768: (1.35, 365), 131072: (1.15, 400)}
for r in rows:
    sq = num(r, "seq")
    if not knobbed(r) or sq not in base or r.get("status") != "ok":
        continue
    b = base[sq]
    ratio = num(r, "tok_s_gpu") / num(b, "tok_s_gpu")
    want, tf = targets.get(sq, (float("nan"), float("nan")))
    print("- %dK: %.0f -> %.0f tok/s/GPU = %.3fx (target >= %.2fx: %s); %.1f -> %.1f TFLOP/s (target >= %.0f: %s); "
          "predicted %.3fx" % (
              sq / 1024, num(b, "tok_s_gpu"), num(r, "tok_s_gpu"), ratio, want, "met" if ratio >= want else "MISSED",
              num(b, "tflops"), num(r, "tflops"), tf, "met" if num(r, "tflops") >= tf else "MISSED",
              num(b, "pred_time_ms") / num(r, "pred_time_ms")))
    print("  the plan's choice: %s" % r.get("note", "").split("; plan:")[0])
    print("  peak %.2f GiB (predicted %.2f), pool %.2f GiB; losses today %s, filled %s (the same data: equal "
          "up to the bf16 step's run-to-run rounding)" % (
              num(r, "dev_peak_bytes") / GIB, num(r, "pred_dev_peak_bytes") / GIB, num(r, "pool_peak_bytes") / GIB,
              b.get("losses"), r.get("losses")))
EOF
stamp "done: $OUT"
