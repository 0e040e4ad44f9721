#!/usr/bin/env bash
# jobs/test_sweeps.sh — the sweep run path without Slurm (jobs/test_slurm.sh
# has the Slurm side):
#   1. the argument splitter: quotes, escapes, nothing expanded, bad quoting;
#   2. the sweep reader refuses malformed files with the line and the reason;
#   3. jobs/run on a CPU sweep: a plain point, a point whose quoted argument
#      has spaces (maxbatch's --launcher '{launch}', one word), an infeasible
#      point (not run, listed), a point killed at its time limit (failed, with
#      its last error line); jobs/status and report/points.md say so; the
#      rerun resumes (only the failed point runs again); --machine filters;
#   4. a point the program refuses (bad option) stops jobs/run and jobs/submit
#      before anything runs, with the program's message;
#   5. every shipped sweep (jobs/sweeps/*.tsv) parses, has its header comment
#      and machine kind, and every point passes `plateau bench --dry-run` on
#      its ranks (sweeps that require a bench this build lacks are checked for
#      the refusal instead);
#   5c. a GPU point is planned for its machine kind (jobs/machines.tsv), from
#      a host without a GPU, and says so; on a GPU host of a kind not listed,
#      for its GPU;
#   6. a multi-node GPU point rendered (jobs/submit --render; a relative
#      directory is the caller's) and its
#      point.sbatch dry launch: srun --mpi=pmix with the point's nodes, tasks,
#      one task per GPU, --gpu-bind=none, NCCL_NVLS_ENABLE=0 and a caller's
#      NCCL_* passed through; -p/-A/-q on every sbatch line.
# Usage: BUILD=build bash jobs/test_sweeps.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BUILD=${BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export BACKEND=cpu
BIN=$BUILD/bin/plateau
[[ -x $BIN ]] || { echo "test_sweeps.sh: $BIN not built"; exit 1; }
tmp=$(mktemp -d /tmp/pl_test_sweeps.XXXXXX)
stamp=$(date -u +%Y%m%dT%H%M%S)-$$
runs=()
cleanup() {
  rm -rf "$tmp"
  [[ $nfail == 0 ]] && for r in "${runs[@]}"; do rm -rf "results/runs/$r"; done
}
trap cleanup EXIT
npass=0 nfail=0
pass() { npass=$((npass + 1)); }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
check() { if eval "$2"; then pass; else fail "$1"; fi; }
. jobs/lib.sh

# ---- 1. words -------------------------------------------------------------------
words() { pl_split_args "$1" && printf '[%s]' "${PL_ARGV[@]}"; }
# shellcheck disable=SC2016
check "split: quotes and escapes" \
  '[[ $(words "a \"b c\" '"'"'d e'"'"' f\\ g \"h\\\"i\" '"''"' x") == "[a][b c][d e][f g][h\"i][][x]" ]]'
# shellcheck disable=SC2016
check "split: nothing expanded" '[[ $(words "\$HOME \`id\` * ~") == "[\$HOME][\`id\`][*][~]" ]]'
check "split: tabs and runs of blanks separate" '[[ $(words $'"'"'a\t b   c'"'"') == "[a][b][c]" ]]'
check "split: unbalanced quote refused" '! pl_split_args "a \"b" && [[ $PL_ERR == *unbalanced* ]]'
check "split: trailing backslash refused" '! pl_split_args "a\\" && [[ $PL_ERR == *backslash* ]]'

