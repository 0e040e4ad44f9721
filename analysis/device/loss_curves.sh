#!/usr/bin/env bash
# analysis/device/loss_curves.sh — training quality on ONE H200: plateau (the
# composed step), our FSDP2 baseline and PyTorch FSDP2 train the same real
# model (analysis/peers/curve_points.tsv: the dense 2.0 B model at 8K, bf16,
# no proxy) from the same fp32 weights on the same synthetic token stream
# with the same AdamW (peak lr 1e-3, wd 0.01, clipping 1.0) and the same
# schedule (by default a linear warm-up over 20 steps, then a cosine down to
# 1e-4 at the last step) for 200 steps each; the three loss curves side by
# side.  It builds nothing: build
# first (analysis/device/run.sh's build, or `make` with the machine's flags),
# then from the repository root:
#
#   bash analysis/device/loss_curves.sh [OUT_DIR]   (default results/runs/loss-curves-<UTC>)
#
# Writes into OUT_DIR: the train.*.tsv of both our systems and the
# torch_fsdp2.*.tsv of the peer (each row's `losses` column: the 200 steps),
# loss-curves.csv (analysis/loss_curves.sh: a column per system, a line per
# step) and loss-curves-table.md (the comparison).  The chart needs gnuplot
# (not on the GPU machine): `gnuplot -c analysis/loss_curves.gp
# OUT_DIR/loss-curves.csv OUT_DIR/loss-curves.svg` where it is installed.
#
# Expected time on the H200 (the plan predicts 0.32 s a step for each of our
# systems; PyTorch measured 0.30 s on this point), about 5 minutes in all:
#   1. plateau then fsdp2, 200 steps each (plateau's optimizer state resident
#      in HBM, --optim-resident all: exact, and no host link per step)  ~150 s
#   2. PyTorch FSDP2, --init plateau --data synthetic, 200 steps        ~90 s
#   3. the table                                                          ~1 s
# Each part has its own timeout; a part that fails leaves the others running.
# POINTS (default analysis/peers/curve_points.tsv) and SEED (default 1) pick
# another point file or seed for all three systems; LR the learning rate's
# options, the same for all three (default "--lr 1e-3 --lr-warmup 20
# --lr-decay cosine --lr-min 1e-4"; "--lr 1e-3": constant, no warm-up).
#
# What to expect: the three start from the same loss (the same weights and
# tokens; bf16 rounding differs by implementation) and follow one curve; bf16
# makes each system's steps differ in their last bits from the others', and
# training amplifies such differences step by step, so the curves agree
# within a band, not to the bit.  plateau against fsdp2 (one engine, two
# schedules) is the band bf16 alone gives; PyTorch against them is compared
# to that band in the table.
set -uo pipefail
PL_SCRIPT=loss_curves
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pl_dev_begin "${1:-results/runs/loss-curves-$(date -u +%Y%m%dT%H%M%SZ)}"
POINTS=${POINTS:-analysis/peers/curve_points.tsv}
SEED=${SEED:-1}
LR=${LR:---lr 1e-3 --lr-warmup 20 --lr-decay cosine --lr-min 1e-4}
read -r -a lr <<<"$LR"
export PL_LR="$LR"

stamp "1. plateau and fsdp2: $POINTS (its steps), seed $SEED, $LR"
# the raw rows (each with 200 losses) stay in the file; the table below has them
bench 270 train --points "$POINTS" --system plateau,fsdp2 --optim-resident all --seed "$SEED" "${lr[@]}" |
  grep -v '^\[train\] step' | grep -v '^ *train ' | grep -v '^#  *bench '

stamp "2. PyTorch FSDP2 on the same weights and tokens"
peer 180 torch_fsdp2.py --out "$OUT" --points "$POINTS" --init plateau --data synthetic --seed "$SEED" "${lr[@]}"

stamp "3. the table"
bash analysis/loss_curves.sh "$OUT" "$OUT/loss-curves.csv"
PL_GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
export PL_GPU_NAME
pl_table '*.tsv' <<'EOF' | tee "$OUT/loss-curves-table.md"

curves = {}
for r in rows:
    if r.get("status") != "ok" or r.get("losses", "-") in ("-", ""):
        continue
    name = r.get("system") or r.get("bench")
    curves[name] = [float(x) for x in r["losses"].split(",")]
print("# loss_curves.sh: %s\n" % out)
import os
print("## The same model, weights, tokens and AdamW: dense 2.0 B at 8K, bf16, one %s\n"
      % (os.environ.get("PL_GPU_NAME") or "GPU"))
print("AdamW's learning rate, the same for all three: `%s`.\n" % os.environ.get("PL_LR", "-"))
print("| system | steps | step 1 | step 2 | step 10 | mean 1-20 | mean 91-110 | mean 181-200 | last |")
print("|---|---|---|---|---|---|---|---|---|")
mean = lambda c, a, b: sum(c[a - 1:b]) / len(c[a - 1:b]) if len(c) >= b else float("nan")
at = lambda c, i: c[i - 1] if len(c) >= i else float("nan")
for name, c in curves.items():
    print("| %s | %d | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f |" % (
        name, len(c), at(c, 1), at(c, 2), at(c, 10), mean(c, 1, 20), mean(c, 91, 110), mean(c, 181, 200),
        c[-1]))
print()
print("| pair (Δ: the absolute difference) | steps | Δ step 1 | max Δ | mean Δ | mean Δ of 20-step means |")
print("|---|---|---|---|---|---|")
names = list(curves)
for i in range(len(names)):
    for j in range(i + 1, len(names)):
        a, b = curves[names[i]], curves[names[j]]
        n = min(len(a), len(b))
        if n == 0:
            continue
        d = [abs(a[k] - b[k]) for k in range(n)]
        w = [abs(sum(a[k:k + 20]) - sum(b[k:k + 20])) / 20 for k in range(0, n - 19, 20)]
        print("| %s - %s | %d | %.4f | %.4f | %.4f | %s |" % (
            names[i], names[j], n, d[0], max(d), sum(d) / n, "%.4f" % (sum(w) / len(w)) if w else "-"))
print()
print("plateau - fsdp2 is the band bf16 alone gives (one engine, two schedules); a PyTorch row whose "
      "distances are of that size trains the same model the same way.")
EOF
stamp "done: $OUT (chart: gnuplot -c analysis/loss_curves.gp $OUT/loss-curves.csv $OUT/loss-curves.svg)"
