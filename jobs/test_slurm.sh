#!/usr/bin/env bash
# jobs/test_slurm.sh — the Slurm integration test that CI runs for real (make
# test runs it; it is never skipped).  It brings up the local one-node Slurm
# (jobs/local/up), and through real sbatch/srun:
#   1. refuses a stale build (unit check of jobs/lib.sh, then a real job);
#   2. jobs/submit --dry-run of the 2-point calib sweep submits nothing;
#   3. submits the sweep (one array of 2 points, 2 ranks each through
#      srun --mpi=pmix, CPU backend) plus its afterany report job, and
#      jobs/calib.sbatch on its own; waits on `scontrol show job`; checks every
#      result row (status ok, check pass, 2 ranks, Slurm ids in the metadata),
#      the Markdown table and the SVG/PNG charts;
#   4. resume: a fresh sweep whose slow point is cancelled mid-run (jobs/status
#      says running, then failed: CANCELLED); the report still runs (afterany)
#      and lists it; the resubmission runs only the killed point; in the end
#      both points are recorded, the fast one exactly once; a third
#      submission submits only the report job;
#   5. per-point resources: a sweep of three shapes (1 task; 2 tasks with 2
#      GPUs per node; a single process whose quoted --launcher '{launch}'
#      argument, with spaces, starts its 2-rank trials through srun) goes out
#      as three arrays, each with exactly its allocation (scontrol), and every
#      point is done; a point refused by the program is never submitted;
#   6. multi-node: a 64-GPU point (8 nodes x 8 GPUs) checked by the scheduler
#      with `jobs/submit --test-only -p shape` (the local cluster's powered-down
#      partition), and a 9-node one refused;
# and stops the cluster on exit (trap), whatever happened.
# Needs root, slurm-wlm and munge (make deps) and a built build/bin/plateau.
# Prints each check; ends with "N passed, M failed"; exit 1 on any failure.
# KEEP=1 keeps the run directories results/runs/test-slurm-* of a passing run.
# shellcheck disable=SC2016  # check_eval's code is single-quoted on purpose
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BUILD=${BUILD:-build}
export BACKEND=cpu
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS # the jobs set them from Slurm (checked below)
BIN=$BUILD/bin/plateau
SWEEP_TSV=jobs/sweeps/calib-smoke.tsv
WAIT_S=${TEST_SLURM_TIMEOUT:-300}

pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
step() { echo "== [${SECONDS}s] $*"; }
check() { # DESCRIPTION CMD...: one check
  local d=$1
  shift
  if "$@"; then ok "$d"; else bad "$d"; fi
}
check_eval() { # DESCRIPTION 'CODE': one check, CODE evaluated in this shell
  if eval "$2"; then ok "$1"; else bad "$1"; fi
}
has() { grep -qE -- "$1" <<<"$2"; } # has REGEX TEXT
finish() {
  echo "== test_slurm (${SECONDS}s): $pass passed, $fail failed"
  [[ $fail == 0 ]]
}
abort() { # a failure after which nothing else can be checked
  bad "$*"
  finish || exit 1
}

[[ $(id -u) == 0 ]] || abort "must run as root (the local Slurm runs daemons as root); CI runs as root"
[[ -x $BIN ]] || abort "$BIN is missing: run make first (make test does)"

