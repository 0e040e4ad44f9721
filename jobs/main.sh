#!/usr/bin/env bash
# jobs/main.sh — the main job that `make run` runs: the component suite on the
# CPU backend under mpirun at small sizes (no GPU and no Slurm needed), then
# the tables and charts of that run, and the paths of everything written.
#
#   NP=2 jobs/main.sh            (make run NP=4 to change the rank count)
#
# Each bench is one line of BENCHES (the arguments after `plateau bench`);
# a later bench is added by adding its line.  Every run goes to a fresh
# directory results/runs/make-run-<UTC stamp>, never over an earlier one.
# On the CPU backend the memory columns are exact (the tracked allocator
# counts every byte) and the time columns are CPU times of this machine, not
# GPU times; the output says so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

NP=${NP:-2}
BUILD=${BUILD:-build}
BIN=$BUILD/bin/plateau
[[ $NP =~ ^[1-9][0-9]*$ ]] || { echo "jobs/main.sh: NP='$NP' must be a positive integer" >&2; exit 2; }
[[ -x $BIN ]] || { echo "jobs/main.sh: $BIN is missing: run 'make' first (make run does)" >&2; exit 2; }

# One line per bench: `plateau bench` arguments at small sizes.
BENCHES=(
  "calib --sizes 4Ki:1Mi:x4 --gemm-size 256 -n 5 -w 2"
  "sco --preset small -n 3 -w 0"
  "vocab"
  "attention -n 3 -w 1"
  "layer -n 2 -w 1"
  "dispatch -n 3 -w 1"
  "adam"
)

stamp=$(date -u +%Y%m%dT%H%M%SZ)
dir=results/runs/make-run-$stamp
n=1
while [[ -e $dir ]]; do n=$((n + 1)); dir=results/runs/make-run-$stamp-$n; done
mkdir -p "$dir"

mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$NP")
echo "# make run: ${#BENCHES[@]} bench(es), CPU backend, $NP ranks under mpirun, into $dir"
for b in "${BENCHES[@]}"; do
  # shellcheck disable=SC2086  # a bench line is a list of arguments
  set -- $b
  echo "# \$ ${mpirun[*]} $BIN bench $* --backend cpu -o $dir"
  "${mpirun[@]}" "$BIN" bench "$@" --backend cpu -o "$dir"
done

echo "# \$ $BIN report $dir"
"$BIN" report "$dir"

echo
echo "== make run: done ($dir)"
echo "Result files:"
find "$dir" -maxdepth 1 -type f -name '*.tsv' | sort | sed 's/^/  /'
echo "Tables:"
find "$dir" -type f \( -name '*.md' -o -name '*.tex' \) | sort | sed 's/^/  /'
echo "Charts:"
find "$dir" -type f \( -name '*.svg' -o -name '*.png' \) | sort | sed 's/^/  /'
echo "Note: CPU backend on this machine: time columns are CPU times (not GPU times);"
echo "      memory columns are exact (every byte counted by the tracked allocator)."
