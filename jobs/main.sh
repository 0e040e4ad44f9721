#!/usr/bin/env bash
# jobs/main.sh — the main job that `make run` runs: the component sweep
# jobs/sweeps/make-run.tsv on the CPU backend under mpirun at small sizes (no
# GPU and no Slurm needed), through jobs/run — the same run path as every
# sweep — then the tables and charts of that run, the paths of
# everything written and, last, report/summary.md (the paper's claims).
#
#   NP=2 jobs/main.sh            (make run NP=4 to change the rank count)
#
# NP rewrites the sweep's ntasks column (a copy in the run directory); every
# run goes to a fresh directory results/runs/make-run-<UTC stamp>, never over
# an earlier one.  On the CPU backend the memory columns are exact (the
# tracked allocator counts every byte) and the time columns are CPU times of
# this machine, not GPU times; the output says so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

NP=${NP:-2}
export BUILD=${BUILD:-build}
BIN=$BUILD/bin/plateau
[[ $NP =~ ^[1-9][0-9]*$ ]] || { echo "jobs/main.sh: NP='$NP' must be a positive integer" >&2; exit 2; }
[[ -x $BIN ]] || { echo "jobs/main.sh: $BIN is missing: run 'make' first (make run does)" >&2; exit 2; }

stamp=$(date -u +%Y%m%dT%H%M%SZ)
name=make-run-$stamp
n=1
while [[ -e results/runs/$name ]]; do n=$((n + 1)); name=make-run-$stamp-$n; done
dir=results/runs/$name
mkdir -p "$dir"
# the sweep with NP ranks per point
awk -F'\t' -v OFS='\t' -v np="$NP" '/^#/ || NF == 0 {print; next}
  !h {for (i = 1; i <= NF; i++) if ($i == "ntasks") c = i; h = 1; print; next}
  {$c = np; print}' jobs/sweeps/make-run.tsv >"$dir/make-run.points"
echo "# make run: jobs/sweeps/make-run.tsv, CPU backend, $NP ranks under mpirun, into $dir"
BACKEND=cpu jobs/run "$dir/make-run.points" --sweep "$name" --machine all

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
# the one page to read first: the paper's claims against this run
if [[ -f $dir/report/summary.md ]]; then
  echo
  echo "== $dir/report/summary.md"
  cat "$dir/report/summary.md"
fi
