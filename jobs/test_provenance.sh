#!/usr/bin/env bash
# jobs/test_provenance.sh — the recorded provenance is the built tree's:
#  - the tree hash of a copy of HEAD without .git (what a GPU machine gets)
#    equals `jobs/provenance commit HEAD`, with and without git installed;
#  - changing one source byte changes it; a test file or README does not;
#  - the build records git_sha, git_dirty and tree_hash of the tree it
#    compiled (a result file's tree_hash equals `jobs/provenance hash` of the
#    tree), and `make GIT_SHA=...` cannot override them;
#  - `verify` says match for a file of HEAD's tree (exit 0) and no match for
#    another tree (exit 1); `find` names the commit.
# Usage: BUILD=build bash jobs/test_provenance.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/bin/plateau
P=jobs/provenance
tmp=$(mktemp -d /tmp/pl_test_provenance.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
npass=0 nfail=0
pass() { npass=$((npass + 1)); }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
[[ -x $BIN ]] || { echo "test_provenance.sh: $BIN not built"; exit 1; }

head_tree=$($P commit HEAD) || fail "provenance commit HEAD"
[[ $head_tree =~ ^[0-9a-f]{20}$ ]] && pass || fail "commit HEAD: '$head_tree' is not 20 hex digits"
mkdir -p "$tmp/copy"
git archive HEAD | tar -x -C "$tmp/copy"
got=$($P hash "$tmp/copy")
[[ $got == "$head_tree" ]] && pass || fail "copy of HEAD: tree $got, commit HEAD: $head_tree"
got=$(PL_PROVENANCE_NO_GIT=1 $P hash "$tmp/copy")
[[ $got == "$head_tree" ]] && pass || fail "copy of HEAD hashed without git: $got (want $head_tree)"
hdr=$($P header "$tmp/copy")
grep -q '#define PL_GIT_SHA "none"' <<<"$hdr" && grep -q '#define PL_GIT_DIRTY -1' <<<"$hdr" &&
  grep -q "#define PL_TREE_HASH \"$head_tree\"" <<<"$hdr" && pass ||
  fail "header of a copy without .git: $hdr"

echo >>"$tmp/copy/README.md"
mkdir -p "$tmp/copy/suite" && echo '# not a source' >"$tmp/copy/suite/test_extra.sh"
[[ $($P hash "$tmp/copy") == "$head_tree" ]] && pass || fail "README/test change moved the tree hash"
printf '\n' >>"$tmp/copy/suite/cli/main.c"
[[ $($P hash "$tmp/copy") != "$head_tree" ]] && pass || fail "a changed source kept the tree hash"

# the build's record: the tree it compiled
tree_now=$($P hash)
read -r desc_sha desc_tree < <($P describe)
hdr=$(cat "$BUILD/gen/plateau_git.h" 2>/dev/null)
grep -q "#define PL_TREE_HASH \"$tree_now\"" <<<"$hdr" && pass ||
  fail "$BUILD/gen/plateau_git.h is not of this tree ($tree_now): run make; $hdr"
[[ $desc_tree == "$tree_now" ]] && pass || fail "describe tree $desc_tree != hash $tree_now"
"$BIN" bench calib --backend cpu --sizes 4Ki --tests h2d -n 1 -w 0 -o "$tmp/run" >/dev/null 2>&1
f=$(find "$tmp/run" -name '*.tsv' | head -n 1)
if [[ -z $f ]]; then
  fail "no result file"
else
  grep -qx "# tree_hash: $tree_now" "$f" && pass || fail "result tree_hash: $(grep tree_hash "$f")"
  sha=$(git rev-parse --short=12 HEAD)
  grep -qx "# git_sha: $sha" "$f" && pass || fail "result git_sha: $(grep git_sha "$f") (HEAD $sha)"
  dirty=1
  [[ $tree_now == "$head_tree" ]] && dirty=0
  grep -qx "# git_dirty: $dirty" "$f" && pass || fail "result git_dirty: $(grep git_dirty "$f") (want $dirty)"
  # verify: against HEAD it matches exactly when the tree is HEAD's
  sed "s/^# tree_hash: .*/# tree_hash: $head_tree/; s/^# git_sha: .*/# git_sha: none/" "$f" >"$tmp/head.tsv"
  out=$($P verify "$tmp/head.tsv") && grep -q "^match" <<<"$out" && pass || fail "verify of HEAD's tree: $out"
  sed "s/^# tree_hash: .*/# tree_hash: 0123456789abcdef0123/" "$f" >"$tmp/other.tsv"
  $P verify "$tmp/other.tsv" HEAD >"$tmp/out" 2>&1
  [[ $? == 1 ]] && grep -q "^no match" "$tmp/out" && pass || fail "verify of another tree: $(cat "$tmp/out")"
  out=$($P find "$tmp/head.tsv" 20) && grep -q "^$(git rev-parse --short HEAD)" <<<"$out" && pass ||
    fail "find: $out"
fi
# a sha given by hand is ignored
out=$(make -s --no-print-directory BUILD="$BUILD" CUDA=0 GIT_SHA=deadbeef config 2>&1)
grep -q "sources=.*$tree_now" <<<"$out" && ! grep -q deadbeef <<<"$out" && pass ||
  fail "make GIT_SHA=deadbeef: $out"

echo "test_provenance.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
