#!/usr/bin/env bash
# test_bench_vocab.sh — `plateau bench vocab` end to end on the CPU backend,
# 2 ranks: every variant × dtype row is status ok / check pass; the "logits"
# tag of the fused, blocked, chunk and ring rows stays within one N×Vb strip
# (×1.5 in bf16 for the residual) while dense holds 3·N·V·4 bytes; ring
# reports its mode, hop bytes and floor; one rank: ring runs the three-GEMM
# schedule (kernel chunked), a strip-budget list gives one blocked ring row
# per budget with kept strips growing and the floor growing with them, and
# --tf32 is recorded (math tf32) and passes its check; a --mem-limit that the
# dense baseline cannot fit gives an oom row (a result, exit 0) while Ring-DTP
# still runs; bad option values exit 2.
# Usage: BUILD=build bash suite/bench/vocab/test_bench_vocab.sh   (run from anywhere)
set -uo pipefail
PL_TEST=test_bench_vocab.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"
export OMP_NUM_THREADS=1

N=64 H=32 V=500 B=64
$MPIRUN -x OMP_NUM_THREADS -np 2 "$BIN" bench vocab --backend cpu -N $N -H $H -V $V --blocks $B \
  --dtypes f32,bf16 -w 1 -n 2 -o "$tmp/a" >"$tmp/a.out" 2>&1
rc=$?
[[ $rc -eq 0 ]] || { fail "bench vocab exit $rc"; cat "$tmp/a.out"; }
f=$(ls "$tmp"/a/vocab.*.tsv 2>/dev/null | head -1)
if [[ -z $f ]]; then
  fail "no result file"
else
  # Rows: pick columns by header name.
  awk -F'\t' -v N=$N -v V=$V -v B=$B '
    /^#/ { next }
    !hdr { for (i = 1; i <= NF; i++) c[$i] = i; hdr = 1; next }
    {
      rows++
      v = $c["variant"]; dt = $c["dtype"]; seen[v "/" dt] = 1
      if ($c["status"] != "ok" || $c["check"] != "pass") { print "row not ok/pass: " $0; bad++ }
      lg = $c["logits_bytes"]
      strip = N * B * (dt == "bf16" ? 6 : 4)
      if ((v == "fused" || v == "blocked" || v == "ring" || v == "chunk") && lg > strip + 0.5) { print v " " dt " logits " lg " > strip " strip; bad++ }
      if (v == "dense" && (lg < 3 * N * V * 4 - 0.5 || lg > 3 * N * V * 4 + 0.5)) { print "dense logits " lg " != 3NV4"; bad++ }
      if (v == "ring" && ($c["mode"] != "act" || $c["hop_bytes"] <= 0 || $c["bound_bytes"] <= 0)) { print "ring mode/hop/floor: " $0; bad++ }
    }
    END {
      if (rows != 12) { print "rows " rows " (want 12)"; bad++ }
      n = split("dense fused blocked chunk vp ring", vs, " ")
      for (i = 1; i <= n; i++) for (d = 0; d < 2; d++) if (!seen[vs[i] "/" (d ? "bf16" : "f32")]) { print "missing " vs[i]; bad++ }
      exit bad ? 1 : 0
    }' "$f" || fail "rows of $f"
fi

# One rank: ring is the three-GEMM head; a strip budget list is the budget ->
# time curve of the blocked schedule (kept strips grow, the floor with them);
# --tf32 is recorded and checked.
"$BIN" bench vocab --backend cpu -N $N -H $H -V $V --blocks $B --dtypes f32 \
  --variants ring,fused -w 0 -n 1 -o "$tmp/c" >"$tmp/c.out" 2>&1 || fail "one-rank run exit $?"
f=$(ls "$tmp"/c/vocab.*.tsv 2>/dev/null | head -1)
[[ -n $f ]] && awk -F'\t' '/^#/{next} !h{for(i=1;i<=NF;i++)c[$i]=i;h=1;next}
  $c["kernel"]=="chunked" && $c["status"]=="ok" && $c["check"]=="pass" {k++}
  END{exit k != 2}' "$f" || fail "one rank: ring and fused should run the chunked (three-GEMM) schedule"
