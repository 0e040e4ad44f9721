# suite/testlib.sh — the prologue the suite's test scripts share; source it
# after `set -uo pipefail`, with PL_TEST set to the script's name:
#   ROOT (the repository), BUILD (absolute; $BUILD or build), BIN (the plateau
#   binary: the script stops with exit 1 when it is not built), MPIRUN, the
#   Open MPI variables that let root run it, PLATEAU_ROOT (for `plateau
#   report`'s gnuplot scripts), tmp (a scratch folder removed at exit), and
#   fail MSG / pass (nfail / npass counters).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
BIN=$BUILD/bin/plateau
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe --bind-to none}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PLATEAU_ROOT=$ROOT
if [[ ! -x $BIN ]]; then
  echo "$PL_TEST: $BIN not built (make first)"
  exit 1
fi
tmp=$(mktemp -d "/tmp/pl_${PL_TEST%.sh}.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
nfail=0
npass=0
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
pass() { npass=$((npass + 1)); }
