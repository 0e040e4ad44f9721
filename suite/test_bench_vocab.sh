#!/usr/bin/env bash
# test_bench_vocab.sh — `plateau bench vocab` end to end on the CPU backend,
# 2 ranks: every variant × dtype row is status ok / check pass; the "logits"
# tag of the fused and ring rows stays within one N×Vb strip (×1.5 in bf16 for
# the residual) while dense holds 3·N·V·4 bytes; ring reports its mode, hop
# bytes and floor; a --mem-limit that the dense baseline cannot fit gives an
# oom row (a result, exit 0) while Ring-DTP still runs; bad option values exit 2.
# Usage: BUILD=build bash suite/test_bench_vocab.sh   (run from anywhere)
set -uo pipefail
PL_TEST=test_bench_vocab.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
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
      if ((v == "fused" || v == "ring" || v == "chunk") && lg > strip + 0.5) { print v " " dt " logits " lg " > strip " strip; bad++ }
      if (v == "dense" && (lg < 3 * N * V * 4 - 0.5 || lg > 3 * N * V * 4 + 0.5)) { print "dense logits " lg " != 3NV4"; bad++ }
      if (v == "ring" && ($c["mode"] != "act" || $c["hop_bytes"] <= 0 || $c["bound_bytes"] <= 0)) { print "ring mode/hop/floor: " $0; bad++ }
    }
    END {
      if (rows != 10) { print "rows " rows " (want 10)"; bad++ }
      n = split("dense fused chunk vp ring", vs, " ")
      for (i = 1; i <= n; i++) for (d = 0; d < 2; d++) if (!seen[vs[i] "/" (d ? "bf16" : "f32")]) { print "missing " vs[i]; bad++ }
      exit bad ? 1 : 0
    }' "$f" || fail "rows of $f"
fi

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
