#!/usr/bin/env bash
# test_layers.sh — the layer checker (check_layers.sh).
#
# On the tree: no back-up include and no circle beyond the pending list
# (layers_pending.txt).  On a temporary copy of the tree (never the tree
# itself): an injected back-up include (in the engine, and within suite/: the
# harness including a bench), an injected circle of two headers and one of two
# benches' folders, an unlisted public header, a source file of suite/ outside
# its layer folders, a comparison of an ops table's name with a baseline's
# name in engine/ (and not the same word compared with something else), a
# pending pair that no longer occurs, --strict on the
# tree (passes: no file or function over its length beyond layers_long.txt)
# and on a long file, a long function and a long macro (fails), an entry of
# layers_long.txt without its reason (fails) and one whose function is short
# (stale), a pending pair that would close a circle, and a header of a bench
# declaring the functions of three of its folder's files (an umbrella; not
# when the header's name makes them its own unit) each give the finding and
# the exit status they must.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
check=engine/check_layers.sh
pending=engine/layers_pending.txt
pass=0
fail=0
ok() {
  pass=$((pass + 1))
  echo "ok: $1"
}
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1"
}
# expect NAME STATUS PATTERN -- ARGS: check_layers.sh ARGS exits with STATUS
# and prints a line matching PATTERN (an extended regex; "" for none).
expect() {
  local name=$1 want=$2 pat=$3
  shift 4
  local out rc=0
  out=$("$check" "$@" 2>&1) || rc=$?
  if [ "$rc" != "$want" ]; then
    bad "$name: exit $rc, want $want"
    echo "$out" | sed 's/^/    /'
  elif [ -n "$pat" ] && ! echo "$out" | grep -qE "$pat"; then
    bad "$name: no line matching /$pat/"
    echo "$out" | sed 's/^/    /'
  else
    ok "$name"
  fi
}

expect "the tree: no back-up include, no circle" 0 \
  ' 0 back-up includes, 0 circles' -- --allow "$pending"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy() { # a fresh copy of the layered folders in $tmp/$1
  mkdir -p "$tmp/$1"
  cp -R engine baselines suite "$tmp/$1/"
  [ ! -d dev ] || cp -R dev "$tmp/$1/"
  cp "$pending" "$tmp/$1/pending.txt"
}

copy clean
expect "the copy checks like the tree" 0 ' 0 back-up includes, 0 circles' -- \
  --allow "$tmp/clean/pending.txt" "$tmp/clean"
expect "--strict passes the tree's sizes" 0 ' 0 size findings' -- \
  --strict --allow "$tmp/clean/pending.txt" "$tmp/clean"

copy long
for i in $(seq 1 950); do echo "/* line $i */"; done >>"$tmp/long/engine/core/tensor.c"
# inject_long FILE: a function of 133 lines and a macro of 127 at FILE's end
inject_long() {
  {
    echo 'static int pl_injected_long(int x) {'
    for i in $(seq 1 130); do echo "  x += $i;"; done
    echo '  return x;'
    echo '}'
    echo '#define PL_INJECTED_MACRO(x) \'
    for i in $(seq 1 125); do echo "  (x) + $i + \\"; done
    echo '  0'
  } >>"$1"
}
inject_long "$tmp/long/suite/bench/layer/bench_layer.c"
expect "--strict fails on a long file" 1 '^size: engine/core/tensor\.c: [0-9]+ lines \(over 900\)' -- \
  --strict --allow "$tmp/long/pending.txt" "$tmp/long"
expect "--strict fails on a long function" 1 \
  '^long: suite/bench/layer/bench_layer\.c:[0-9]+ pl_injected_long: 133 lines \(a function over 120\)' -- \
  --strict --allow "$tmp/long/pending.txt" "$tmp/long"
expect "--strict fails on a long macro" 1 \
  '^long: suite/bench/layer/bench_layer\.c:[0-9]+ PL_INJECTED_MACRO: 127 lines \(a macro over 120\)' -- \
  --strict --allow "$tmp/long/pending.txt" "$tmp/long"
expect "without --strict a long file or function is a warning" 0 ' 3 size findings' -- \
  --allow "$tmp/long/pending.txt" "$tmp/long"

copy listed
inject_long "$tmp/listed/suite/bench/layer/bench_layer.c"
echo "allow suite/bench/layer/bench_layer.c pl_injected_long # a test" >>"$tmp/listed/engine/layers_long.txt"
echo "pending suite/bench/layer/bench_layer.c PL_INJECTED_MACRO # a test" >>"$tmp/listed/engine/layers_long.txt"
expect "a long function allowed and a long macro pending pass --strict" 0 \
  '^pending long: suite/bench/layer/bench_layer\.c:[0-9]+ PL_INJECTED_MACRO' -- \
  --strict --allow "$tmp/listed/pending.txt" "$tmp/listed"

copy why
echo "allow suite/harness/bench.c pl_bench_run" >>"$tmp/why/engine/layers_long.txt"
expect "an allowance without its reason fails" 1 \
  'unexplained: engine/layers_long\.txt:[0-9]+: suite/harness/bench\.c pl_bench_run has no "# why"' -- \
  --allow "$tmp/why/pending.txt" "$tmp/why"
sed -i '$d' "$tmp/why/engine/layers_long.txt"
echo "allow suite/harness/bench.c pl_bench_run # short now" >>"$tmp/why/engine/layers_long.txt"
expect "an allowance of a short function is stale, not a failure" 0 \
  '^warning: stale: suite/harness/bench\.c pl_bench_run is no long function now' -- \
  --allow "$tmp/why/pending.txt" "$tmp/why"

