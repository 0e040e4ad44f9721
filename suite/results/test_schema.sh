#!/usr/bin/env bash
# test_schema.sh — one result schema: every bench's header (`plateau bench
# NAME --columns`, nothing run) and every peer script's columns
# (analysis/peers/*.py) name only columns of the schema table (`plateau
# schema`, from suite/results/schema.def), each once; doc/guide/results.md carries
# exactly that table; a bench's --help points to it.
# Usage: BUILD=build bash suite/results/test_schema.sh
set -uo pipefail
PL_TEST=test_schema.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

"$BIN" schema >"$tmp/schema.md" || fail "plateau schema: exit $?"
# the schema's names: | `name` | unit | meaning |
sed -n 's/^| `\([a-zA-Z0-9_]*\)` |.*/\1/p' "$tmp/schema.md" | sort >"$tmp/names"
[[ $(wc -l <"$tmp/names") -gt 50 ]] || fail "plateau schema: $(wc -l <"$tmp/names") columns"
[[ -z $(uniq -d "$tmp/names") ]] && pass || fail "schema names twice: $(uniq -d "$tmp/names")"

# check_cols LABEL NAME...: every name in the schema, none twice
check_cols() {
  local label=$1 bad
  shift
  bad=$(printf '%s\n' "$@" | grep -vxFf "$tmp/names")
  [[ -z $bad ]] && pass || fail "$label: columns not in the schema: $(echo $bad)"
  bad=$(printf '%s\n' "$@" | sort | uniq -d)
  [[ -z $bad ]] && pass || fail "$label: columns twice: $(echo $bad)"
  [[ $1 == bench && ${*: -3} == "status check note" ]] && pass ||
    fail "$label: not bench first and status, check, note last: $*"
}

mapfile -t benches < <("$BIN" bench --help | awk '/^benches:/ {b = 1; next} b && NF {print $1}')
[[ ${#benches[@]} -ge 9 ]] || fail "plateau bench --help lists ${#benches[@]} benches"
for b in "${benches[@]}"; do
  rm -rf "$tmp/out"
  if ! "$BIN" bench "$b" --columns -o "$tmp/out" >"$tmp/cols" 2>"$tmp/err"; then
    fail "bench $b --columns: exit $?"; cat "$tmp/err"; continue
  fi
  [[ ! -e $tmp/out ]] && pass || fail "bench $b --columns wrote files"
  IFS=$'\t' read -r -a cols <"$tmp/cols"
  check_cols "bench $b" "${cols[@]}"
  # the whole help first: grep -q stops reading at the match, and a longer
  # help would then die of SIGPIPE under pipefail
  help=$("$BIN" bench "$b" --help 2>&1)
  grep -q "result schema table (\`plateau schema\`)" <<<"$help" && pass ||
    fail "bench $b --help does not point to the schema"
done

# the peers write result files too (a module they import, which writes none,
# has no "# plateau-results" header line to write)
for py in "$ROOT"/analysis/peers/*.py; do
  grep -q 'plateau-results' "$py" || continue
  mapfile -t cols < <(python3 - "$py" <<'EOF'
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
for node in ast.walk(tree):
    if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in ("cols", "COLUMNS") for t in node.targets):
        for e in node.value.elts:
            print(e.value)
        break
EOF
  )
  [[ ${#cols[@]} -gt 3 ]] || { fail "$py: no column list found"; continue; }
  check_cols "$(basename "$py")" "${cols[@]}"
done

# the results guide carries the table once, as `plateau schema` prints it
guide=$ROOT/doc/guide/results.md
sed -n '/^<!-- schema: begin/,/^<!-- schema: end/p' "$guide" | sed '1d;$d' >"$tmp/guide.md"
if diff -u "$tmp/schema.md" "$tmp/guide.md" >"$tmp/diff"; then pass; else
  fail "doc/guide/results.md's schema table differs from 'plateau schema' (regenerate it between the markers):"
  head -20 "$tmp/diff"
fi

echo "test_schema.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
