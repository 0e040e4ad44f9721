#!/usr/bin/env bash
# test_bench_adam.sh — `plateau bench adam --preset small` on 2 ranks (CPU
# backend): every mode runs, every row is ok with check pass, the staging bytes
# never exceed s·β·16, the joint floor (link and host memory) is reported and
# the hybrid's is at most the stream's and the full-staging cpu step's (the
# hybrid's CPU share stages like it); the host-memory bytes a parameter are
# 28 for the update alone, 32 for full staging, 24 for a ring kept in cache,
# 24 for the stream, and the ring's host bytes are below full staging's; a
# bad option is a usage error (exit 2) that writes nothing; an arena limit
# gives oom rows, not a failure.
set -euo pipefail
BUILD=${BUILD:-build}
BIN=$BUILD/bin/plateau
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpirun --bind-to none -np 2 "$BIN" bench adam --preset small --mode cpu,stream,hybrid,update \
  --cpu-staging full,ring3 -n 3 -w 2 -o "$out" >"$out/log" 2>&1 \
  || { cat "$out/log"; echo "FAIL: bench exited non-zero"; exit 1; }
f=$(ls "$out"/adam.*.tsv)
awk -F'\t' '
  /^#/ { next }
  !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
  { n++
    if ($c["status"] != "ok" || $c["check"] != "pass") { print "bad row: " $0; bad++ }
    if ($c["variant"] != "cpu" && $c["optim_staging_bytes"] + 0 > $c["bound_bytes"] + 0) { print "staging over bound: " $0; bad++ }
    # the joint floor: positive, from a measured copy rate; the hybrid at its
    # best share is at most the stream (share 0) and the cpu step (share 1)
    if (!($c["mem_copy_gbs"] > 0) || !($c["joint_floor_ms"] > 0)) { print "joint floor: " $0; bad++ }
    v = $c["variant"]
    if (v == "cpu") v = $c["slots"] == "0" ? "cpu_full" : "cpu_ring"
    jf[v] = $c["joint_floor_ms"] + 0
    bpp[v] = $c["host_bpp"] + 0
    hb[v] = $c["host_bytes"] + 0
    if (!($c["pct_mem_roof"] > 0) || !($c["mem_roof_ms"] > 0)) { print "roofline: " $0; bad++ }
    if ($c["variant"] == "hybrid" && $c["note"] !~ /joint floor at CPU share/) { print "hybrid note: " $0; bad++ }
    m[v]++ }
  END { if (n != 7 || !m["cpu_full"] || !m["cpu_ring"] || !m["update"] || m["stream"] != 2 || m["hybrid"] != 2) { print "rows: " n; bad++ }
        if (jf["hybrid"] > jf["stream"] * 1.000001 || jf["hybrid"] > jf["cpu_full"] * 1.000001) { print "hybrid joint floor above a pure one"; bad++ }
        if (bpp["update"] != 28 || bpp["cpu_full"] != 32 || bpp["cpu_ring"] != 24 || bpp["stream"] != 24) { print "host_bpp: update " bpp["update"] " full " bpp["cpu_full"] " ring " bpp["cpu_ring"] " stream " bpp["stream"]; bad++ }
        if (!(hb["cpu_ring"] < hb["cpu_full"])) { print "ring host bytes " hb["cpu_ring"] " not below full " hb["cpu_full"]; bad++ }
        exit bad ? 1 : 0 }' "$f" || { cat "$out/log"; echo FAIL; exit 1; }
# an arena limit below the staging: oom rows, exit 0 (a result, not a crash)
mpirun --bind-to none -np 2 "$BIN" bench adam --preset small --mode stream --bucket 4K,256K \
  --slots 2 -n 2 -w 1 --mem-limit 4010K -o "$out/oom" >"$out/log3" 2>&1 \
  || { cat "$out/log3"; echo "FAIL: oom run exited non-zero"; exit 1; }
n_oom=$(grep -v '^#' "$out"/oom/adam.*.tsv | awk -F'\t' 'NR > 1 && $0 ~ /\toom\t/' | wc -l)
[ "$n_oom" = 2 ] || { cat "$out"/oom/adam.*.tsv; echo "FAIL: want 2 oom rows, got $n_oom"; exit 1; }
set +e
mpirun --bind-to none -np 1 "$BIN" bench adam --preset small --slots 0 -o "$out/bad" >"$out/log2" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || { cat "$out/log2"; echo "FAIL: bad --slots gave exit $rc, want 2"; exit 1; }
[ ! -e "$out/bad" ] || [ -z "$(ls -A "$out/bad")" ] || { echo "FAIL: wrote files on a usage error"; exit 1; }
echo "PASS test_bench_adam.sh"
