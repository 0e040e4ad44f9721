#!/usr/bin/env bash
# jobs/test_faults.sh — fault injection on the sweep path: a sweep survives any
# single fault, resumed as a user would resume it.  Each seed runs a sweep of
# two tiny CPU points (calib, 2 ranks, all-reduce and send-recv: about a
# second each) into a run directory of its own and, at a moment the seed
# chooses (which point, after how many of its result rows, which rank), injects one fault:
#   rank     a rank of the point is SIGKILLed            (jobs/run)
#   driver   jobs/run itself is SIGKILLed                (jobs/run)
#   fsize    the point's ranks may write no further than a few hundred bytes
#            past where their result file stands (prlimit --fsize on the
#            running ranks): the next write hits EFBIG     (jobs/run)
#   hang     a rank is SIGSTOPped, so that the other waits in a collective
#            past the watchdog (PLATEAU_COMM_TIMEOUT) and aborts the job
#                                                        (jobs/run)
#   requeue  the point's array task is requeued (scontrol requeue), while it
#            runs or after it ended                      (local Slurm)
#   srank    a rank of the point is SIGKILLed            (local Slurm)
# (seed s gets kind number (s - 1) mod 6 of that list; the rest is drawn from
# RANDOM seeded with s).  Right after the fault: every point jobs/status
# calls failed says why (an exit code, or killed while running), none that
# ran is "not run".  Then the sweep is resumed (jobs/run again; jobs/submit
# again when a point is left) and at the end:
#   - every point is done, and recorded by exactly one complete result file;
#   - a torn result file (no "# end:" line) is never counted: jobs/manifest
#     --check names it unfinished, `plateau report` leaves its rows out as superseded;
#   - `plateau report` exits 0 and `plateau compare` with a clean run of the
#     same sweep (times and rates skipped: CPU times vary) passes, with no row
#     NEW or MISSING;
#   - no process of the run is left, and nothing outside the run directory
#     changed (the repository's file list, sizes and times, before and after).
# A failing seed keeps its run directory and prints how to rerun it alone.
# Knobs: SEEDS (default 20: seeds 1..20; SEEDS=N: 1..N, SEEDS=A-B, SEEDS=7,12),
# FAULT_SLURM=0 leaves out the Slurm kinds (CI runs them: make test is root),
# KEEP=1 keeps every run directory (results/runs/test-faults-*).  The local
# Slurm (jobs/local/up) is stopped at the end unless it was up already.
# Usage: BUILD=build bash jobs/test_faults.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export BUILD=${BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export BACKEND=cpu PL_KILL_WAIT=3
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS PLATEAU_COMM_TIMEOUT
BIN=$BUILD/bin/plateau
[[ -x $BIN ]] || { echo "test_faults.sh: $BIN not built"; exit 1; }
. jobs/lib.sh
seeds=${SEEDS:-20}
if [[ $seeds =~ ^[0-9]+$ ]]; then seeds=$(seq "$seeds")
elif [[ $seeds =~ ^([0-9]+)-([0-9]+)$ ]]; then seeds=$(seq "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
else seeds=${seeds//,/ }; fi
slurm=${FAULT_SLURM:-1} keep=${KEEP:-0}
tmp=$(mktemp -d /tmp/pl_test_faults.XXXXXX)
stamp=$(date -u +%Y%m%dT%H%M%S)-$$
prefix=test-faults-$stamp
npass=0 nfail=0 seedfail=0 started=0
pass() { npass=$((npass + 1)); }
fail() { echo "FAIL: seed $seed ($kind): $*"; nfail=$((nfail + 1)); seedfail=1; }
check() { if eval "$2"; then pass; else fail "$1"; fi; }
cleanup() {
  if [[ $started == 1 ]]; then jobs/local/down >/dev/null 2>&1 || echo "jobs/local/down failed"; fi
  rm -rf "$tmp"
  [[ $nfail == 0 && $keep == 0 ]] && rm -rf results/runs/"$prefix"-*
  return 0
}
trap cleanup EXIT
seed=- kind=-

printf '%s\n' '# the sweep of jobs/test_faults.sh: two tiny points, 2 ranks each' '# machine: cpu' \
  $'point\tbench\tntasks\ttime\targs' >"$tmp/faults.tsv"
points=(a b)
for p in "${points[@]}"; do
  printf '%s\tcalib\t2\t00:01:00\t--tests allreduce,sendrecv --sizes 4Ki:64Ki:x4 --gemm-size 16 -n 800 -w 1\n' "$p" >>"$tmp/faults.tsv"
done
np=${#points[@]}

# snapshot: the repository's files (path, size, time) and folders, but
# for this test's run directories
snapshot() {
  find . -path ./.git -prune -o -path "./results/runs/$prefix-*" -prune -o \
    \( -type f -printf '%p %s %T@\n' \) -o \( ! -type d -printf '%p\n' \) -o -printf '%p/\n' | sort
}
# the processes of run directory D (its ranks and launchers name it: -o D)
procs() { pgrep -f -- "-o $1 --point" || true; }
# ranks D ID: the pids of the point's ranks (the plateau processes)
ranks() { ps -e -o pid=,comm=,args= | awk -v d="-o $1 --point $2" '$2 == "plateau" && index($0, d) {print $1}'; }
# wait_file D ID: until a result file records the point (its ranks run); 1
# when none in 180 s (a shared local Slurm may be busy with another test's jobs)
wait_file() {
  local i
  for ((i = 0; i < 1800; i++)); do
    grep -qlxF -- "# point: $2" "$1"/*.tsv 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# wait_rows D ID K: until the point's last attempt has begun its row K+1 (of
# 6; its "[calib] point N/6" lines in its log), or its ranks are gone: the fault's moment follows the point's progress,
# not the clock, whatever the machine's load
wait_rows() {
  local i n
  for ((i = 0; i < 3000; i++)); do
    n=$(awk '/^# ---- / {n = 0} /^\[calib\] point [0-9]+\/[0-9]+ / {n++} END {print n + 0}' "$1/logs/$2.log" 2>/dev/null)
    ((${n:-0} > $3)) && return 0
    [[ -n $(ranks "$1" "$2") ]] || return 0
    sleep 0.02
  done
}
# complete D ID: how many complete result files record the point
complete() {
  local f n=0
  for f in $(grep -lxF -- "# point: $2" "$1"/*.tsv 2>/dev/null); do grep -qE '^# end: ok( |$)' "$f" && n=$((n + 1)); done
  echo "$n"
}
# wait_quiet D: until no process of the run directory is left (60 s)
wait_quiet() {
  local i
  for ((i = 0; i < 600; i++)); do
    [[ -z $(procs "$1") ]] && return 0
    sleep 0.1
  done
  return 1
}

# after_fault D: what jobs/status says right after the fault, before any resume
after_fault() {
  local d=$1 id st detail why
  while IFS=$'\t' read -r id _ _ st detail; do
    [[ $id == point ]] && continue
    echo "#   after the fault: $id $st${detail:+: $detail}"
    if [[ $st == failed ]]; then
      check "after the fault, failed point $id says why (got: $detail)" '[[ $detail =~ exit\ [0-9]+|killed\ while\ running ]]'
      # the fault itself, in the last error line jobs/status shows
      case $kind in
        rank | srank) why='Killed|signal 9' ;;
        fsize) why='File size limit exceeded|signal 25' ;;
        hang) why='did not complete within' ;;
        *) why=. ;;
      esac
      check "after the fault, failed point $id names the fault ($why) in its last error (got: $detail)" \
        '[[ $detail =~ last\ error:.*($why) ]]'
    fi
    if [[ -f $d/logs/$id.state ]]; then
      check "after the fault, point $id, which started, is not 'not run'" '[[ $st != "not run" ]]'
    fi
  done < <(jobs/status "$d" --write --quiet >/dev/null 2>&1; grep -v '^#' "$d/points.status" 2>/dev/null)
}

# final D REF: the checks at the end of a seed
final() {
  local d=$1 ref=$2 id n f st out rc
  for id in "${points[@]}"; do
    st=$(jobs/status "$d" 2>/dev/null | awk -v p="$id" '$1 == p {print $4}')
    n=$(complete "$d" "$id")
    check "point $id done (status: $st) by exactly one complete result file (got $n)" '[[ $st == done && $n == 1 ]]'
  done
  check "jobs/status counts $np done, 0 failed" 'jobs/status "$d" --quiet | grep -q ": $np points: $np done, 0 failed, 0 running, 0 pending, 0 infeasible, 0 not run"'
  rc=0
  out=$(jobs/manifest --check "$d" 2>&1 >/dev/null) || rc=$? # the run has no MANIFEST.md: exit 1 whatever
  for f in "$d"/*.tsv; do
    [[ -e $f ]] || continue
    if grep -q '^# end:' "$f"; then
      check "jobs/manifest does not call the complete $(basename "$f") unfinished" '[[ $out != *"$f is unfinished"* ]]'
    else
      check "jobs/manifest refuses the torn $(basename "$f")" '[[ $out == *"$f is unfinished"* ]]'
    fi
  done
  rc=0
  out=$("$BIN" report "$d" 2>&1 >/dev/null) || rc=$?
  check "plateau report exits 0 (got $rc)" '[[ $rc == 0 ]]'
  for f in "$d"/*.tsv; do
    [[ -e $f ]] || continue
    grep -q '^# end:' "$f" && continue
    check "plateau report leaves the torn $(basename "$f") out, superseded" '[[ $out == *"$f: unfinished (no '"'"'# end:'"'"' line) and superseded by"* ]]'
  done
  rc=0
  out=$("$BIN" compare "$d" "$ref" --tol time=1000 --tol rate=0.999 2>&1) || rc=$?
  check "plateau compare with a clean run passes (exit $rc), no row NEW or MISSING" \
    '[[ $rc == 0 ]] && ! grep -qE "(^| )(NEW|MISSING)( |$)" <<<"$out"'
  [[ $rc == 0 ]] || tail -n 5 <<<"$out"
  check "no process of the run is left" '[[ -z $(procs "$d") ]]'
}

# ---- a clean run: what every seed's end must compare with -----------------------------
before=$(snapshot)
ref=results/runs/$prefix-clean
jobs/run "$tmp/faults.tsv" --sweep "$prefix-clean" --no-report >"$tmp/clean.out" 2>&1 ||
  { echo "FAIL: the clean run failed"; tail -n 20 "$tmp/clean.out"; exit 1; }


kinds=(rank driver fsize hang requeue srank)
if [[ $slurm == 1 ]]; then
  [[ $(id -u) == 0 ]] || { echo "FAIL: the Slurm kinds need root (FAULT_SLURM=0 leaves them out)"; exit 1; }
fi

# ---- jobs/run kinds -----------------------------------------------------------------------
run_seed() {
  # shellcheck disable=SC2034 # killed: read by check (0: the run had ended before the kill)
  local d=$1 target=$2 wait_ds=$3 jp guard rc r victims killed=0
  local env=() f lim
  [[ $kind == hang ]] && env=(PLATEAU_COMM_TIMEOUT=4)
  # env execs jobs/run: $jp is the driver itself
  env "${env[@]}" jobs/run "$tmp/faults.tsv" --sweep "$(basename "$d")" --no-report >"$tmp/fault.out" 2>&1 &
  jp=$!
  (sleep 240 && kill -TERM "$jp") 2>/dev/null & # a bound, should the fault hang the run
  guard=$!
  if ! wait_file "$d" "$target"; then
    fail "point $target never started"
  else
    wait_rows "$d" "$target" $((wait_ds % 6))
    mapfile -t victims < <(ranks "$d" "$target")
    r=${victims[$((RANDOM % (${#victims[@]} > 0 ? ${#victims[@]} : 1)))]:-}
    case $kind in
      rank) [[ -n $r ]] && kill -KILL "$r" ;;
      hang) [[ -n $r ]] && kill -STOP "$r" ;;
      driver) kill -KILL "$jp" 2>/dev/null && killed=1 ;;
      fsize)
        f=$(grep -lxF -- "# point: $target" "$d"/*.tsv 2>/dev/null | tail -n 1)
        lim=$(($(stat -c %s "$f" 2>/dev/null || echo 0) + RANDOM % 400))
        for r in "${victims[@]}"; do prlimit --pid "$r" --fsize="$lim" 2>/dev/null; done
        r= ;;
    esac
    echo "# seed $seed: $kind on point $target after row $((wait_ds % 6))${r:+ (rank pid $r of ${victims[*]})}${lim:+ (ranks ${victims[*]} limited to $lim bytes)}"
  fi
  wait "$jp" 2>/dev/null
  rc=$?
  kill "$guard" 2>/dev/null
  wait "$guard" 2>/dev/null
  # a killed driver leaves its point running (nothing can stop it): wait
  # for it as a user would (jobs/status says running until it ends)
  wait_quiet "$d" || fail "the run's processes did not end in 60 s: $(procs "$d" | tr '\n' ' ')"
  case $kind in
    driver) check "the killed jobs/run exits 137 (got $rc)" '[[ $rc == 137 || ($killed == 0 && $rc == 0) ]]' ;;
    *) check "the faulted jobs/run ends by itself (exit 0 or 1, got $rc)" '[[ $rc == 0 || $rc == 1 ]]' ;;
  esac
  echo "# [$((SECONDS - t0))s] fault run over"
  after_fault "$d"
  rc=0
  jobs/run "$tmp/faults.tsv" --sweep "$(basename "$d")" --no-report >"$tmp/resume.out" 2>&1 || rc=$?
  echo "# [$((SECONDS - t0))s] resumed"
  check "the resumed jobs/run exits 0 (got $rc)" '[[ $rc == 0 ]]'
  [[ $rc == 0 ]] || tail -n 8 "$tmp/resume.out"
}

# ---- Slurm kinds --------------------------------------------------------------------------
# wait_jobs ID...: until every record of the jobs is in a final state (300 s)
wait_jobs() {
  local i id busy
  for ((i = 0; i < 1500; i++)); do
    busy=0
    for id in "$@"; do
      scontrol -o show job "$id" 2>/dev/null | grep -qvE ' JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) ' && busy=1
    done
    ((busy)) || return 0
    sleep 0.2
  done
  return 1
}
# submit D: jobs/submit the sweep into D; the array and report job ids in $job and $rep
submit() {
  local out
  job='' rep=''
  out=$(jobs/submit "$tmp/faults.tsv" --sweep "$(basename "$1")" 2>&1) || { fail "jobs/submit failed: $(tail -n 3 <<<"$out")"; return 1; }
  job=$(sed -n 's/^array job \([0-9]*\):.*/\1/p' <<<"$out")
  rep=$(sed -n 's/^report job \([0-9]*\).*/\1/p' <<<"$out")
  [[ -n $rep ]] || { fail "jobs/submit printed no report job: $(tail -n 3 <<<"$out")"; return 1; }
}
slurm_seed() {
  local d=$1 target=$2 wait_ds=$3 idx r victims rc job rep
  submit "$d" || return
  idx=$(awk -F'\t' -v p="$target" '$3 == p {print $2}' "$d/slurm/jobs.tsv" | tail -n 1)
  if ! wait_file "$d" "$target"; then
    fail "point $target never started"
  else
    wait_rows "$d" "$target" $((wait_ds % 6))
    case $kind in
      requeue)
        # a requeued job waits for a begin time minutes ahead; a user in a
        # hurry (and this test) lets it start at once
        # (refused while the task is completing: tried again for 5 s)
        for _ in $(seq 50); do
          rc=0
          scontrol requeue "${job}_$idx" 2>/dev/null && break
          rc=$?
          sleep 0.1
        done
        check "scontrol requeue ${job}_$idx works (exit $rc)" '[[ $rc == 0 ]]'
        for _ in $(seq 100); do
          scontrol -o show job "${job}_$idx" 2>/dev/null | grep -q ' JobState=PENDING ' && break
          sleep 0.1
        done
        scontrol update JobId="${job}_$idx" StartTime=now 2>/dev/null || true
        echo "# seed $seed: requeue of point $target (${job}_$idx) after row $((wait_ds % 6))" ;;
      srank)
        mapfile -t victims < <(ranks "$d" "$target")
        r=${victims[$((RANDOM % (${#victims[@]} > 0 ? ${#victims[@]} : 1)))]:-}
        [[ -n $r ]] && kill -KILL "$r"
        echo "# seed $seed: srank on point $target after row $((wait_ds % 6))${r:+ (rank pid $r of ${victims[*]})}" ;;
    esac
  fi
  wait_jobs "$job" "$rep" || fail "the jobs did not end in 300 s"
  echo "# [$((SECONDS - t0))s] fault run over"
  wait_quiet "$d" || fail "the run's processes did not end in 60 s: $(procs "$d" | tr '\n' ' ')"
  after_fault "$d"
  # resume: submit again when a point is left (only those are submitted)
  if [[ $(jobs/status "$d" --quiet) != *": $np points: $np done,"* ]]; then
    submit "$d" || return
    wait_jobs ${job:+"$job"} "$rep" || fail "the resumed jobs did not end in 300 s"
  fi
  echo "# [$((SECONDS - t0))s] resumed"
}

if [[ $slurm == 1 ]]; then
  up=$(jobs/local/up) || { echo "FAIL: jobs/local/up failed"; exit 1; }
  # a cluster that was up already is someone else's (another test): left up
  [[ $up == *"already up"* ]] || started=1
  export SLURM_CONF
  SLURM_CONF=$(sed -n 's/^export SLURM_CONF=//p' <<<"$up")
fi

for seed in $seeds; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "test_faults.sh: SEEDS: '$seed' is not a seed (integers)"; exit 2; }
  kind=${kinds[$(((seed - 1) % ${#kinds[@]}))]}
  [[ $slurm == 1 || ($kind != requeue && $kind != srank) ]] || continue
  RANDOM=$seed
  target=${points[$((RANDOM % np))]} wait_ds=$((RANDOM % 12))
  d=results/runs/$prefix-s$seed
  seedfail=0 t0=$SECONDS
  case $kind in
    requeue | srank) slurm_seed "$d" "$target" "$wait_ds" ;;
    *) run_seed "$d" "$target" "$wait_ds" ;;
  esac
  echo "#   torn result files: $(grep -L '^# end:' "$d"/*.tsv 2>/dev/null | grep -c . || true)"
  final "$d" "$ref"
  echo "# seed $seed ($kind): $([[ $seedfail == 0 ]] && echo ok || echo "FAILED: rerun it alone with SEEDS=$seed-$seed; its run directory: $d") ($((SECONDS - t0))s)"
  [[ $seedfail == 0 && $keep == 0 ]] && rm -rf "$d"
done
after=$(snapshot)
seed=- kind=-
check "nothing outside the run directories changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -n 5 | tr '\n' ' ')" \
  '[[ $before == "$after" ]]'
echo "test_faults.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
