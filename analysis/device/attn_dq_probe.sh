#!/usr/bin/env bash
# analysis/device/attn_dq_probe.sh — what the wgmma backward's dQ costs:
# `plateau bench attention` fwd+bwd (64 q / 8 kv heads, d 128, 16Ki and 64Ki,
# PLATEAU_ATTN_WGMMA_BWD=$VARIANT, fused (default) or bulk; the caller's
# other PLATEAU_* variables apply) as shipped, then rebuilt from two patched
# copies of engine/backend/cuda/attention.cu that give WRONG gradients on
# purpose: (1) "no-atomics" (fused: the dQ tile computed but never added to
# the workspace) or "no-reduce" (bulk: staged but never reduced); (2)
# "no-dq", the dQ GEMM left out (fused: nothing added; bulk: the stage and
# the reductions of whatever its registers hold remain).  The source is
# restored at the end (and on exit); REBUILD=0 skips the final rebuild of
# the shipped kernels.  Run on the GPU machine from the repository root
# after the build that analysis/device/run.sh does; prints one line per run
# and writes the result files into $RUNS.  About 2 minutes.
set -uo pipefail
RUNS=${RUNS:-results/runs/attn-dq-probe-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=${BIN:-build/bin/plateau}
VARIANT=${VARIANT:-fused}
case "$VARIANT" in fused | bulk) ;; *) echo "attn_dq_probe.sh: VARIANT=$VARIANT: must be fused or bulk" >&2; exit 2 ;; esac
F=engine/backend/cuda/attention.cu
MAKEARGS=${MAKEARGS:-DEPS=0 BLAS=none STATIC_DEPS=1 DEPS_PREFIX=.carry/deps WERROR=0}
mkdir -p "$RUNS"
cp "$F" "$RUNS/attention.cu.orig"
restore() { cp "$RUNS/attention.cu.orig" "$F" && rm -f "$RUNS/attention.cu.orig"; }
trap restore EXIT

run() { # label
  make -j"$(nproc)" $MAKEARGS "$BIN" >"$RUNS/build-$1.log" 2>&1 || { echo "$1: build failed"; return; }
  PLATEAU_PROBE=$1 PLATEAU_ATTN_WGMMA_BWD=$VARIANT timeout 120 "$BIN" bench attention --backend cuda \
    --heads 64 --kv-heads 8 --head-dim 128 --seq 16Ki,64Ki --pass both -w 1 -n 3 -o "$RUNS" 2>&1 |
    awk -v l="$1" '/^#/ {next} $9 == "fwdbwd" {print l, "S=" $4, $10 " ms", $13 " TFLOP/s"}'
}
# patch OLD NEW: replace the one occurrence of OLD in $F (fails loudly if absent)
patch_src() {
  python3 - "$F" "$1" "$2" <<'PY'
import sys
f, old, new = sys.argv[1:]
s = open(f).read()
if s.count(old) != 1:
    sys.exit("attn_dq_probe.sh: the pattern to patch is not in %s once: %r" % (f, old))
open(f, "w").write(s.replace(old, new))
PY
}
run shipped
if [ "$VARIANT" = bulk ]; then
  patch_src "if (leader) dq_bulk(pend_q, pend_h, wg);" ";" || exit 1
  run no-reduce
else
  patch_src "if (FQ == WGB_DQ_ATOMIC && pend_q >= 0) dq_flush(pend_q, pend_h);" ";" || exit 1
  run no-atomics
fi
patch_src "wg_m64n64_ss<1, 1>(dqp," "if (0) wg_m64n64_ss<1, 1>(dqp," || exit 1
run no-dq
restore
trap - EXIT
[ "${REBUILD:-1}" = 1 ] && make -j"$(nproc)" $MAKEARGS "$BIN" >/dev/null 2>&1 # back to the shipped kernels
