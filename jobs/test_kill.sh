#!/usr/bin/env bash
# jobs/test_kill.sh — a jobs/run stopped in the middle of a point leaves no
# process behind, and nothing that doubles or blocks the next run
# (jobs/lib.sh, pl_point_exec and the locks).  The point: 2 ranks of calib
# that would run for minutes (sized for 2 cores: each case runs it a few
# seconds).
#   1. SIGTERM to jobs/run: it exits 143 within PL_KILL_WAIT (+ a margin); no
#      process of the point is left (none in its session, none naming the run
#      directory); its state ends "end ... 143", its log says why, jobs/status
#      says failed with exit 143.  SIGINT and SIGHUP: the same, exit 130, 129.
#   2. SIGKILL to jobs/run: its point's processes live on (nothing can stop
#      them from a killed process); jobs/status says running; a rerun, and its
#      dry run, refuse at once (exit 2, "still running", naming the session)
#      and start nothing; once those processes are stopped (here, by the
#      session the lock names), the lock file left behind blocks nothing: the
#      rerun runs the point again.
# Usage: BUILD=build bash jobs/test_kill.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BUILD=${BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export BACKEND=cpu PL_KILL_WAIT=10
BIN=$BUILD/bin/plateau
[[ -x $BIN ]] || { echo "test_kill.sh: $BIN not built"; exit 1; }
. jobs/lib.sh
tmp=$(mktemp -d /tmp/pl_test_kill.XXXXXX)
sw=test-kill-$(date -u +%Y%m%dT%H%M%S)-$$
d=results/runs/$sw
npass=0 nfail=0
pass() { npass=$((npass + 1)); }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
check() { if eval "$2"; then pass; else fail "$1"; fi; }
orphans() { # the processes of this test's point: by session (the lock) and by the run directory in their command
  local sid
  sid=$(awk '{print $2}' "$d/logs/slow.lock" 2>/dev/null)
  { [[ -n $sid ]] && pl_session_pids "$sid"; pgrep -f -- "-o $d --point" || true; } | sort -u
}
cleanup() {
  local p
  for p in $(orphans); do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp"
  [[ $nfail == 0 ]] && rm -rf "$d"
  return 0
}
trap cleanup EXIT

printf '# the point of jobs/test_kill.sh\n# machine: cpu\npoint\tbench\tntasks\ttime\targs\nslow\tcalib\t2\t00:05:00\t--sizes 4Ki:64Ki:x2 --gemm-size 32 -n 1000000 -w 0\n' >"$tmp/kill.tsv"

# start: jobs/run in the background, until its point's ranks have written
# their result file (the bench is running); its pid in $jp
start() {
  local n0
  n0=$(ls "$d"/calib.*.tsv 2>/dev/null | wc -l)
  # job control on: a background job of a script ignores SIGINT otherwise
  set -m
  jobs/run "$tmp/kill.tsv" --sweep "$sw" --no-report >"$tmp/run.out" 2>&1 &
  jp=$!
  set +m
  for _ in $(seq 600); do
    (($(ls "$d"/calib.*.tsv 2>/dev/null | wc -l) > n0)) && [[ -n $(orphans) ]] && return 0
    kill -0 "$jp" 2>/dev/null || break
    sleep 0.1
  done
  fail "the point did not start"
  cat "$tmp/run.out"
  return 1
}

# ---- 1. SIGTERM, SIGINT, SIGHUP ------------------------------------------------
for sig in TERM:143 INT:130 HUP:129; do
  name=${sig%%:*} want=${sig#*:}
  start || break
  t0=$SECONDS
  kill "-$name" "$jp"
  wait "$jp"
  rc=$?
  check "SIG$name: jobs/run exits $want (got $rc)" '[[ $rc == "$want" ]]'
  check "SIG$name: within ${PL_KILL_WAIT}s + 5s (took $((SECONDS - t0))s)" '((SECONDS - t0 <= PL_KILL_WAIT + 5))'
  left=$(orphans)
  check "SIG$name: no process of the point left (left: $left)" '[[ -z $left ]]'
  check "SIG$name: its state ends 'end ... $want'" '[[ $(tail -n 1 "$d/logs/slow.state") =~ ^end\ [^\ ]+\ $want$ ]]'
  check "SIG$name: its log says the point was stopped" 'grep -q "^# exit $want (SIG$name to the run: the point was stopped)" "$d/logs/slow.log"'
  st=$(jobs/status "$d" | awk '$1 == "slow" {print $4}')
  check "SIG$name: jobs/status says failed (got $st)" '[[ $st == failed ]] && jobs/status "$d" | grep "^slow" | grep -q "exit $want"'
done

# ---- 2. SIGKILL ------------------------------------------------------------------
if start; then
  kill -KILL "$jp"
  wait "$jp" 2>/dev/null
  sleep 0.5
  check "SIGKILL: the point's processes outlive jobs/run (nothing could stop them)" '[[ -n $(orphans) ]]'
  starts=$(grep -c '^# ---- ' "$d/logs/slow.log")
  st=$(jobs/status "$d" | awk '$1 == "slow" {print $4}')
  check "SIGKILL: jobs/status says running (got $st)" '[[ $st == running ]] && jobs/status "$d" | grep "^slow" | grep -q "is gone"'
  sid=$(awk '{print $2}' "$d/logs/slow.lock")
  jobs/run "$tmp/kill.tsv" --sweep "$sw" --no-report >"$tmp/rerun.out" 2>&1
  rc=$?
  check "SIGKILL: a rerun refuses (exit 2, got $rc), naming the running point and its session" \
    '[[ $rc == 2 ]] && grep -q "point slow of sweep $sw is still running: session $sid on .*(its processes: ps -s $sid)" "$tmp/rerun.out"'
  jobs/run "$tmp/kill.tsv" --sweep "$sw" --no-report --dry-run >"$tmp/dry.out" 2>&1
  rc=$?
  check "SIGKILL: its dry run refuses too (exit 2, got $rc)" '[[ $rc == 2 ]] && grep -q "point slow of sweep $sw is still running" "$tmp/dry.out"'
  check "SIGKILL: no second copy started" '[[ $(grep -c "^# ---- " "$d/logs/slow.log") == "$starts" ]]'
  # stop the orphans (as a user would, by the session the message names)
  pl_session_kill TERM "$sid"
  for _ in $(seq 100); do [[ -z $(orphans) ]] && break; sleep 0.1; done
  pl_session_kill KILL "$sid"
  check "the orphans are gone" '[[ -z $(orphans) ]]'
  check "their lock file is left behind" '[[ -f $d/logs/slow.lock && -f $d/run.lock ]]'
  # a lock left by dead processes blocks nothing: the rerun runs the point
  # (stopped again by its deadline)
  jobs/run "$tmp/kill.tsv" --sweep "$sw" --no-report --deadline 3 >"$tmp/rerun2.out" 2>&1
  rc=$?
  check "after them, a rerun runs the point again (exit 1 at its deadline, got $rc)" \
    '[[ $rc == 1 && $(grep -c "^# ---- " "$d/logs/slow.log") == $((starts + 1)) ]]'
  check "... and leaves nothing behind" '[[ -z $(orphans) ]]'
fi
[[ $nfail == 0 ]] || { echo "--- last jobs/run output"; tail -20 "$tmp/run.out"; tail -n 3 "$tmp"/rerun*.out "$tmp/dry.out" 2>/dev/null | cut -c1-400; }
echo "test_kill.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