stamp=$(date -u +%Y%m%dT%H%M%S)-$$
tmp=$(mktemp -d)
started=0 # set once jobs/local/up ran
cleanup() {
  local rc=$?
  if [[ $started == 1 ]]; then
    step "stopping the local Slurm"
    jobs/local/down || echo "FAIL jobs/local/down failed" >&2
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 1a. stale-build refusal (no Slurm needed) -------------------------------
mkdir -p "$tmp/repo/engine" "$tmp/repo/build/bin"
cp jobs/lib.sh "$tmp/repo/"
touch -d '2000-01-01' "$tmp/repo/build/bin/plateau"
chmod +x "$tmp/repo/build/bin/plateau"
echo 'int x;' >"$tmp/repo/engine/x.c"
rc=0
out=$(cd "$tmp/repo" && BUILD=build bash -c '. ./lib.sh; pl_require_fresh_build' 2>&1) || rc=$?
check_eval "a binary older than engine/x.c is refused (exit 2, 'run make')" \
  '[[ $rc == 2 ]] && has "run .make." "$out"'
touch "$tmp/repo/build/bin/plateau"
rc=0
(cd "$tmp/repo" && BUILD=build bash -c '. ./lib.sh; pl_require_fresh_build') || rc=$?
check "a binary newer than its sources is accepted" test "$rc" = 0

# ---- the cluster ---------------------------------------------------------------
step "jobs/local/up"
started=1 # stopped on exit whatever happens (even if it was already up: a leftover of a killed run)
up=$(jobs/local/up) || abort "jobs/local/up failed"
echo "$up"
export SLURM_CONF
SLURM_CONF=$(sed -n 's/^export SLURM_CONF=//p' <<<"$up")
check "node is idle after jobs/local/up" \
  test "$(sinfo -h -n "$(hostname -s)" -o %T | head -n 1)" = idle

# states ID: "JobId State" per record of a job or an array
states() { scontrol -o show job "$1" 2>/dev/null | sed -E 's/^JobId=([0-9]+).* JobState=([A-Z_]+).*$/\1 \2/'; }
task_state() { # ARRAY_ID INDEX
  scontrol -o show job "$1" 2>/dev/null | grep -E " ArrayTaskId=$2 " |
    sed -E 's/.* JobState=([A-Z_]+).*/\1/' | head -n 1
}
wait_jobs() { # ID...: until every record is in a final state
  local t0=$SECONDS id s busy
  while :; do
    busy=
    for id in "$@"; do
      s=$(states "$id")
      [[ -n $s ]] || { busy="$id(unknown)"; break; }
      if grep -qvE ' (COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE)$' <<<"$s"; then
        busy=$id
        break
      fi
    done
    [[ -z $busy ]] && return 0
    if ((SECONDS - t0 > WAIT_S)); then
      echo "FAIL timed out after ${WAIT_S}s waiting for job(s) $*; still not finished: $busy" >&2
      scontrol show job "$busy" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}
all_completed() { # ID: every record COMPLETED
  local s
  s=$(states "$1")
  [[ -n $s ]] && ! grep -qv ' COMPLETED$' <<<"$s"
}
show_logs() { # DIR: job logs of a sweep, for a failing run
  local f
  for f in "$1"/slurm/*.out; do
    [[ -e $f ]] || continue
    echo "--- $f"
    tail -n 20 "$f"
  done
}
files_of() { grep -lxF "# point: $2" "$1"/*.tsv 2>/dev/null || true; }
nfiles_of() { files_of "$1" "$2" | grep -c . || true; }
# rows_good FILE [ARRAY_ID]: rows present, each with status ok, check pass and,
# for the collectives, ranks 2; "# end: ok"; Slurm's array id in the metadata.
rows_good() {
  local f=$1 arr=${2:-}
  [[ -f $f ]] || { echo "  no result file" >&2; return 1; }
  grep -qE '^# end: ok( |$)' "$f" || { echo "  $f: no '# end: ok' line" >&2; return 1; }
  if [[ -n $arr ]] && ! grep -qiE "^# slurm_array_job_id: $arr\$" "$f"; then
    echo "  $f: metadata lacks 'slurm_array_job_id: $arr'" >&2
    return 1
  fi
  awk -F'\t' '
    /^#/ { next }
    !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; nf = NF
         if (!c["status"] || !c["check"]) { print "  no status/check columns" > "/dev/stderr"; exit 1 }
         next }
    { n++
      if (NF != nf || $c["status"] != "ok" || $c["check"] != "pass" ||
          (c["ranks"] && c["variant"] && $c["variant"] ~ /^(allreduce|alltoall|sendrecv)$/ && $c["ranks"] != 2)) {
        bad++; print "  bad row: " $0 > "/dev/stderr" } }
    END { if (bad || n == 0) { if (!n) print "  no rows" > "/dev/stderr"; exit 1 }
          printf "  %d rows ok/pass\n", n > "/dev/stderr" }' "$f"
}
report_good() { # RUN_DIR: Markdown table and SVG + PNG chart written
  local d=$1
  [[ -n $(find "$d" -name '*.md' -size +0 2>/dev/null) ]] || { echo "  no .md table under $d" >&2; return 1; }
  [[ -n $(find "$d" -name '*.svg' -size +0 2>/dev/null) ]] || { echo "  no .svg chart under $d" >&2; return 1; }
  [[ -n $(find "$d" -name '*.png' -size +0 2>/dev/null) ]] || { echo "  no .png chart under $d" >&2; return 1; }
  [[ -n $(find "$d" -name '*.md' -exec grep -l '^|' {} +) ]] || { echo "  no Markdown table (| rows) under $d" >&2; return 1; }
}
submit() { # SWEEP [args]: run jobs/submit, echo its output to the log
  local s=$1
  shift
  jobs/submit "$SWEEP_TSV" --sweep "$s" "$@"
}
job_of() { sed -nE "s/^$1 job ([0-9]+).*/\\1/p" <<<"$2" | head -n 1; }

# ---- 1b. a real job refuses a stale build ------------------------------------
mkdir -p "$tmp/stale/bin" results/runs
cp "$BIN" "$tmp/stale/bin/plateau"
touch -d '2000-01-01' "$tmp/stale/bin/plateau"
id=$(BUILD=$tmp/stale SWEEP=test-slurm-stale-$stamp sbatch --parsable -n 2 \
  --output="$tmp/stale.out" jobs/calib.sbatch)
id=${id%%;*}
wait_jobs "$id" || abort "stale-build job $id did not finish"
check_eval "calib.sbatch with a stale build fails with exit 2 and says to run make" \
  'has "ExitCode=2:0" "$(scontrol -o show job "$id")" && has "run .make." "$(cat "$tmp/stale.out")"'
check "... and writes no results" test ! -e "results/runs/test-slurm-stale-$stamp"

# ---- 2. dry run ---------------------------------------------------------------
s1=test-slurm-$stamp
d1=results/runs/$s1
out=$(submit "$s1" --dry-run)
echo "$out"
check_eval "--dry-run lists both points and prints the sbatch lines" \
  'has "^# run fast " "$out" && has "^# run slow " "$out" && has "^sbatch .*--array=0-1 " "$out" && has "afterany:" "$out"'
check_eval "--dry-run submits nothing" \
  '[[ ! -e $d1 && -z $(squeue -h -n "plateau-$s1,plateau-$s1-report" -o %A) ]]'

# ---- 3. the sweep, and calib.sbatch ------------------------------------------
step "submitting $SWEEP_TSV as $s1, and jobs/calib.sbatch"
out=$(submit "$s1") || abort "jobs/submit failed: $out"
echo "$out"
arr=$(job_of array "$out")
rep=$(job_of report "$out")
[[ -n $arr && -n $rep ]] || abort "jobs/submit printed no array/report job id"
c1=test-slurm-calib-$stamp
cal=$(SWEEP=$c1 CALIB_ARGS="--sizes 4Ki:16Ki:x4 --gemm-size 64 -n 3 -w 1" \
  sbatch --parsable -n 2 jobs/calib.sbatch)
cal=${cal%%;*}
echo "# calib.sbatch: job $cal"
step "waiting for jobs $arr (array), $rep (report), $cal (calib.sbatch)"
wait_jobs "$arr" "$rep" "$cal" || { show_logs "$d1"; abort "sweep $s1 did not finish"; }
echo "# job records (JobId State): $(states "$arr" | tr "\n" " ")"
check "array $arr: both tasks COMPLETED" all_completed "$arr"
check "array $arr has exactly 2 tasks" test "$(states "$arr" | grep -c .)" = 2
check "report job $rep COMPLETED" all_completed "$rep"
# the node has this machine's cores and runs one job at a time: the two array
# tasks ran one after the other, each rank with one OpenMP thread (recorded)
node=$(scontrol -o show node "$(hostname -s)")
check_eval "the node is declared with this machine's $(nproc) core(s), one job at a time" \
  'has " CoresPerSocket=$(nproc) " "$node" && has "OverSubscribe=EXCLUSIVE" "$(scontrol -o show partition local)"'
spans=$(scontrol -o show job "$arr" | sed -E 's/.* StartTime=([^ ]+) EndTime=([^ ]+) .*/\1 \2/' | sort)
check_eval "the array's tasks did not share the cores (one ran after the other): $(tr '\n' ' ' <<<"$spans")" \
  '[[ $(wc -l <<<"$spans") == 2 && ! "$(sed -n 2p <<<"$spans" | cut -d" " -f1)" < "$(sed -n 1p <<<"$spans" | cut -d" " -f2)" ]]'
for p in fast slow; do
  check "point $p: one result file" test "$(nfiles_of "$d1" "$p")" = 1
  check "point $p: rows ok/pass, 2 ranks, end ok, Slurm array id recorded" \
    rows_good "$(files_of "$d1" "$p" | head -n 1)" "$arr"
  check_eval "point $p: OMP_NUM_THREADS=1 (one CPU per task) recorded in its metadata" \
    'grep -qx "# env.OMP_NUM_THREADS: 1" "$(files_of "$d1" "$p" | head -n 1)"'
done
check "report of $d1: Markdown table, SVG and PNG chart" report_good "$d1"
check "calib.sbatch job $cal COMPLETED" all_completed "$cal"
check_eval "calib.sbatch: rows ok/pass, 2 ranks, end ok" \
  'rows_good "$(ls results/runs/$c1/*.tsv 2>/dev/null | head -n 1)"'
check "calib.sbatch: its report (table, SVG, PNG)" report_good "results/runs/$c1"
[[ $fail == 0 ]] || show_logs "$d1"

# ---- 4. resume after a point killed mid-run --------------------------------------
s2=test-slurm-resume-$stamp
d2=results/runs/$s2
step "submitting $SWEEP_TSV as $s2; the slow point will be cancelled mid-run"
out=$(submit "$s2") || abort "jobs/submit failed: $out"
echo "$out"
arr=$(job_of array "$out")
rep=$(job_of report "$out")
idx=$(sed -nE 's/^# run slow as array index ([0-9]+).*/\1/p' <<<"$out")
[[ -n $arr && -n $rep && -n $idx ]] || abort "jobs/submit printed no array/report id or no index for the slow point"
t0=$SECONDS
until [[ $(task_state "$arr" "$idx") == RUNNING && -n $(files_of "$d2" slow) ]] &&
  has "^slow +calib +2 +running" "$(jobs/status "$d2")"; do
  if ((SECONDS - t0 > WAIT_S)); then show_logs "$d2"; abort "the slow point never started (task ${arr}_$idx)"; fi
  if [[ $(task_state "$arr" "$idx") =~ ^(COMPLETED|FAILED|CANCELLED)$ ]]; then
    show_logs "$d2"
    abort "the slow point ended before it could be killed; make it slower in $SWEEP_TSV"
  fi
  sleep 0.2
done
sleep 0.5
echo "# the slow point is running ($(files_of "$d2" slow)); scancel ${arr}_$idx"
scancel "${arr}_$idx"
step "waiting for jobs $arr (array), $rep (report)"
wait_jobs "$arr" "$rep" || { show_logs "$d2"; abort "sweep $s2 did not finish after the cancel"; }
echo "# job records (JobId State): $(states "$arr" | tr "\n" " ")"
check "killed task ${arr}_$idx is CANCELLED" test "$(task_state "$arr" "$idx")" = CANCELLED
out=$(jobs/status "$d2")
echo "$out"
check_eval "jobs/status: fast done, slow failed (CANCELLED)" \
  'has "^fast +calib +2 +done" "$out" && has "^slow +calib +2 +failed +slurm ${arr}_$idx CANCELLED" "$out"'
check_eval "the report job's points.md lists the cancelled point" \
  'grep -q "| slow | calib | 2 | failed |" "$d2/report/points.md"'
check "report job $rep ran anyway (afterany) and COMPLETED" all_completed "$rep"
check "fast point recorded" rows_good "$(files_of "$d2" fast | head -n 1)" "$arr"
check_eval "killed point left a result file without '# end: ok'" \
  'f=$(files_of "$d2" slow | head -n 1); [[ -n $f ]] && ! grep -q "^# end: ok" "$f"'
out=$(submit "$s2" --dry-run)
echo "$out"
check_eval "dry run of the resubmission: skips fast, runs only slow" \
  'has "^# skip fast" "$out" && has "^# run slow " "$out" && ! has "^# run fast " "$out" && has "--array=0-0 " "$out"'
step "resubmitting $s2"
out=$(submit "$s2") || abort "jobs/submit (resume) failed: $out"
echo "$out"
arr=$(job_of array "$out")
rep=$(job_of report "$out")
[[ -n $arr && -n $rep ]] || abort "the resubmission printed no array/report job id"
wait_jobs "$arr" "$rep" || { show_logs "$d2"; abort "the resubmission of $s2 did not finish"; }
check_eval "resubmitted array $arr ran one task and it COMPLETED" \
  '[[ $(states "$arr" | grep -c .) == 1 ]] && all_completed "$arr"'
check "report job $rep COMPLETED" all_completed "$rep"
check "fast point was not run again (one result file)" test "$(nfiles_of "$d2" fast)" = 1
check "slow point: the killed file plus one complete file" test "$(nfiles_of "$d2" slow)" = 2
check "slow point recorded now: rows ok/pass, end ok" \
  rows_good "$(for f in $(files_of "$d2" slow); do grep -q '^# end: ok' "$f" && echo "$f"; done | head -n 1)" "$arr"
check "report of $d2: Markdown table, SVG and PNG chart" report_good "$d2"
out=$(submit "$s2") || abort "jobs/submit (all recorded) failed: $out"
echo "$out"
rep=$(job_of report "$out")
check_eval "all points recorded: only the report job is submitted" \
  '[[ -n $rep ]] && has "2 recorded, 0 infeasible, 0 to run" "$out" && ! has "^array job" "$out"'
if [[ -n $rep ]]; then
  wait_jobs "$rep" || true
  check "that report job COMPLETED" all_completed "$rep"
fi

# ---- 5. per-point resources, quoting, validation ----------------------------------
s3=test-slurm-shapes-$stamp
d3=results/runs/$s3
cat >"$tmp/shapes.tsv" <<'EOF'
# three shapes (jobs/test_slurm.sh)
# machine: cpu
point	bench	nodes	gpus_per_node	ntasks	time	launch	args
one	calib	1	0	1	00:05:00	mpi	--sizes 4Ki --gemm-size 32 -n 2 -w 0 --tests h2d
gpus	calib	1	2	2	00:06:00	mpi	--sizes 4Ki --gemm-size 32 -n 2 -w 0 --tests "h2d,allreduce"
search	maxbatch	1	0	2	00:07:00	single	--trial-backend cpu --bench sco --preset small --budgets 0 --mem-limit 2Mi --step 256 --start 256 --max-trials 1 -n 1 -w 0 --launcher '{launch}'
EOF
step "submitting three shapes as $s3"
out=$(jobs/submit "$tmp/shapes.tsv" --sweep "$s3") || abort "jobs/submit (shapes) failed: $out"
echo "$out"
mapfile -t arrs < <(sed -nE 's/^array job ([0-9]+):.*/\1/p' <<<"$out")
rep=$(job_of report "$out")
check "three arrays and a report job" test "${#arrs[@]}:${rep:+y}" = "3:y"
if [[ ${#arrs[@]} == 3 ]]; then
  wait_jobs "${arrs[@]}" "$rep" || { show_logs "$d3"; abort "sweep $s3 did not finish"; }
  rec() { scontrol -o show job "$1" 2>/dev/null | head -n 1; }
  check_eval "array 1: 1 node, 1 task, no GPU, 5 min" \
    'r=$(rec ${arrs[0]}); has "NumNodes=1 " "$r" && has "NumTasks=1 " "$r" && has "TimeLimit=00:05:00" "$r" && ! has "gpu" "$r"'
  check_eval "array 2: 1 node, 2 tasks, 2 GPUs per node, 6 min" \
    'r=$(rec ${arrs[1]}); has "NumTasks=2 " "$r" && has "TimeLimit=00:06:00" "$r" && has "gres.gpu:2|gpu:2" "$r"'
  check_eval "array 3: 2 tasks for the single process and its trials, 7 min" \
    'r=$(rec ${arrs[2]}); has "NumTasks=2 " "$r" && has "TimeLimit=00:07:00" "$r"'
  for a in "${arrs[@]}"; do check "array $a COMPLETED" all_completed "$a"; done
  out=$(jobs/status "$d3")
  echo "$out"
  check_eval "jobs/status: every point done, 100%" 'has "3 points: 3 done, 0 failed.*\(100% done\)" "$out"'
  check_eval "the quoted launcher reached maxbatch as one argument (its trial ran through srun)" \
    'grep -q "^# argv: .*'"'"'srun --mpi=pmix --nodes=1 --ntasks=2 --ntasks-per-node=2 --overlap'"'"'" "$d3"/maxbatch.*.tsv &&
     grep -q "^# slurm_job_id: " $(grep -l "^# bench: sco" "$d3"/*.tsv | head -n 1)'
  check "report job $rep COMPLETED" all_completed "$rep"
fi
printf 'point\tbench\tntasks\targs\nbad\tcalib\t1\t--sizes 12Q\n' >"$tmp/refused.tsv"
rc=0
out=$(jobs/submit "$tmp/refused.tsv" --sweep "$s3-refused" 2>&1) || rc=$?
check_eval "a point refused by the program is not submitted (exit 2, its message)" \
  '[[ $rc == 2 ]] && has "12Q" "$out" && [[ -z $(squeue -h -n "plateau-$s3-refused" -o %A) ]]'

# ---- 6. multi-node, checked by the scheduler ---------------------------------------
printf '# 64 GPUs\n# machine: cpu\npoint\tbench\tnodes\tgpus_per_node\tntasks\ttime\targs\nbig\tcalib\t8\t8\t64\t02:00:00\t--backend cuda --sizes 4Ki\n' >"$tmp/multi.tsv"
rc=0
out=$(jobs/submit "$tmp/multi.tsv" --sweep "$s3-multi" --test-only -p shape 2>&1) || rc=$?
echo "$out"
check_eval "8 nodes x 8 GPUs: accepted by sbatch --test-only in partition shape" \
  '[[ $rc == 0 ]] && has "test-only: sbatch: Job [0-9]+ to start at .* using 64 processors on nodes shape\[1-8\]" "$out"'
check_eval "... and nothing queued or written" \
  '[[ -z $(squeue -h -n "plateau-$s3-multi" -o %A) && ! -e results/runs/$s3-multi ]]'
sed -i 's/\t8\t8\t64\t/\t9\t8\t72\t/' "$tmp/multi.tsv"
rc=0
out=$(jobs/submit "$tmp/multi.tsv" --sweep "$s3-multi" --test-only -p shape 2>&1) || rc=$?
check_eval "9 nodes: refused by the scheduler (exit 2)" '[[ $rc == 2 ]] && has "refused" "$out"'

if [[ $fail == 0 && ${KEEP:-0} != 1 ]]; then
  rm -rf "$d1" "$d2" "$d3" "results/runs/$c1"
  rm -f results/runs/slurm-plateau-calib-"$cal".out
else
  echo "# run directories kept: $d1 $d2 results/runs/$c1"
fi
finish
