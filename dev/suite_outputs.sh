#!/usr/bin/env bash
# dev/suite_outputs.sh — what the `plateau` program prints and writes, in one
# folder, so that a restructuring of suite/ that is meant to move code only
# can be proved by `diff -r` of the folder before and after it.
#
#   BUILD=build dev/suite_outputs.sh OUT_DIR
#
# OUT_DIR (created; must not exist) gets:
#   help/         `plateau --help`, every command's `--help`, every bench's
#                 `--help` and `--columns`, `plateau schema`
#   plan/         `plateau plan` with its defaults and `--table paper`
#   report/<ref>/ `plateau report` of a copy of each committed reference
#                 directory (results/reference/*/): the Markdown files and the
#                 chart data it writes (charts are compared by name only:
#                 gnuplot's output is not ours), and what it printed
#   compare.txt   `plateau compare` of two committed result files of one bench
# The first line of `--help` (the build's provenance) and the scratch folder's
# name are replaced by fixed words and the progress lines of `plan` and
# `plan --table paper` (their times) left out, so two builds of other trees
# compare.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$root/$BUILD
bin=$BUILD/bin/plateau
out=${1:?usage: dev/suite_outputs.sh OUT_DIR}
[ -x "$bin" ] || { echo "suite_outputs.sh: $bin not built" >&2; exit 1; }
[ ! -e "$out" ] || { echo "suite_outputs.sh: $out exists" >&2; exit 2; }
mkdir -p "$out/help" "$out/plan" "$out/report"
export PLATEAU_ROOT=$root OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# run FILE CMD...: CMD's stdout and stderr and exit status into FILE, the
# provenance line and the scratch folder made fixed.
run() {
  local f=$1 rc=0
  shift
  "$@" >"$f" 2>&1 || rc=$?
  echo "exit $rc" >>"$f"
  sed -i -e "s|$work|WORK|g" -e 's/^plateau [0-9.]* (.*) — /plateau VERSION — /' \
    -e '/^\[plan --table paper\] point .* elapsed /d' \
    -e '/^\[plan\] searching the configurations: elapsed /d' "$f"
}

run "$out/help/plateau" "$bin" --help
for c in info report compare tokens schema plan; do
  run "$out/help/$c" "$bin" "$c" --help
done
run "$out/help/bench" "$bin" bench --help
benches=$(find "$root/suite" -name benches.def -exec cat {} + |
  sed -n 's/^BENCH(\([a-z_]*\),.*/\1/p' | sort -u)
for b in $benches; do
  run "$out/help/bench-$b" "$bin" bench "$b" --help
  run "$out/help/columns-$b" "$bin" bench "$b" --columns
done
run "$out/help/schema" "$bin" schema

run "$out/plan/default" "$bin" plan
run "$out/plan/table-paper" "$bin" plan --table paper

for ref in "$root"/results/reference/*/; do
  name=$(basename "$ref")
  mkdir -p "$work/$name"
  find "$ref" -maxdepth 1 -type f -name '*.tsv' -exec cp {} "$work/$name/" \;
  run "$out/report/$name.out" "$bin" report "$work/$name"
  mkdir -p "$out/report/$name"
  (cd "$work/$name/report" && find . -type f | LC_ALL=C sort) >"$out/report/$name/FILES"
  for f in "$work/$name/report"/*; do
    case $f in
    *.svg | *.png) ;;
    *) sed "s|$work|WORK|g" "$f" >"$out/report/$name/$(basename "$f")" ;;
    esac
  done
done

cd "$root"
ref=results/reference
a=$(find "$ref/h200x2" -name 'sco.*.tsv' | LC_ALL=C sort | sed -n 1p)
b=$(find "$ref/h200x2" -name 'sco.*.tsv' | LC_ALL=C sort | sed -n 2p)
run "$out/compare.txt" "$bin" compare "$a" "$b"
run "$out/compare-cpu.txt" "$bin" compare "$ref/cpu" "$ref/cpu"
echo "suite_outputs.sh: wrote $out ($(find "$out" -type f | wc -l) files)"
