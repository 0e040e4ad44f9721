#!/usr/bin/env bash
# test_loss_curves.sh — training quality, CPU f32: plateau (the composed
# step) and the FSDP2 baseline train the same small real model (W_v = W: no
# proxy; one dense and two MoE layers, V 512, S 64) from the same weights on
# the same synthetic stream with the same AdamW for 200 steps
# (`plateau bench train --points`, the mechanism the GPU comparison with
# PyTorch uses: analysis/device/loss_curves.sh), and their loss curves are
# equal — every step within 1e-5 relative (the losses column's 6 digits) —
# while the model learns (the last 20 steps' mean at least 1.5 nats below
# the first loss).  The comparison can fail: the baseline on another seed
# (other weights and data) is caught.  analysis/loss_curves.sh writes the
# table and, where gnuplot is installed, analysis/loss_curves.gp charts it;
# `plateau report` writes the same table (report/train-losses.csv), a line
# in train.md and the chart, and says under a proxy row's losses that they
# are the tiled proxy model's.
# About 20 s on one core.
set -euo pipefail
BUILD=${BUILD:-build}
BIN=$BUILD/bin/plateau
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

{
  printf 'point\tmodel\thidden\tlayers\tn_q\tn_kv\thead_dim\tvocab\texperts\ttopk\texpert_width\tshared_width\tdense_width\tdense_layers\trope_theta\tseq\tcp\tep\tac\toptim\tmicro\twarmup\tsteps\n'
  printf 'tiny-curve\ttinycurve\t64\t3\t4\t2\t16\t512\t8\t2\t32\t32\t48\t1\t10000\t64\t1\t1\tfull\tgpu\t1\t0\t200\n'
} >"$tmp/points.tsv"

"$BIN" bench train --backend cpu --points "$tmp/points.tsv" --system plateau,fsdp2 \
  --dtype f32 -o "$tmp/run" >"$tmp/log" 2>&1 || { tail -20 "$tmp/log"; echo "FAIL: bench"; exit 1; }
awk -F'\t' '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
  { print $c["system"], $c["status"], $c["check"], $c["virtual_world"], $c["ranks"] }' \
  "$tmp"/run/train.*.tsv >"$tmp/rows"
[ "$(cat "$tmp/rows")" = $'plateau ok pass 1 1\nfsdp2 ok pass 1 1' ] &&
  ok "two real (not proxy) rows, ok, reference check pass" || bad "rows: $(cat "$tmp/rows")"

bash analysis/loss_curves.sh "$tmp/run" "$tmp/curves.csv" >"$tmp/summary"
cat "$tmp/summary"
[ "$(head -1 "$tmp/curves.csv")" = "step,plateau,fsdp2" ] && [ "$(wc -l <"$tmp/curves.csv")" -eq 201 ] &&
  ok "table: step,plateau,fsdp2 and 200 steps" || bad "table: $(head -1 "$tmp/curves.csv"), $(wc -l <"$tmp/curves.csv") lines"

# the curves' distance per step, and learning
check() { # CSV, relative tolerance -> "equal" or "differ at step S: A vs B"
  awk -F, -v tol="$2" 'NR > 1 {
      d = $2 - $3; if (d < 0) d = -d; a = $2 < 0 ? -$2 : $2
      if (d > tol * a && !bad) { bad = 1; print "differ at step " $1 ": " $2 " vs " $3 } }
    END { if (!bad) print "equal" }' "$1"
}
r=$(check "$tmp/curves.csv" 1e-5)
[ "$r" = equal ] && ok "plateau and fsdp2 equal over 200 steps" || bad "curves: $r"
awk -F, 'NR == 2 { first = $2 } NR > 181 { s += $2; n++ }
  END { exit !(n == 20 && s / n < first - 1.5) }' "$tmp/curves.csv" &&
  ok "the model learns (last 20 steps' mean < first loss - 1.5)" || bad "no learning"

# a schedule (--lr-warmup, --lr-decay): both systems' AdamW follow it step
# by step (equal curves), and it is applied (step 2 differs from the
# constant lr's, whose step 1 it shares: the first update is the first
# difference)
"$BIN" bench train --backend cpu --points "$tmp/points.tsv" --system plateau,fsdp2 --dtype f32 -n 40 \
  --lr-warmup 10 --lr-decay cosine --lr-min 1e-4 -o "$tmp/sched" >"$tmp/log3" 2>&1 ||
  { tail -5 "$tmp/log3"; bad "schedule bench"; }
bash analysis/loss_curves.sh "$tmp/sched" "$tmp/sched.csv" >/dev/null
r=$(check "$tmp/sched.csv" 1e-5)
[ "$r" = equal ] && [ "$(wc -l <"$tmp/sched.csv")" -eq 41 ] &&
  ok "warm-up + cosine: plateau and fsdp2 equal over 40 steps" || bad "schedule curves: $r"
awk -F, 'NR == FNR { if (FNR <= 3) c[FNR] = $2; next }
  FNR == 2 && $2 != c[2] { bad = 1 } FNR == 3 && $2 == c[3] { bad = 1 }
  END { exit bad }' "$tmp/curves.csv" "$tmp/sched.csv" &&
  ok "the schedule is applied: step 1 as the constant lr's, step 2 not" ||
  bad "schedule vs constant: $(sed -n 2,3p "$tmp/sched.csv" | tr '\n' ' ')"

# the comparison can fail: fsdp2 on seed 2 (other weights and data)
"$BIN" bench train --backend cpu --points "$tmp/points.tsv" --system fsdp2 --dtype f32 -n 20 \
  --seed 2 -o "$tmp/other" >"$tmp/log2" 2>&1 || { tail -5 "$tmp/log2"; bad "seed-2 bench"; }
