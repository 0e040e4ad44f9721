#!/usr/bin/env bash
# test_report_reference.sh — `plateau report` on the committed reference
# results (results/reference/<kind>/, most written with result schema version
# 1) still writes the numbers the committed reports say: every folder with a
# report/ is copied without it and regenerated (exit 0), and key cells of the
# vocab, dispatch, SCO/max-batch, optimizer, attention and calib reports —
# numbers read through the v1 -> v2 column mapping — must appear in both the
# committed report and the regenerated one; every reference folder's
# MANIFEST.md lists each of its result files.
# Usage: BUILD=build bash suite/report/test_report_reference.sh
set -uo pipefail
PL_TEST=test_report_reference.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
export PLATEAU_GNUPLOT=/nonexistent/gnuplot # tables only: faster, no charts

ref=$ROOT/results/reference
mapfile -t runs < <(cd "$ref" && find . -name report -type d | sed 's,^\./,,; s,/report$,,' | sort)
[[ ${#runs[@]} -gt 0 ]] || fail "no reference folders with a report"
for r in "${runs[@]}"; do
  mkdir -p "$tmp/$r"
  tar -C "$ref/$r" --exclude=./report -cf - . | tar -C "$tmp/$r" -xf -
  if "$BIN" report "$tmp/$r" >"$tmp/out" 2>&1; then pass; else
    fail "report $r: exit $?"; tail -5 "$tmp/out"
  fi
done

# key REPORT CELLS: CELLS (a fixed string) in the committed and the new REPORT
key() {
  local rep=$1 cells=$2
  if ! grep -qF -- "$cells" "$ref/$rep"; then
    fail "$rep: the committed report lacks '$cells' (a stale key)"
  elif [[ ! -f $tmp/$rep ]]; then
    fail "$rep: not regenerated"
  elif ! grep -qF -- "$cells" "$tmp/$rep"; then
    fail "$rep: regenerated without '$cells'"; grep -F -- "${cells:0:24}" "$tmp/$rep" | head -3
  else
    pass
  fi
}

h=h200x2
# vocabulary head (Table 2): times, peaks (from peak_gib, logits_gib,
# floor_gib), hop bytes, the targets
key $h/report/vocab.md "| ring | 2 | 4096 | act | 630.0 (623.2–645.2) | 1.206× | 10.9 | -85.7% | 0.75 | 6.92 | 448.5 | pass | ok |"
key $h/report/vocab.md "- Ring-DTP (P=2, block 4096, act): peak 14.3% of dense (target ≤ 20%: met), time 1.206× dense"
key $h/report/vocab.md "| ring | 2 | 4096 | act | 304.2 (303.4–304.9) | 1.237× | 4.577 | -88.4% | 0.375 | 4.577 | 224.2 | pass | ok |"
key $h/report/vocab.md "| dense | 1 | 0 | - | 246.0 (244.6–247.3) | 1.000× | 39.51 | +0.0% | 36.62 | - | - | pass | ok |"
# dispatch (Tables 6 and 8): EP, LLEP and PipelinedLLEP times and peaks, op
# peaks, dispatch peak / bound; Table 8 per rank count
key $h/report/dispatch.md "| 65536, 7168, 128, 2 | 2 | balanced | 372.3 | 43 | 372.8 | 43 | 414.0 | 23.9 | 10 | 0.90x | -44.4% | 22 -> 2.91 (-86.8%) | 2.8 / 2.8 |"
key $h/report/dispatch.md "| 32768, 4096, 128, 2 | 2 | balanced | 95.4 | 25.5 | 95.0 | 25.5 | 109.6 | 21.8 | 3 | 0.87x | -14.4% | 6 -> 2.34 (-61.1%) | 1.33 / 1.33 |"
key $h/report/dispatch.md "| 32768, 4096, 128, 2 | 2 | 50/4 | 146.7 | 28.4 | 99.8 | 26.1 | 118.0 | 22.1 | 3 | 0.85x | -15.3% | 6.57 -> 2.57 (-60.9%) | 1 / 1.33 |"
key $h/report/dispatch.md "| 32768, 4096, 128, 2 | 2 | 50/4 | 118.0 | 108.3 | 0.92x | 22.1 | 22.1 | 1.00 | 1.05 | 2.29 |"
# SCO and max batch (Tables 3 and 13): device peaks, step times, the search
key $h/report/sco.md "| device (HBM) peak per GPU | 139.79 GiB → 123.73 GiB | -11.5% | 15.64 GiB → 7.91 GiB | -49.4% |"
key $h/report/sco.md "| 0 | 0 B | 0 | 15.64 GiB | +0.0% | 8.44 GiB | 9.14 GiB | 15.64 GiB | 0 B | 560.1 (538.1–564.7) | 117005 | 559.0 | +0.0% | pass | ok |"
key $h/report/sco.md "| ours (2 ranks, global) | 131,072 | 360,448 | +175.00% (target ≥ +17.65%) |"
key $h/report/sco.md "| 0 | 65,536 | ok | 0 | 15.64 GiB | 0 B | 561.847 | 116644 | - |"
# optimizer (Tables 4 and 14): step times (from step_ms), staging, targets
key $h/report/adam.md "| ours: OffloadStreamAdamW (stream) | 100M | 2 | 0.888 | 0.860–0.903 | 1.73× | 2.96 | 65% | 2.24 | pass |"
key $h/report/adam.md "| ours: SIMD CPU AdamW, classic offloaded step (cpu) | – | – | 1.532 | 1.505–1.563 | 1.00× | 1.71 | 37% | – | pass |"
key $h/report/adam.md "| 100M | 1.180 | 0.888 (paper 1.93) | 0.862 (paper: no faster than s=2) |"
key $h/report/adam.md "- stream ≥ 2.05× the SIMD CPU baseline: 1.78× → NOT met"
# attention: TFLOP/s (from ms), the peer's (from its backend column), the
# kernels (from the v1 notes), the target verdicts over AUTO rows (algo)
key $h/report/attention.md "| 32768 | 534.9 | 437.3 | 345.2 | 327.4 | 597.2 | 544.4 | 0.80× | wgmma/ovtma | wgmma/ovtma + wgmma/bulk/tma |"
key $h/report/attention.md "| 1048576 | 523.5 | – | – | – | – | – | – | wgmma/ovtma | – |"
key $h/report/attention.md "- fwd+bwd ≥ 0.8× the best peer at 32K–128K: fastest met (lowest 0.803× at S = 65536, 3 S); AUTO missed (lowest 0.792× at S = 32768, 3 S)."
key $h/report/attention.md "| 131072 | fwdbwd | 1160 | 424.5 | – | – | wgmma/ovtma+wgmma/bulk | auto/auto |"
# calib: the ceilings
key $h/report/calib.md "$(grep -m1 '^| h2d | ' "$ref/$h/report/calib.md")"
key $h/report/calib.md "$(grep -m1 '^| gemm | ' "$ref/$h/report/calib.md")"
# the one-GPU reference: attention against SDPA in one run
key h200x1/report/attention.md "$(grep -m1 '^| 65536 | ' "$ref/h200x1/report/attention.md")"
# every reference directory has a MANIFEST listing every result file
for d in "$ref"/*/; do
  if "$ROOT/jobs/manifest" --check "$d" >"$tmp/out" 2>&1; then pass; else
    fail "MANIFEST of $d: $(head -3 "$tmp/out")"
  fi
done

echo "test_report_reference.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
