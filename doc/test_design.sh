#!/usr/bin/env bash
# test_design.sh — doc/DESIGN.md, the README and the guides in doc/guide/
# name only files that exist.
#
# Every path in backquotes that starts at a top folder of the repository
# (engine/, suite/, baselines/, jobs/, analysis/, dev/, doc/, results/) must
# exist: brace forms are expanded (`suite/results/results.{h,c}`), a glob
# (`analysis/*.gp`) must match at least one file, and a path holding a
# placeholder (`<name>`, NAME, F) is left out, and so is a path under
# results/runs/ (what runs write; not in the repository).  Among them are the files that
# "How to add a dispatch algorithm, a bench, a backend kernel" (§3.7) lists,
# so that section fails here when a file it names is moved or removed.  The
# check itself is shown to catch one: run on a copy of the document that names
# a file that does not exist, it must fail and name it.
#
#   bash doc/test_design.sh [DOC...]  (default: doc/DESIGN.md README.md doc/guide/*.md)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# missing DOC: print each path DOC names that does not exist
missing() {
  grep -oE '`[^`]+`' "$1" | tr -d '`' | tr ' ' '\n' |
    grep -E '^(engine|suite|baselines|jobs|analysis|dev|doc|results)/[A-Za-z0-9_./{},*-]+$' |
    grep -vE '(^|/)(NAME|F)(/|\.|_|$)|_NAME\.|/F\.h|^results/runs(/|$)' |
    sed 's/[.,;:)]*$//' | LC_ALL=C sort -u |
    while IFS= read -r p; do
      for q in $(eval "echo $p"); do
        compgen -G "$q" >/dev/null || echo "$q (named as \`$p\`)"
      done
    done
}

nfail=0
docs=("$@")
[[ ${#docs[@]} -gt 0 ]] || docs=(doc/DESIGN.md README.md doc/guide/*.md)
for doc in "${docs[@]}"; do
  gone=$(missing "$doc")
  if [[ -n $gone ]]; then
    echo "FAIL: $doc names files that do not exist:"
    echo "$gone" | sed 's/^/    /'
    nfail=$((nfail + 1))
  else
    echo "ok: every file $doc names exists"
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "${docs[0]}" "$tmp/DESIGN.md"
echo 'A file that is gone: `suite/bench/nothing/bench_nothing.c`.' >>"$tmp/DESIGN.md"
if missing "$tmp/DESIGN.md" | grep -q '^suite/bench/nothing/bench_nothing\.c '; then
  echo "ok: a named file that does not exist is found"
else
  echo "FAIL: a named file that does not exist was not found"
  nfail=$((nfail + 1))
fi

echo "test_design.sh: $nfail failed"
[[ $nfail -eq 0 ]]
