# analysis/device/lib.sh — the pieces the scripts for one GPU allocation share
# (speed.sh, kernels.sh, ringattn.sh, headroom.sh, ...): sourced, not run.  After
# `pl_dev_begin OUT` the caller has: $OUT (made), $BIN (checked), $MPIRUN,
# $THREADS, the launch environment (root allowed for Open MPI, NVLink
# multicast off) and
#   stamp MSG...                  "## <script> [<seconds>s] MSG" on stdout
#   bench SECONDS NAME ARGS...    `plateau bench NAME --backend cuda ARGS -o
#                                 $OUT` under a timeout, its '#' metadata and
#                                 progress lines filtered out of stdout (the
#                                 result file keeps them)
#   run_tests SECONDS BIN...      each test binary once (test_mpi_* under
#                                 mpirun -np 1), CK_FORK=no, its last lines
#   peer SECONDS SCRIPT ARGS...   python3 analysis/peers/SCRIPT ARGS on GPU 0
#                                 under a timeout, its last lines
#   pl_table GLOB <<'EOF' ...     a Python program (the script's table) run
#                                 after a prelude that gives it `out` ($OUT),
#                                 `rows` (the data rows of $OUT's result files
#                                 matching GLOB, a dict of column -> cell per
#                                 row) and num(r, k) (a cell as a float, nan
#                                 when missing or not a number)
# (headroom.sh builds first and sets PL_START itself: stamp and pl_table
# need only $PL_SCRIPT, $PL_START and $OUT.)
# Each step has its own timeout, and a step that fails leaves the others
# running: the scripts' `set -uo pipefail` has no -e.
# pl_dev_args DEFAULT_BUDGET "$@" — the options every script of this folder
# takes, for one allocation of a GPU node (an salloc shell, a reserved box, a
# cloud VM): --budget SECONDS, the time the allocation leaves this script
# (each part that would not finish inside it is skipped and says so; 0: no
# limit); --deps DIR, a prefix with Check's check.h and libcheck.a for nodes
# without the package (the test binaries need it; the benches do not).
# Sets BUDGET and DEPS_PREFIX; the other words stay in PL_ARGS.  The
# environment's BUDGET and DEPS_PREFIX are the defaults.
pl_dev_args() {
  BUDGET=${BUDGET:-$1}
  DEPS_PREFIX=${DEPS_PREFIX:-}
  shift
  PL_ARGS=()
  while [ $# -gt 0 ]; do
    case $1 in
      --budget) [ $# -ge 2 ] || { echo "$PL_SCRIPT: --budget needs seconds"; exit 2; }; BUDGET=$2; shift ;;
      --budget=*) BUDGET=${1#--budget=} ;;
      --deps) [ $# -ge 2 ] || { echo "$PL_SCRIPT: --deps needs a directory"; exit 2; }; DEPS_PREFIX=$2; shift ;;
      --deps=*) DEPS_PREFIX=${1#--deps=} ;;
      *) PL_ARGS+=("$1") ;;
    esac
    shift
  done
  [[ $BUDGET =~ ^[0-9]+$ ]] || { echo "$PL_SCRIPT: --budget '$BUDGET' must be whole seconds (0: no limit)"; exit 2; }
  [ "$BUDGET" != 0 ] || BUDGET=999999999
}

# pl_left: the seconds of BUDGET left since PL_START.
pl_left() { echo $((BUDGET - ($(date +%s) - PL_START))); }

pl_dev_begin() {
  OUT=$1
  BIN=${BIN:-build/bin/plateau}
  MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --bind-to none}
  THREADS=${THREADS:-$(nproc)}
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
  mkdir -p "$OUT"
  [ -x "$BIN" ] || { echo "$PL_SCRIPT: $BIN not built (build first; this script builds nothing)"; exit 1; }
  PL_START=$(date +%s)
}

stamp() { echo "## $PL_SCRIPT [$(($(date +%s) - PL_START))s] $*"; }

# the metadata lines a bench prints on stdout (the file keeps them all)
PL_META='^# \(env\|argv\|git\|plateau\|slurm\|device\|driver\|cuda\|cudnn\|blas\|nccl\|mpi\|host\|start\|iters\|warmup\|seed\|check\|mem_limit\|sweep\|point\|preset\|ranks\|backend\|tree_hash\|bench\)'

bench() {
  local t=$1 name=$2
  shift 2
  timeout "$t" "$BIN" bench "$name" --backend cuda "$@" -o "$OUT" 2>&1 |
    grep -v "^\[$name\] point" | grep -v "$PL_META"
}

run_tests() {
  local t=$1
  shift
  for b in "$@"; do
    [ -x "$b" ] || { echo "== $b: not built"; continue; }
    case $b in
      */test_mpi_*) echo "== $b np=1: $(CK_FORK=no timeout "$t" $MPIRUN -np 1 "$b" 2>&1 | tail -2 | tr '\n' ' ')" ;;
      *) echo "== $b: $(CK_FORK=no timeout "$t" "$b" 2>&1 | tail -3 | tr '\n' ' ')" ;;
    esac
  done
}

peer() {
  local t=$1 py=$2
  shift 2
  CUDA_VISIBLE_DEVICES=0 timeout "$t" python3 "analysis/peers/$py" "$@" 2>&1 | tail -3
}

# The rows of the result files, as every script's table reads them: '#'
# lines and blank lines skipped, the first line of a file its header, a row
# of another width left out.
PL_ROWS_PY='import glob, os, sys
out = sys.argv[1]
rows = []
for path in sorted(glob.glob(os.path.join(out, sys.argv[2]))):
    hdr = None
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        cells = line.rstrip("\n").split("\t")
        if hdr is None:
            hdr = cells
        elif len(cells) == len(hdr):
            rows.append(dict(zip(hdr, cells)))

def num(r, k):
    try:
        return float(r.get(k, "nan"))
    except ValueError:
        return float("nan")
'

pl_table() {
  { printf '%s\n' "$PL_ROWS_PY"; cat; } | python3 - "$OUT" "$1"
}
