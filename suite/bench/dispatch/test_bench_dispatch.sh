#!/usr/bin/env bash
# test_bench_dispatch.sh — `plateau bench dispatch` end to end on the CPU
# backend under mpirun -np 2 (small preset):
#  - 16 rows (4 profiles x ep, llep, pipelined strided + contiguous), all
#    status ok and check pass (outputs equal ep's; pipelined within the bound);
#  - every pipelined row's dispatch peak <= its bound, and K > 1;
#  - the LLEP plan ran on the skewed profiles (spilled pieces, imbalance after
#    below before);
#  - with --mem-limit between the two peaks, ep and llep rows are `oom` while
#    pipelined_llep rows are ok (the bound, as an OOM boundary);
#  - the `router` profile (routes from model/router.h: x·W_r, softmax top-k,
#    renormalized; idx copied to the host for the planner): every variant's
#    row ok/pass, and the routes identical on a second run (same imbalance);
#  - a shuffled profile (95/16s: LLEP's routes at shuffled positions): rows
#    ok/pass in both chunkings, the same LLEP plan as 95/16; wgrad_passes:
#    LLEP's layout gives contiguous chunks fewer, shuffled about the same;
#  - some pipelined row computes chunks expert-major (em_chunks > 0; gemms
#    column filled);
#  - `plateau bench moegemm` (small) writes ok rows for both layouts, with
#    E/ranks groups expert-major and E groups per segment.
# Usage: BUILD=build bash suite/bench/dispatch/test_bench_dispatch.sh
set -uo pipefail
PL_TEST=test_bench_dispatch.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"

# data rows of a result file; one column by header name
rows() { awk -F'\t' '/^#/ {next} !h {for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next} {print $0}' "$1"; }
getcol() { awk -F'\t' -v want="$2" '/^#/ {next} !h {for (i = 1; i <= NF; i++) if ($i == want) k = i; h = 1; if (!k) {print "NOCOL:" want; exit 1}; next} {print $k}' "$1"; }

$MPIRUN -np 2 "$BIN" bench dispatch -n 2 -w 1 --chunking strided,contiguous \
  -o "$tmp/a" >"$tmp/a.log" 2>&1 || fail "bench dispatch exit $? ($(tail -3 "$tmp/a.log"))"
f=$(ls "$tmp"/a/dispatch.*.tsv 2>/dev/null | head -1)
if [[ -z $f ]]; then
  fail "no result file"
else
  n=$(rows "$f" x | wc -l)
  [[ $n -eq 16 ]] || fail "expected 16 rows, got $n"
  bad=$(paste <(getcol "$f" status) <(getcol "$f" check) | grep -vc $'^ok\tpass$')
  [[ $bad -eq 0 ]] || fail "$bad rows not ok/pass"
  over=$(paste <(getcol "$f" variant) <(getcol "$f" dispatch_bytes) <(getcol "$f" bound_bytes) <(getcol "$f" K) |
    awk -F'\t' '$1 == "pipelined_llep" && ($2 > $3 || $4 < 2) {n++} END {print n + 0}')
  [[ $over -eq 0 ]] || fail "$over pipelined rows above the bound or unchunked"
  plan=$(paste <(getcol "$f" variant) <(getcol "$f" profile) <(getcol "$f" spilled) <(getcol "$f" imb_before) <(getcol "$f" imb_after) |
    awk -F'\t' '$1 == "llep" && $2 != "balanced" && !($3 > 0 && $5 < $4) {n++} END {print n + 0}')
  [[ $plan -eq 0 ]] || fail "$plan skewed llep rows without a plan that lowers the imbalance"
fi

# expert-major chunks: some pipelined row computes chunks expert-major, and its
# GEMM launches per chunk are at most 11 x the local experts + helpers
if [[ -n $f ]]; then
  nem=$(paste <(getcol "$f" variant) <(getcol "$f" em_chunks) | awk -F'\t' '$1 == "pipelined_llep" && $2 > 0' | wc -l)
  [[ $nem -gt 0 ]] || fail "no pipelined row with expert-major chunks"
  ng=$(getcol "$f" gemms | grep -c '^[0-9][0-9]*$')
  [[ $ng -eq 16 ]] || fail "gemms column: $ng of 16 rows numeric"
fi

# the bound as an OOM boundary: a limit between the pipelined and llep peaks
$MPIRUN -np 2 "$BIN" bench dispatch -n 1 -w 0 --mem-limit 450K --profiles balanced,95/16 \
  -o "$tmp/b" >"$tmp/b.log" 2>&1 || fail "bench dispatch --mem-limit exit $?"
f=$(ls "$tmp"/b/dispatch.*.tsv 2>/dev/null | head -1)
if [[ -n $f ]]; then
  res=$(paste <(getcol "$f" variant) <(getcol "$f" status) | sort -u | tr '\t\n' ': ')
  for want in "ep:oom" "llep:oom" "pipelined_llep:ok"; do
    [[ $res == *"$want"* ]] || fail "with --mem-limit 450K expected $want, got: $res"
  done
  [[ $res == *"pipelined_llep:oom"* ]] && fail "pipelined_llep ran out of memory: $res"
else
  fail "no result file with --mem-limit"
fi

