# jobs/lib.sh — helpers shared by the sbatch templates and jobs/submit
# (sourced, never run).  The templates run from the repository root
# ($SLURM_SUBMIT_DIR; jobs/submit always submits from there).
# shellcheck shell=bash

PL_BIN=${BUILD:-build}/bin/plateau

# pl_stale_sources: print the source files (engine/ suite/ baselines/; *.c,
# *.cu, *.h, *.def, not test_*) newer than the plateau binary.
pl_stale_sources() {
  local d dirs=()
  for d in engine suite baselines; do [[ -d $d ]] && dirs+=("$d"); done
  [[ ${#dirs[@]} -gt 0 ]] || return 0
  find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.cu' -o -name '*.h' -o -name '*.def' \) \
    ! -name 'test_*' -newer "$PL_BIN" 2>/dev/null || true
}

# pl_require_fresh_build: refuse (exit 2) when the binary is missing or older
# than a source file.  A job never builds: on a cluster the compute node may
# lack the compilers, and concurrent array tasks would race on build/.  When
# `make -q` (make's own dependency graph) says the binary is up to date, a
# newer file that it does not depend on is not a reason to refuse.
pl_require_fresh_build() {
  if [[ ! -x $PL_BIN ]]; then
    echo "plateau job: $PL_BIN is missing in $PWD: run 'make' there (on a login node) and resubmit" >&2
    exit 2
  fi
  local newer
  newer=$(pl_stale_sources | head -n 5 || true)
  [[ -z $newer ]] && return 0
  if [[ -f Makefile ]] && command -v make >/dev/null && make -s -q BUILD="${BUILD:-build}" "$PL_BIN" >/dev/null 2>&1; then
    return 0
  fi
  echo "plateau job: $PL_BIN is older than its sources (a stale build); run 'make' and resubmit. Newer:" >&2
  echo "$newer" | sed 's/^/  /' >&2
  exit 2
}

# pl_point_recorded DIR POINT: true when a result file directly in DIR has the
# metadata line "# point: POINT" and a closing "# end: ok" line (the harness
# writes both: --point ID, and "# end: ok <utc>" when the run finished).
pl_point_recorded() {
  local dir=$1 point=$2 f
  [[ -d $dir ]] || return 1
  while IFS= read -r f; do
    grep -qE '^# end: ok( |$)' "$f" && return 0
  done < <(grep -lxF -- "# point: $point" "$dir"/*.tsv 2>/dev/null || true)
  return 1
}