copy place
echo '/* a file of no layer folder */' >"$tmp/place/suite/loose.c"
expect "a suite/ file outside its layer folders is found" 1 \
  '^place: suite/loose\.c is in none of the layer folders of suite/' -- \
  --allow "$tmp/place/pending.txt" "$tmp/place"

copy suiteup
echo '#include "bench/train/bench_train.h"' >>"$tmp/suiteup/suite/harness/trial.c"
expect "the harness including a bench is a back-up include" 1 \
  '^back-up: suite/harness/trial\.c:[0-9]+ includes suite/bench/train/bench_train\.h \(L9 includes L12\)' -- \
  --allow "$tmp/suiteup/pending.txt" "$tmp/suiteup"
echo '#include "bench/maxbatch/maxbatch_search.h"' >>"$tmp/suiteup/suite/bench/train/train_proj.c"
expect "two benches including each other close a folder circle" 1 \
  '^circle \(folders\): suite/bench/maxbatch -> suite/bench/train -> suite/bench/maxbatch' -- \
  --allow "$tmp/suiteup/pending.txt" "$tmp/suiteup"

copy up
echo '#include "ops/ce.h"' >>"$tmp/up/engine/core/tensor.c"
expect "a back-up include is found" 1 \
  '^back-up: engine/core/tensor\.c:[0-9]+ includes engine/ops/ce\.h \(L0 includes L3\)' -- \
  --allow "$tmp/up/pending.txt" "$tmp/up"
expect "the back-up include also closes a folder circle" 1 \
  '^circle \(folders\): .*engine/(core -> .*engine/ops|ops -> .*engine/core)' -- \
  --allow "$tmp/up/pending.txt" "$tmp/up"

copy circle
printf '#include "ops/circ_b.h"\n' >"$tmp/circle/engine/ops/circ_a.h"
printf '#include "circ_a.h"\n' >"$tmp/circle/engine/ops/circ_b.h"
expect "a circle of two headers is found" 1 \
  '^circle: engine/ops/circ_a\.h -> engine/ops/circ_b\.h -> engine/ops/circ_a\.h$' -- \
  --allow "$tmp/circle/pending.txt" "$tmp/circle"

copy byname
printf 'static int pl_injected_by_name(const pl_optim_ops *o) {\n  return !strcmp(o->name, "cpu");\n}\n' \
  >>"$tmp/byname/engine/train/optim.c"
expect "a comparison with a baseline's name in engine/ fails" 1 \
  '^by-name: engine/train/optim\.c:[0-9]+ compares an ops table.s name with "cpu"' -- \
  --allow "$tmp/byname/pending.txt" "$tmp/byname"
copy byword
printf 'static int pl_injected_backend(const char *v) { return !strcmp(v, "cpu"); }\n' \
  >>"$tmp/byword/engine/train/optim.c"
expect "the same word compared with no ops table's name passes" 0 ' 0 by-name' -- \
  --allow "$tmp/byword/pending.txt" "$tmp/byword"

copy public
echo '/* new */' >"$tmp/public/engine/include/plateau/newapi.h"
echo '#include "plateau/newapi.h"' >>"$tmp/public/engine/ops/ce.h"
expect "a public header without a layer is found" 1 \
  'engine/include/plateau/newapi\.h: public header without a layer' -- \
  --allow "$tmp/public/pending.txt" "$tmp/public"

copy stale
echo "engine/core/dev.c engine/ops/ce.h" >>"$tmp/stale/pending.txt"
expect "a pending pair that does not occur is stale, not a failure" 0 \
  '^warning: stale: engine/core/dev\.c engine/ops/ce\.h' -- \
  --allow "$tmp/stale/pending.txt" "$tmp/stale"

copy hidden
echo '#include "ops/ce.h"' >>"$tmp/hidden/engine/core/tensor.c"
echo "engine/core/tensor.c engine/ops/ce.h" >>"$tmp/hidden/pending.txt"
echo '#include "core/internal.h"' >>"$tmp/hidden/engine/ops/sco.h"
printf '#include "ops/sco.h"\n' >"$tmp/hidden/engine/core/loop.h"
expect "a listed pair does not hide another back-up include" 1 \
  '^back-up: engine/core/loop\.h:1 includes engine/ops/sco\.h' -- \
  --allow "$tmp/hidden/pending.txt" "$tmp/hidden"

copy umbrella
printf '/* all.h: every helper */\n%s\n%s\n%s\n' \
  'void pl__train_check_losses(const pl_step_result *res, int n, pl_check *chk);' \
  'void pl__train_identity(const pl_train_setup *u, int r, int Wv, int D, pl_row *row);' \
  'void pl__train_host_limit(pl_bench_ctx *c, bool on);' >"$tmp/umbrella/suite/bench/train/all.h"
expect "a bench header declaring three files' functions fails --strict" 1 \
  '^umbrella: suite/bench/train/all\.h declares functions of 3 files of its folder' -- \
  --strict --allow "$tmp/umbrella/pending.txt" "$tmp/umbrella"
expect "without --strict an umbrella header is a warning" 0 '^warning: umbrella: ' -- \
  --allow "$tmp/umbrella/pending.txt" "$tmp/umbrella"
mv "$tmp/umbrella/suite/bench/train/all.h" "$tmp/umbrella/suite/bench/train/train.h"
expect "a header whose unit holds the files (train.h: train_*.c) is none" 0 \
  ' 0 umbrella headers' -- --strict --allow "$tmp/umbrella/pending.txt" "$tmp/umbrella"

if grep -qv '^#' "$pending"; then
  expect "without the pending list the tree's pending pairs fail" 1 \
    '^back-up: ' -- "$tmp/clean"
fi

echo "test_layers.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
