#!/usr/bin/env bash
# test_bench_calib_mem.sh — the host-memory tests of `plateau bench calib` on
# the CPU backend: mem_read, mem_write and mem_copy each write one row of
# --mem-size bytes with status ok and check pass, copy counting read + write
# (algbw = 2·bytes / time) and a thread count in the note; an injected fault
# (PLATEAU_CALIB_INJECT_FAULT) fails every one of them (exit 1); the cuda
# preset asks for them.  Also alloc, the allocatable ceiling, under a limit.
# Usage: BUILD=build bash suite/bench/calib/test_bench_calib_mem.sh   (run from anywhere)
set -uo pipefail
PL_TEST=test_bench_calib_mem.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../testlib.sh"
export OMP_NUM_THREADS=2

"$BIN" bench calib --backend cpu --tests mem_read,mem_write,mem_copy --mem-size 8Mi \
  -n 2 -w 1 -o "$tmp/a" >"$tmp/a.out" 2>&1 || { fail "calib mem exit $?"; cat "$tmp/a.out"; }
f=$(ls "$tmp"/a/calib.*.tsv 2>/dev/null | head -1)
if [[ -z $f ]]; then
  fail "no result file"
else
  awk -F'\t' '/^#/{next} !h{for(i=1;i<=NF;i++)c[$i]=i;h=1;next}
    {
      rows++; v = $c["variant"]; seen[v] = 1
      if ($c["status"] != "ok" || $c["check"] != "pass") { print "row: " $0; bad++ }
      if ($c["bytes"] != 8388608) { print v " bytes " $c["bytes"]; bad++ }
      want = (v == "mem_copy" ? 2 : 1) * $c["bytes"] / ($c["time_ms"] * 1e-3) / 1e9
      if ($c["algbw_gbs"] < want * 0.999 || $c["algbw_gbs"] > want * 1.001) { print v " algbw " $c["algbw_gbs"] " want " want; bad++ }
      if ($c["note"] !~ /2 threads/) { print v " note: " $c["note"]; bad++ }
    }
    END { if (rows != 3 || !seen["mem_read"] || !seen["mem_write"] || !seen["mem_copy"]) { print "rows " rows; bad++ }
          exit bad ? 1 : 0 }' "$f" || fail "rows of $f"
fi

PLATEAU_CALIB_INJECT_FAULT=1 "$BIN" bench calib --backend cpu --tests mem_read,mem_write,mem_copy \
  --mem-size 64Ki -n 1 -w 0 -o "$tmp/b" >"$tmp/b.out" 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "injected fault: exit $rc (want 1)"
f=$(ls "$tmp"/b/calib.*.tsv 2>/dev/null | head -1)
[[ -n $f ]] && [[ $(awk -F'\t' '/^#/{next} !h{for(i=1;i<=NF;i++)c[$i]=i;h=1;next} $c["check"]=="fail"{n++} END{print n+0}' "$f") -eq 3 ]] ||
  fail "injected fault: want 3 failed checks"

# alloc: the device arena's allocatable ceiling under a step's pattern; on
# the CPU backend under --mem-limit it is the limit itself (within a grain
# of L/256), and the planner reads it as hbm_alloc; without a limit the
# probe is refused (it would take the host's memory)
"$BIN" bench calib --backend cpu --tests alloc --mem-limit 96Mi -n 2 -w 1 -o "$tmp/c" >"$tmp/c.out" 2>&1 ||
  fail "calib alloc exit $?: $(cat "$tmp/c.out")"
f=$(ls "$tmp"/c/calib.*.tsv 2>/dev/null | head -1)
[[ -n $f ]] && awk -F'\t' '/^#/{next} !h{for(i=1;i<=NF;i++)c[$i]=i;h=1;next}
  $c["variant"] == "alloc" && $c["status"] == "ok" && $c["check"] == "pass" &&
  $c["bytes"] <= 100663296 && $c["bytes"] > 100663296 - 393216 {n++}
  END {exit n == 1 ? 0 : 1}' "$f" || fail "alloc row: $(grep -v '^#' "$f" 2>/dev/null)"
# whole outputs first: grep -q stops at the match (SIGPIPE under pipefail)
out=$("$BIN" plan --machine --calib "$f" 2>&1)
grep -q "hbm_alloc=100663296 " <<<"$out" || fail "plan does not read the alloc row"
"$BIN" bench calib --backend cpu --tests alloc -n 1 -w 0 -o "$tmp/d" >"$tmp/d.out" 2>&1
f=$(ls "$tmp"/d/calib.*.tsv 2>/dev/null | head -1)
[[ -n $f ]] && grep -q "without a limit" "$f" && pass || fail "alloc without a limit: $(cat "$tmp/d.out")"

out=$("$BIN" bench calib --help 2>&1)
grep -q "mem-size" <<<"$out" || fail "--help lacks --mem-size"
"$BIN" bench calib --backend cpu --preset cuda --columns -o "$tmp/x" >/dev/null 2>&1 || fail "cuda preset"

if [[ $nfail -eq 0 ]]; then echo "test_bench_calib_mem.sh: all passed"; exit 0; fi
echo "test_bench_calib_mem.sh: $nfail failed"
exit 1