"$BIN" bench vocab --backend cpu -N $N -H $H -V $V --blocks $B --dtypes f32,bf16 \
  --variants ring --schedule blocked --strip-budget 0,40K,1M --tf32 -w 0 -n 1 -o "$tmp/b" >"$tmp/b.out" 2>&1 \
  || fail "budget run exit $?"
f=$(ls "$tmp"/b/vocab.*.tsv 2>/dev/null | head -1)
[[ -n $f ]] && awk -F'\t' '/^#/{next} !h{for(i=1;i<=NF;i++)c[$i]=i;h=1;next}
  {
    rows++
    if ($c["status"] != "ok" || $c["check"] != "pass" || $c["kernel"] != "blocked") { print "budget row: " $0; bad++ }
    if ($c["dtype"] == "f32" && $c["math"] != "tf32") { print "f32 row without tf32: " $0; bad++ }
    if ($c["dtype"] == "bf16" && $c["math"] != "-") { print "bf16 row with math: " $0; bad++ }
    b = $c["strip_budget_bytes"]; k = $c["kept_strips"]
    if ((b == 0) != (k == 0)) { print "budget " b " kept " k; bad++ }
    if (b == 1000000 && k != 8) { print "whole budget keeps " k " of 8 strips"; bad++ }
    # the floor counts the kept strips: the excess of the peak over it is
    # that of the budget-0 row (kept strips add exactly their bytes)
    ex = $c["dev_peak_bytes"] - $c["bound_bytes"]; d = $c["dtype"]
    if (!(d in ex0)) ex0[d] = ex
    else if (ex != ex0[d]) { print "excess over floor " ex " vs " ex0[d] ": " $0; bad++ }
  }
  END{ if (rows != 6) { print "rows " rows " (want 6)"; bad++ } exit bad ? 1 : 0 }' "$f" || fail "strip-budget rows of $f"
"$BIN" bench vocab --backend cpu --variants ring --schedule chunked -o "$tmp/x" >/dev/null 2>&1
[[ $? -eq 0 ]] || fail "--schedule chunked on one rank should run"
$MPIRUN -np 2 "$BIN" bench vocab --backend cpu --variants ring --schedule chunked -o "$tmp/x" >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "--schedule chunked on 2 ranks should exit 2"

# N > V/P: auto moves the weights.
$MPIRUN -x OMP_NUM_THREADS -np 2 "$BIN" bench vocab --backend cpu -N 300 -H 16 -V 400 --blocks 50 \
  --variants ring -w 0 -n 1 -o "$tmp/w" >"$tmp/w.out" 2>&1 || fail "weights run exit $?"
grep -qE '^ +vocab +ring .* weights ' "$tmp/w.out" || { fail "auto did not move weights"; cat "$tmp/w.out"; }

# A memory limit dense cannot meet: an oom row, exit 0, ring still ok.
$MPIRUN -x OMP_NUM_THREADS -np 2 "$BIN" bench vocab --backend cpu -N $N -H $H -V $V --blocks $B \
  --variants dense,ring --mem-limit 300K -w 0 -n 1 -o "$tmp/m" >"$tmp/m.out" 2>&1
rc=$?
[[ $rc -eq 0 ]] || { fail "mem-limit run exit $rc"; cat "$tmp/m.out"; }
f=$(ls "$tmp"/m/vocab.*.tsv 2>/dev/null | head -1)
[[ -n $f ]] && awk -F'\t' '/^#/{next} !h{for(i=1;i<=NF;i++)c[$i]=i;h=1;next}
  $c["variant"]=="dense" && $c["status"]=="oom" {o=1}
  $c["variant"]=="ring" && $c["status"]=="ok" && $c["check"]=="pass" {r=1}
  END{exit !(o && r)}' "$f" || fail "want dense oom and ring ok under --mem-limit"

# Bad values are usage errors (exit 2).
"$BIN" bench vocab --backend cpu --dtypes f16 -o "$tmp/x" >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "--dtypes f16 should exit 2"
"$BIN" bench vocab --backend cpu --mode sideways -o "$tmp/x" >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "--mode sideways should exit 2"

if [[ $nfail -eq 0 ]]; then echo "test_bench_vocab.sh: all passed"; exit 0; fi
echo "test_bench_vocab.sh: $nfail failed"
exit 1