# the real router profile
for r in r1 r2; do
  $MPIRUN -np 2 "$BIN" bench dispatch -n 1 -w 0 --profiles router -o "$tmp/$r" >"$tmp/$r.log" 2>&1 ||
    fail "bench dispatch --profiles router exit $? ($(tail -3 "$tmp/$r.log"))"
done
f=$(ls "$tmp"/r1/dispatch.*.tsv 2>/dev/null | head -1)
f2=$(ls "$tmp"/r2/dispatch.*.tsv 2>/dev/null | head -1)
if [[ -n $f && -n $f2 ]]; then
  n=$(rows "$f" x | wc -l)
  [[ $n -eq 3 ]] || fail "router profile: expected 3 rows, got $n"
  bad=$(paste <(getcol "$f" profile) <(getcol "$f" status) <(getcol "$f" check) | grep -vc $'^router\tok\tpass$')
  [[ $bad -eq 0 ]] || fail "router profile: $bad rows not router/ok/pass"
  [[ "$(getcol "$f" imb_before)" == "$(getcol "$f2" imb_before)" ]] ||
    fail "router profile: routes differ between two runs ($(getcol "$f" imb_before | tr '\n' ' ') vs $(getcol "$f2" imb_before | tr '\n' ' '))"
else
  fail "no router-profile result file"
fi

# a shuffled skewed profile: the routes of LLEP's layout at other positions
# (same spilled pieces), every row ok/pass in both chunkings
$MPIRUN -np 2 "$BIN" bench dispatch -n 1 -w 0 --profiles 95/16,95/16s --variants llep,pipelined_llep \
  --chunking strided,contiguous -o "$tmp/sh" >"$tmp/sh.log" 2>&1 ||
  fail "bench dispatch --profiles 95/16s exit $? ($(tail -3 "$tmp/sh.log"))"
f=$(ls "$tmp"/sh/dispatch.*.tsv 2>/dev/null | head -1)
if [[ -n $f ]]; then
  bad=$(paste <(getcol "$f" status) <(getcol "$f" check) | grep -vc $'^ok\tpass$')
  [[ $bad -eq 0 ]] || fail "shuffled profile: $bad rows not ok/pass"
  [[ $(getcol "$f" profile | grep -c '^95/16s$') -eq 3 ]] || fail "shuffled profile: want 3 rows of 95/16s"
  sp=$(paste <(getcol "$f" variant) <(getcol "$f" profile) <(getcol "$f" spilled) | awk -F'\t' '$1 == "llep" {print $3}' | sort -u | wc -l)
  [[ $sp -eq 1 ]] || fail "shuffled profile: llep's spilled pieces differ from LLEP's layout (same routes)"
  # weight-gradient passes: LLEP's layout gives contiguous chunks few
  # experts, shuffled both chunkings see every expert; one chunk fewest
  wp() { paste <(getcol "$f" variant) <(getcol "$f" profile) <(getcol "$f" chunking) <(getcol "$f" wgrad_passes) |
    awk -F'\t' -v v="$1" -v p="$2" -v c="$3" '$1 == v && $2 == p && $3 == c {print $4}'; }
  ss=$(wp pipelined_llep 95/16 strided) sc=$(wp pipelined_llep 95/16 contiguous)
  hs=$(wp pipelined_llep 95/16s strided) hc=$(wp pipelined_llep 95/16s contiguous) l1=$(wp llep 95/16 -)
  [[ -n $ss && -n $sc && $sc -lt $ss ]] || fail "wgrad_passes: 95/16 contiguous ($sc) not below strided ($ss)"
  [[ -n $hs && -n $hc && $((hc * 10)) -ge $((hs * 9)) && $((hc * 10)) -le $((hs * 11)) ]] ||
    fail "wgrad_passes: 95/16s contiguous ($hc) not within 10% of strided ($hs)"
  [[ $((sc * 10)) -lt $((hc * 9)) ]] || fail "wgrad_passes: 95/16 contiguous ($sc) not 10% below 95/16s ($hc)"
  [[ -n $l1 && $l1 -lt $ss ]] || fail "wgrad_passes: llep ($l1) not below pipelined ($ss)"
else
  fail "no shuffled-profile result file"
fi

$MPIRUN -np 1 "$BIN" bench moegemm -n 2 -w 0 -o "$tmp/c" >"$tmp/c.log" 2>&1 || fail "bench moegemm exit $?"
f=$(ls "$tmp"/c/moegemm.*.tsv 2>/dev/null | head -1)
if [[ -n $f ]]; then
  nok=$(getcol "$f" status | grep -c '^ok$')
  [[ $nok -eq 12 ]] || fail "moegemm: $nok of 12 rows ok (2 K x 2 layouts x 3 kinds)"
  # expert-major: one group per local expert (E/ranks), segments: E/ranks x ranks
  badg=$(paste <(getcol "$f" layout) <(getcol "$f" groups) <(getcol "$f" experts) <(getcol "$f" ranks) |
    awk -F'\t' '($1 == "expert_major" && $2 != $3 / $4) || ($1 == "segments" && $2 != $3)' | wc -l)
  [[ $badg -eq 0 ]] || fail "moegemm: $badg rows with unexpected group counts"
else
  fail "no moegemm result file"
fi

if [[ $nfail -eq 0 ]]; then echo "test_bench_dispatch.sh: all passed"; else echo "test_bench_dispatch.sh: $nfail failed"; fi
[[ $nfail -eq 0 ]]