# ---- 2. the reader ---------------------------------------------------------------
bad() { # NAME EXPECT CONTENT: pl_sweep_read fails with EXPECT in the message
  printf '%b' "$3" >"$tmp/bad.tsv"
  if pl_sweep_read "$tmp/bad.tsv"; then fail "reader accepted: $1"
  elif [[ $PL_ERR != *"$2"* ]]; then fail "reader, $1: message '$PL_ERR' lacks '$2'"
  else pass; fi
}
bad "unknown column" "unknown column 'gpus'" 'point\tbench\tntasks\tgpus\n'
bad "no points" "no points" '# nothing\npoint\tbench\tntasks\n'
bad "duplicate id" "repeats line" 'point\tbench\tntasks\na\tcalib\t1\na\tcalib\t1\n'
bad "bad ntasks" "ntasks '0'" 'point\tbench\tntasks\na\tcalib\t0\n'
bad "one task per GPU" "one task per GPU" 'point\tbench\tnodes\tgpus_per_node\tntasks\na\tcalib\t2\t4\t4\n'
bad "uneven tasks" "not a multiple of nodes" 'point\tbench\tnodes\tntasks\na\tcalib\t2\t3\n'
bad "bad time" "time '1h'" 'point\tbench\tntasks\ttime\na\tcalib\t1\t1h\n'
bad "peer under MPI" "no MPI program" 'point\tbench\tntasks\nx\tpeer:torch_sdpa\t1\n'
bad "bad quoting" "unbalanced" 'point\tbench\tntasks\targs\na\tcalib\t1\t--tests "h2d\n'
bad "tab in args" "fields but" 'point\tbench\tntasks\targs\na\tcalib\t1\t--tests\th2d\n'
printf '# t\n# machine: cpu\npoint\tbench\tntasks\tmachine\targs\na\tcalib\t2\tcpu,h200x1\t-n 1\n' >"$tmp/ok.tsv"
check "reader: directives and columns" \
  'pl_sweep_read "$tmp/ok.tsv" && [[ $PL_SWEEP_MACHINE == cpu && ${PL_P_NTASKS[0]} == 2 && ${PL_P_NODES[0]} == 1 && ${PL_P_TIME[0]} == 00:30:00 && ${PL_P_MACHINE[0]} == cpu,h200x1 ]]'
check "machine match" 'pl_machine_matches "cpu,h200x1" h200x1 && ! pl_machine_matches "cpu,h200x1" h200x2 && pl_machine_matches "*" x'

# ---- 3. jobs/run end to end ------------------------------------------------------
sw=test-sweeps-$stamp
runs+=("$sw")
d=results/runs/$sw
cat >"$tmp/sweep.tsv" <<'EOF'
# the test sweep of jobs/test_sweeps.sh
# machine: cpu
point	bench	ntasks	time	launch	machine	args
fast	calib	2	00:02:00	mpi	*	--sizes 4Ki --gemm-size 32 -n 2 -w 0 --tests "h2d,allreduce"
quoted	maxbatch	2	00:02:00	single	cpu	--trial-backend cpu --bench sco --preset small --budgets 0 --mem-limit 2Mi --step 256 --start 256 --max-trials 1 -n 1 -w 0 --launcher '{launch}'
odd	layer	3	00:02:00	mpi	*	-n 1 -w 0 --heads 3 --kv-heads 3
slow	calib	2	00:00:02	mpi	*	--sizes 4Ki:64Ki:x2 --gemm-size 32 -n 100000 -w 0
gpuonly	calib	2	00:02:00	mpi	h200x2	--sizes 4Ki -n 1 -w 0
EOF
jobs/run "$tmp/sweep.tsv" --sweep "$sw" --machine cpu >"$tmp/run1.out" 2>&1
rc=$?
check "jobs/run exits 1 when a point failed (got $rc)" '[[ $rc == 1 ]]'
jobs/status "$d" >"$tmp/status1" 2>&1
st() { awk -v p="$1" '$1 == p {print $4}' "$tmp/status1"; }
check "fast: done" '[[ $(st fast) == done ]]'
check "quoted: done (the quoted launcher reached maxbatch as one word)" '[[ $(st quoted) == done ]]'
check "quoted: argv recorded the launcher as one word" \
  'grep -q "^# argv: .*'"'"'--launcher=mpirun\\|^# argv: .* '"'"'mpirun " "$d"/maxbatch.*.tsv'
check "odd: infeasible on 3 ranks" '[[ $(st odd) == infeasible ]] && grep -q "S not divisible" "$tmp/status1"'
check "slow: failed at its time limit, with its last error" \
  '[[ $(st slow) == failed ]] && grep "^slow" "$tmp/status1" | grep -q "exit 124 (time limit); last error:"'
check "gpuonly: for another machine (h200x2 only), counted apart" '[[ $(st gpuonly) == other ]]'
check "summary line: the other machine's point apart, not in the percentage" \
  'grep -q "^# sweep $sw: 5 points: 2 done, 1 failed, 0 running, 0 pending, 1 infeasible, 0 not run, 1 for other machines (50% done of the 4 for cpu)" "$tmp/status1"'
check "jobs/status --machine all: every point is this run's (gpuonly not run)" \
  'jobs/status "$d" --machine all | grep -q "1 not run (40% done)$"'