mkdir -p "$tmp/mixed"
awk -F'\t' '/^#/ { print; next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; print; next }
  $c["system"] == "plateau"' "$tmp"/run/train.*.tsv >"$tmp/mixed/train.a.tsv"
cp "$tmp"/other/train.*.tsv "$tmp/mixed/train.b.tsv"
bash analysis/loss_curves.sh "$tmp/mixed" "$tmp/mixed.csv" >/dev/null
r=$(check "$tmp/mixed.csv" 1e-5)
case "$r" in differ*) ok "another seed's curve is caught ($r)" ;; *) bad "seed 2 not caught: $r" ;; esac

if command -v gnuplot >/dev/null; then
  gnuplot -c analysis/loss_curves.gp "$tmp/curves.csv" "$tmp/curves.png" 2>/dev/null &&
    [ -s "$tmp/curves.png" ] && ok "chart drawn" || bad "chart"
fi
# the report's hook: the same table beside train.md, and the chart
"$BIN" report "$tmp/run" >"$tmp/report.log" 2>&1 || { tail -5 "$tmp/report.log"; bad "report"; }
cmp -s "$tmp/run/report/train-losses.csv" "$tmp/curves.csv" &&
  grep -q '^Loss curves (`train-losses.svg`.*2 curves of 200 steps at most (plateau, fsdp2)' "$tmp/run/report/train.md" &&
  ok "report: train-losses.csv as loss_curves.sh writes it, its line in train.md" ||
  bad "report: $(head -2 "$tmp/run/report/train-losses.csv" 2>&1)"
if command -v gnuplot >/dev/null; then
  [ -s "$tmp/run/report/train-losses.svg" ] && [ -s "$tmp/run/report/train-losses.png" ] &&
    ok "report: train-losses.svg and .png" || bad "report: no train-losses chart"
fi
# a PyTorch peer's row of the same shape joins the chart (its columns as
# torch_fsdp2.py writes them; the losses here are fsdp2's, copied)
awk -F'\t' -v out="$tmp/run/torch_fsdp2.test.tsv" '
  /^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
  $c["system"] == "fsdp2" {
    print "# plateau-results: 1\n# bench: torch_fsdp2" > out
    print "bench\tvariant\tranks\tdtype\tseq\ttokens\thidden\tlayers\tvocab\texperts\ttopk\ttime_ms\tdev_peak_bytes\tlosses\tstatus\tnote" > out
    print "torch_fsdp2\t" $c["variant"] "\t1\tf32\t" $c["seq"] "\t" $c["tokens"] "\t" $c["hidden"] "\t" $c["layers"] "\t" \
      $c["vocab"] "\t" $c["experts"] "\t" $c["topk"] "\t1\t1\t" $c["losses"] "\tok\tpoint tiny-curve" > out
    print "# end: ok" > out }' "$tmp"/run/train.*.tsv
rm -rf "$tmp/run/report"
"$BIN" report "$tmp/run" >"$tmp/report.log" 2>&1 || { tail -5 "$tmp/report.log"; bad "report with a peer"; }
[ "$(head -1 "$tmp/run/report/train-losses.csv")" = "step,plateau,fsdp2,torch_fsdp2" ] &&
  ok "report: the peer's curve of the same shape joins" ||
  bad "report with a peer: $(head -1 "$tmp/run/report/train-losses.csv" 2>&1)"
# more peer curves than rows of ours (three peer files, two rows): every one
# is a column, labelled by repeat
for k in 2 3; do cp "$tmp/run/torch_fsdp2.test.tsv" "$tmp/run/torch_fsdp2.test$k.tsv"; done
rm -rf "$tmp/run/report"
"$BIN" report "$tmp/run" >"$tmp/report.log" 2>&1 || { tail -5 "$tmp/report.log"; bad "report with three peers"; }
[ "$(head -1 "$tmp/run/report/train-losses.csv")" = "step,plateau,fsdp2,torch_fsdp2,torch_fsdp2#2,torch_fsdp2#3" ] &&
  ok "report: three peer curves beside two of ours" ||
  bad "report with three peers: $(head -1 "$tmp/run/report/train-losses.csv" 2>&1)"
rm -f "$tmp/run/torch_fsdp2.test2.tsv" "$tmp/run/torch_fsdp2.test3.tsv"
rm -rf "$tmp/run/report"
"$BIN" report "$tmp/run" >"$tmp/report.log" 2>&1 || bad "report again with one peer"
# a proxy's losses carry the note, a real run's do not
! grep -q 'is a one-GPU proxy: its loss' "$tmp/run/report/train.md" && ok "real run: no proxy note" ||
  bad "real run: proxy note"
"$BIN" bench train --backend cpu --preset cpu --seq 64 --system plateau,fsdp2 --virtual-world 4 --ep 4 \
  -w 0 -n 2 -o "$tmp/proxy" >"$tmp/log3" 2>&1 || { tail -5 "$tmp/log3"; bad "proxy bench"; }
PLATEAU_GNUPLOT=/nonexistent "$BIN" report "$tmp/proxy" >/dev/null 2>&1
grep -q 'is a one-GPU proxy: its loss is the tiled proxy model' "$tmp/proxy/report/train.md" &&
  ok "proxy rows: the note on their losses" || bad "proxy rows: no note"
rc=0
bash analysis/loss_curves.sh "$tmp/none" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'not a directory' "$tmp/err" && ok "no directory: exit 2" || bad "no directory (rc $rc)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
