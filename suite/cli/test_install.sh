#!/usr/bin/env bash
# test_install.sh — `make install` ships what the installed program needs:
# bin/plateau, lib/libplateau.a, the headers, plateau.pc, and the chart
# scripts in share/plateau/analysis, where an installed `plateau report` run
# outside the repository (no PLATEAU_ROOT, another working directory) finds
# them: the charts are drawn and no "charts skipped" warning is printed;
# and a no-op `make` after it (BUILD relative or absolute) compiles nothing.
# Usage: BUILD=build bash suite/cli/test_install.sh
set -uo pipefail
PL_TEST=test_install.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
unset PLATEAU_ROOT
cuda=0
"$BIN" info 2>/dev/null | grep -q "^backends built: cpu cuda" && cuda=1
prefix=$tmp/prefix
if make -s -C "$ROOT" --no-print-directory install PREFIX="$prefix" BUILD="$BUILD" CUDA=$cuda DEPS=0 \
  >"$tmp/install.log" 2>&1; then pass; else fail "make install"; tail -5 "$tmp/install.log"; fi
# a no-op build stays one, whichever way BUILD is spelled (the tests give it
# absolute, the guides' commands relative): nothing is compiled or linked
rel=$(realpath -m --relative-to="$ROOT" "$BUILD")
for b in "$rel" "$BUILD" "$rel"; do
  out=$(make -C "$ROOT" --no-print-directory BUILD="$b" CUDA=$cuda DEPS=0 all 2>&1)
  if grep -qE '(^|/)(cc|gcc|nvcc) |ar rcs' <<<"$out"; then
    fail "make BUILD=$b after the build rebuilt: $(grep -E '(^|/)(cc|gcc|nvcc) |ar rcs' <<<"$out" | head -2 | cut -c1-160)"
  else
    pass
  fi
done
for f in bin/plateau lib/libplateau.a include/plateau/plateau.h lib/pkgconfig/plateau.pc \
  share/plateau/analysis/calib.gp share/plateau/analysis/dispatch.gp; do
  [[ -e $prefix/$f ]] && pass || fail "not installed: $f"
done
n=$(find "$ROOT/analysis" -maxdepth 1 -name '*.gp' | wc -l)
[[ $(find "$prefix/share/plateau/analysis" -name '*.gp' | wc -l) == "$n" ]] && pass || fail "not every analysis/*.gp installed"
run=$tmp/run
"$BIN" bench calib --backend cpu --sizes 4Ki:16Ki:x4 --gemm-size 32 -n 2 -w 0 -o "$run" >/dev/null 2>&1 || fail "calib run"
if command -v gnuplot >/dev/null; then
  (cd "$tmp" && "$prefix/bin/plateau" report "$run") >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [[ $rc == 0 ]] && pass || fail "installed plateau report: exit $rc"
  [[ -s $run/report/calib-bandwidth.svg ]] && pass || { fail "no chart from the installed program"; cat "$tmp/err"; }
  ! grep -q "charts skipped\|charts were skipped" "$tmp/err" && pass || { fail "charts skipped"; cat "$tmp/err"; }
else
  echo "note: gnuplot not installed: the chart check is skipped"
fi
echo "test_install.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