# jobs/status on a machine without column(1) (the GPU machines lack it)
mkdir -p "$tmp/nocolumn"
printf '#!/bin/sh\necho "column: command not found" >&2\nexit 127\n' >"$tmp/nocolumn/column"
chmod +x "$tmp/nocolumn/column"
PATH=$tmp/nocolumn:$PATH jobs/status "$d" >"$tmp/status2" 2>&1
check "jobs/status needs no column(1): the same table, aligned" \
  '! grep -q "column" "$tmp/status2" && [[ $(awk "\$1 == \"slow\" {print \$4}" "$tmp/status2") == failed ]] && grep -qE "^point +bench +ntasks +state +detail$" "$tmp/status2"'
check "report/points.md lists the failed and the infeasible point" \
  'grep -q "| slow | calib | 2 | failed |" "$d/report/points.md" && grep -q "| odd | layer | 3 | infeasible |" "$d/report/points.md"'
check "report: the calib table" '[[ -s $d/report/calib.md ]]'
# resume: only the failed point runs again
jobs/run "$tmp/sweep.tsv" --sweep "$sw" --machine cpu --no-report >"$tmp/run2.out" 2>&1
check "rerun skips the done points" 'grep -q "^# skip fast" "$tmp/run2.out" && grep -q "^# skip quoted" "$tmp/run2.out"'
check "rerun runs the failed point again, once" '[[ $(grep -c "^# ---- " "$d/logs/slow.log") == 2 && $(grep -c "^# ---- " "$d/logs/fast.log") == 1 ]]'
check "fast: one result file" '[[ $(grep -lx "# point: fast" "$d"/*.tsv | wc -l) == 1 ]]'

# launch ranks: ntasks processes of a peer script (no MPI), each its {rank}
mkdir -p "$tmp/peers"
printf '#!/usr/bin/env python3\n"""a stand-in peer: writes its rank"""\nimport sys\nopen(sys.argv[2] + "/rank" + sys.argv[1], "w").write(sys.argv[1])\n' >"$tmp/peers/fake.py"
printf 'point\tbench\tntasks\tlaunch\targs\nper-rank\tpeer:fake\t2\tranks\t{rank} {out}\n' >"$tmp/ranks.tsv"
sw3=test-sweeps-ranks-$stamp
runs+=("$sw3")
PL_PEERS_DIR=$tmp/peers jobs/run "$tmp/ranks.tsv" --sweep "$sw3" --no-report >"$tmp/ranks.out" 2>&1
rc=$?
check "launch ranks: two processes of the peer, ranks 0 and 1, recorded (exit $rc)" \
  '[[ $rc == 0 && -f results/runs/$sw3/rank0 && -f results/runs/$sw3/rank1 ]] && grep -q "^# skip per-rank" <(PL_PEERS_DIR=$tmp/peers jobs/run "$tmp/ranks.tsv" --sweep "$sw3" --no-report 2>&1)'
bad "ranks for a plateau bench" "launch ranks starts a peer script" 'point\tbench\tntasks\tlaunch\nx\tcalib\t2\tranks\n'

# ---- 4. refused by the program ------------------------------------------------------
printf 'point\tbench\tntasks\targs\nok\tcalib\t1\t--sizes 4Ki -n 1 -w 0\nbad\tcalib\t1\t--tests "h2d warp"\n' >"$tmp/refused.tsv"
sw2=test-sweeps-refused-$stamp
runs+=("$sw2")
jobs/run "$tmp/refused.tsv" --sweep "$sw2" >"$tmp/ref.out" 2>&1
rc=$?
check "jobs/run: a refused point stops the run (exit 2) with the program's message" \
  '[[ $rc == 2 ]] && grep -q "point bad (plateau bench calib) is refused by the program" "$tmp/ref.out" && grep -q "h2d warp" "$tmp/ref.out"'
check "... having run nothing" '[[ -z $(find "results/runs/$sw2" -name "*.tsv" 2>/dev/null) ]]'
jobs/submit "$tmp/refused.tsv" --sweep "$sw2" --dry-run >"$tmp/ref2.out" 2>&1
rc=$?
check "jobs/submit refuses it too (exit 2)" '[[ $rc == 2 ]] && grep -q "h2d warp" "$tmp/ref2.out"'
printf 'point\tbench\tntasks\targs\nx\tnosuch\t1\t\n' >"$tmp/unknown.tsv"
jobs/submit "$tmp/unknown.tsv" --dry-run >"$tmp/ref3.out" 2>&1
rc=$?
check "jobs/submit refuses an unknown bench" '[[ $rc == 2 ]] && grep -q "unknown bench .nosuch." "$tmp/ref3.out"'
# a point id too long for its file names (logs/ID.lock, .log, .state): refused
# up front by every reader, dry runs included, with the line, the id and the
# limit; the longest allowed id runs
long=$(printf 'p%.0s' $(seq 300)) id128=$(printf 'q%.0s' $(seq 128))
printf 'point\tbench\tntasks\targs\n%s\tcalib\t1\t--sizes 4Ki -n 1 -w 0\n' "$long" >"$tmp/longid.tsv"
printf 'point\tbench\tntasks\targs\n%s\tcalib\t1\t--sizes 4Ki -n 1 -w 0\n' "$id128" >"$tmp/id128.tsv"
sw3=test-sweeps-longid-$stamp
runs+=("$sw3")
for how in "jobs/run:" "jobs/run:--dry-run" "jobs/submit:--dry-run"; do
  rc=0
  ${how%%:*} "$tmp/longid.tsv" --sweep "$sw3" ${how#*:} >"$tmp/longid.out" 2>&1 || rc=$?
  check "${how%%:*} ${how#*:}: a 300-character point id is refused (exit 2, got $rc) naming it and the limit" \
    '[[ $rc == 2 ]] && grep -q "longid.tsv:2: point id .${long:0:40}\.\.\.. is 300 characters long (allowed: at most 128)" "$tmp/longid.out"'
done
check "... having written nothing" '[[ ! -e results/runs/$sw3 ]]'
rc=0
jobs/run "$tmp/id128.tsv" --sweep "$sw3" --no-report >"$tmp/id128.out" 2>&1 || rc=$?
check "a 128-character point id runs and is recorded (exit $rc)" \
  '[[ $rc == 0 ]] && pl_point_recorded "results/runs/$sw3" "$id128" calib && [[ -f results/runs/$sw3/logs/$id128.log ]]'

# ---- 5. the shipped sweeps ------------------------------------------------------------
for f in jobs/sweeps/*.tsv; do
  name=$(basename "$f")
  if ! pl_sweep_read "$f"; then fail "$name: $PL_ERR"; continue; fi
  [[ -n $PL_SWEEP_TITLE ]] && pass || fail "$name: no header comment"
  [[ -n $PL_SWEEP_MACHINE ]] && pass || fail "$name: no '# machine:' line"
  missing=
  pl_sweep_requires || missing=$PL_ERR
  out=$(jobs/submit "$f" --sweep "check-$stamp" --dry-run 2>&1)
  rc=$?
  if [[ -n $missing ]]; then
    [[ $rc == 2 ]] && grep -q "needs 'plateau bench" <<<"$out" && pass ||
      fail "$name: $missing, but it was not refused (exit $rc)"
    echo "note: $name: $missing: only its refusal was checked"
  else
    [[ $rc == 0 ]] && pass || { fail "$name: jobs/submit --dry-run exit $rc"; tail -5 <<<"$out"; }
  fi
done
[[ ! -e results/runs/check-$stamp ]] && pass || fail "the dry runs wrote results/runs/check-$stamp"

# ---- 5b. the planner's verdict (a stand-in `plateau plan` in a build dir) ------
mkdir -p "$tmp/fakebuild/bin"
cat >"$tmp/fakebuild/bin/plateau" <<EOF
#!/usr/bin/env bash
# a plateau whose plan command says 1Mi does not fit and anything else fits
if [[ \$1 == plan ]]; then
  [[ \$2 == --help ]] && exit 0
  echo "plan \$*" >>"$tmp/plan.calls"
  [[ " \$* " == *" --seq 1Mi "* ]] && { echo "DOES NOT FIT — binding term: host: optimizer state"; exit 1; }
  echo fits; exit 0
fi
exec "$(cd "$(dirname "$BIN")" && pwd)/plateau" "\$@"
EOF
chmod +x "$tmp/fakebuild/bin/plateau"
printf 'point\tbench\tnodes\tgpus_per_node\tntasks\targs\nlong\ttrain\t1\t0\t2\t--model tiny --seq 1Mi -D 2\nboth\ttrain\t1\t0\t2\t--model tiny --seq 128,1Mi\nother\tcalib\t1\t0\t2\t--sizes 4Ki\n' >"$tmp/plan.tsv"
out=$(BUILD=$tmp/fakebuild jobs/submit "$tmp/plan.tsv" --sweep "plan-$stamp" --dry-run 2>&1)
rc=$?
check "planner: a point no context of which fits is infeasible, not submitted" \
  '[[ $rc == 0 ]] && grep -q "^# infeasible long: planner: S=1Mi: DOES NOT FIT — binding term: host: optimizer state" <<<"$out" && ! grep -q "^# run long " <<<"$out"'
check "planner: a point with one context that fits is submitted" 'grep -q "^# run both " <<<"$out" && grep -q "^# run other " <<<"$out"'
check "planner: asked with the point's GPUs, this host's memory (a cpu point) and explicit layout" \
  'grep -qE "^plan plan --model tiny --gpus 2 --set backend=cpu,hbm_bytes=[0-9]+,hbm_reserve=0,host_bytes=[0-9]+,host_reserve=2Gi,gpus_per_node=2 --config explicit --D 2 --seq 1Mi$" "$tmp/plan.calls"'

# ---- 5c. a GPU point is planned for the machine it will run on ------------------
# (not this host's memory: from a host without a GPU, the 120B proxy's
# 192Ki was refused as "device peak 125.07 GiB > 19.54 GiB usable")
printf '# proxy\n# machine: h200x1\npoint\tbench\tnodes\tgpus_per_node\tntasks\targs\np192\ttrain\t1\t1\t1\t--backend cuda --preset proxy120b --seq 192Ki -w 1 -n 2\np256sco\ttrain\t1\t1\t1\t--backend cuda --preset proxy120b --sco-budget all --seq 256Ki -w 1 -n 2\np256\ttrain\t1\t1\t1\t--backend cuda --preset proxy120b --config explicit --sco-budget 0 --seq 256Ki -w 1 -n 2\n' >"$tmp/gpu.tsv"
out=$(jobs/submit "$tmp/gpu.tsv" --sweep "gpu-$stamp" --dry-run 2>&1)
rc=$?
check "planned for h200x1 (the sweep's kind), saying so: exit 0 (got $rc)" \
  '[[ $rc == 0 ]] && grep -q "^# plan p192 against h200x1 (jobs/machines.tsv): device 135.80 GiB usable of 139.80, host 121.00 GiB usable per node of 125.00, 1 rank(s) per node$" <<<"$out"'
check "on one H200: 192Ki and 256Ki with SCO are submitted" 'grep -q "^# run p192 " <<<"$out" && grep -q "^# run p256sco " <<<"$out"'
check "on one H200: 256Ki at D = 1 without SCO is infeasible against the GPU's 135.80 GiB" \
  'grep -q "^# infeasible p256: .*device peak [0-9.]* GiB > 135.80 GiB usable" <<<"$out" && ! grep -q "^# run p256 " <<<"$out"'
out=$(jobs/submit "$tmp/gpu.tsv" --sweep "gpu-$stamp" --dry-run --machine h200x2 2>&1)
check "--machine h200x2 plans for h200x2" 'grep -q "^# plan p192 against h200x2 (jobs/machines.tsv): device 135.80 GiB usable of 139.80, host 252.00 GiB" <<<"$out"'
out=$(jobs/submit "$tmp/gpu.tsv" --sweep "gpu-$stamp" --dry-run --machine b300x9 2>&1)
check "a kind not in jobs/machines.tsv: the planner's defaults, said" \
  'grep -q "^# plan p192 against the planner.s defaults (.b300x9. is not in jobs/machines.tsv): device 135.80 GiB" <<<"$out"'
mkdir -p "$tmp/fakegpu"
printf '#!/bin/sh\n# a host with one A100 of 80 GiB\ncase "$*" in *name*) echo "NVIDIA A100-SXM4-80GB" ;; *memory.total*) echo 81920 ;; esac\n' >"$tmp/fakegpu/nvidia-smi"
chmod +x "$tmp/fakegpu/nvidia-smi"
out=$(PATH=$tmp/fakegpu:$PATH jobs/run "$tmp/gpu.tsv" --sweep "gpu-$stamp" --dry-run --only p192 2>&1)
check "jobs/run on a GPU host of a kind not listed: this host's GPU (nvidia-smi), which 192Ki does not fit" \
  'grep -q "^# plan p192 against this host (nvidia-smi, /proc/meminfo): device 76.00 GiB usable of 80.00" <<<"$out" && grep -q "^# infeasible p192: .* > 76.00 GiB usable" <<<"$out"'
check "no run directory written by these dry runs" '[[ ! -e results/runs/gpu-$stamp ]]'

# ---- 6. a multi-node point, rendered ------------------------------------------------
printf '# two nodes\npoint\tbench\tnodes\tgpus_per_node\tntasks\ttime\targs\nbig\tcalib\t8\t8\t64\t02:00:00\t--backend cuda --sizes 4Ki --tests "h2d,allreduce"\nsmall\tcalib\t1\t0\t1\t00:05:00\t--sizes 4Ki\n' >"$tmp/multi.tsv"
jobs/submit "$tmp/multi.tsv" --sweep "multi-$stamp" --render "$tmp/render" -p gpu -A proj -q high >"$tmp/render.out" 2>&1
rc=$?
check "render: exit 0, nothing submitted or written under results/runs" \
  '[[ $rc == 0 && ! -e results/runs/multi-$stamp ]] && bash -n "$tmp/render/sbatch.sh"'
check "render: the big point has its own allocation (8 nodes, 64 tasks, 8 per node, 8 GPUs/node, 2 h)" \
  'grep -q -- "--nodes=8 --ntasks=64 --ntasks-per-node=8 --time=02:00:00 --gpus-per-node=8 " "$tmp/render/sbatch.sh"'
check "render: the small point its own (1 node, 1 task, no GPU)" \
  'grep -q -- "--nodes=1 --ntasks=1 --ntasks-per-node=1 --time=00:05:00 --output" "$tmp/render/sbatch.sh"'
check "render: -p -A -q on every sbatch line" \
  '[[ $(grep -c "sbatch " "$tmp/render/sbatch.sh") == 3 && $(grep -c -- "-p gpu -A proj -q high" "$tmp/render/sbatch.sh") == 3 ]]'
check "render: the report waits on both arrays" 'grep -q -- "--dependency=afterany:\$ARRAY_1:\$ARRAY_2" "$tmp/render/sbatch.sh"'
mkdir -p "$tmp/cwd"
rm -rf "rel-$stamp"
(cd "$tmp/cwd" && "$OLDPWD/jobs/submit" "$tmp/multi.tsv" --sweep "multi-$stamp" --render "rel-$stamp") >"$tmp/rel.out" 2>&1
rc=$?
check "render: a relative DIR is the caller's directory's, not the repository's (exit $rc)" \
  '[[ $rc == 0 && -f $tmp/cwd/rel-$stamp/sbatch.sh && ! -e rel-$stamp ]]'
rm -rf "rel-$stamp"
list=$(grep -l "^big" "$tmp"/render/*.list)
out=$(SLURM_SUBMIT_DIR=$PWD SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_JOB_ID=7 SLURM_NTASKS=64 SLURM_JOB_NUM_NODES=8 \
  PL_DRY_LAUNCH=1 NCCL_IB_HCA=mlx5_0 bash jobs/point.sbatch "$list" "multi-$stamp" 2>&1)
check "point.sbatch: srun with one task per GPU on 8 nodes, GPUs unbound per task" \
  'grep -q "^command: srun --mpi=pmix --nodes=8 --ntasks=64 --ntasks-per-node=8 --gpu-bind=none $BIN bench calib --backend cuda --sizes 4Ki --tests h2d\\\\,allreduce -o results/runs/multi-$stamp --point big$" <<<"$out"'
check "point.sbatch: NCCL_NVLS_ENABLE=0, the caller's NCCL_IB_HCA kept" \
  'grep -qx "env NCCL_NVLS_ENABLE=0" <<<"$out" && grep -qx "env NCCL_IB_HCA=mlx5_0" <<<"$out"'
out=$(SLURM_SUBMIT_DIR=$PWD SLURM_ARRAY_TASK_ID=0 SLURM_NTASKS=8 SLURM_JOB_NUM_NODES=1 PL_DRY_LAUNCH=1 \
  bash jobs/point.sbatch "$list" "multi-$stamp" 2>&1)
rc=$?
check "point.sbatch refuses an allocation smaller than the point (exit 2)" '[[ $rc == 2 ]] && grep -q "wants 8 node" <<<"$out"'
[[ $nfail == 0 ]] || { echo "--- jobs/run output"; tail -30 "$tmp/run1.out"; cat "$tmp/status1"; }
echo "test_sweeps.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
