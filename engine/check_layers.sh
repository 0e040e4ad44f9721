#!/usr/bin/env bash
# check_layers.sh — the include graph of the project against its layers, and
# the length of its files and functions.
#
# Folders are layers (doc/guide/building.md, "Layers"); an #include never runs up a floor:
#   L0 engine/core/ and the core's public headers   L7  baselines/
#   L1 engine/backend/ (cpu/, cuda/)                 L8  suite/results/
#   L2 engine/comm/                                  L9  suite/harness/
#   L3 engine/ops/                                   L10 suite/report/
#   L4 engine/model/                                 L11 suite/cli/
#   L5 engine/train/                                 L12 suite/bench/<name>/
#   L6 engine/plan/                                  L13 dev/ (may include anything)
# A public header under engine/include/plateau/ has the layer of the module
# that implements it (the table PUBLIC below; a header missing from it is a
# finding, so a new one gets a layer when it is added).  A source file of
# suite/ outside those five folders is a finding too (its place says nothing).
#
# Reads every #include of the C, CUDA and header files under engine/,
# baselines/, suite/ and dev/, resolves it the way the build does (the
# including file's folder, then -Iengine/include -Iengine -Isuite), and prints
#   back-up   an include of a higher layer (file:line, both layers)
#   place     a source file of suite/ in none of its layer folders
#   circle    a cycle of includes between files, and one between layer
#             folders (each bench's folder is one; each circle once, from its
#             smallest name)
#   size      a file over 900 lines (generated files excepted)
#   long      a function, or a multi-line macro, over 120 lines in engine/,
#             baselines/ or suite/ (dev/ holds experiments and is left out)
#   by-name   a comparison in engine/ (tests left out) of an ops table's
#             name (x->name, x.name) with the name of one that baselines/
#             defines (`static const char X_name[] = "NAME";`): the engine
#             asks an object defined above it for a capability (a flag on
#             its ops table), never for its name
#   umbrella  a header of a bench's folder (suite/bench/NAME/X.h) that
#             declares functions defined in 3 or more .c files of that
#             folder outside its own unit (X.c and X_*.c), counting what
#             the folder's headers it includes declare: one header naming
#             every helper of the bench, which each file then includes
#             whatever it calls.  Each unit declares its functions in its
#             own header (train_args.h for train_args.c; report_train.h for
#             report_train.c and report_train_*.c); a header of shared
#             types declares none, a header including two units' headers
#             is no umbrella (a function is one defined at column 0, not
#             static; a declaration is its name and "(" outside comments)
#   — size, long and umbrella are warnings unless --strict.
# A long function that is a kernel or a table (one pass or one list a reader
# reads top to bottom) is listed in engine/layers_long.txt as
#   allow   FILE NAME   # why it stays whole
# and one still to be split as
#   pending FILE NAME   # what it is waiting for
# An allowed one is counted, a pending one printed as "pending long" (neither
# fails the check); a line without its "# why" is a finding, and a listed
# function that is no longer long (or gone) is printed as "stale".
# Exit status: 1 when there is a back-up include, a misplaced file, a circle,
# a comparison by a baseline's name or an unexplained allowance (with
# --strict, also a size, long or umbrella finding),
# 2 on usage errors, 0 otherwise.
#
#   engine/check_layers.sh [--strict] [--allow FILE] [ROOT]
#     ROOT     the repository (default: the one holding this script)
#     --allow  FILE lists known back-up includes still being removed, one
#              "FROM TO" pair of paths a line (# comments): each is printed as
#              "pending", does not fail the check and is left out of the
#              circle search (so a circle it closes is not reported, while
#              every other circle is); a listed pair that no longer occurs is
#              printed as "stale" (remove it from FILE)
set -euo pipefail

strict=0
root=""
allow=""
while [ $# -gt 0 ]; do
  a=$1
  shift
  case "$a" in
  --strict) strict=1 ;;
  --allow)
    [ $# -gt 0 ] || {
      echo "check_layers.sh: --allow needs a FILE" >&2
      exit 2
    }
    allow=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    shift
    ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  -*)
    echo "check_layers.sh: unknown option $a (allowed: --strict, --allow FILE, ROOT)" >&2
    exit 2
    ;;
  *) root=$a ;;
  esac
done
[ -n "$root" ] || root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -d "$root/engine" ] || {
  echo "check_layers.sh: $root has no engine/ folder" >&2
  exit 2
}
[ -z "$allow" ] || [ -f "$allow" ] || {
  echo "check_layers.sh: --allow $allow: no such file" >&2
  exit 2
}
cd "$root"

# Layer of each public header (engine/include/plateau/<name>): the module that
# implements it.  plateau.h includes them all, so it sits with the highest.
PUBLIC="status.h=0 log.h=0 timer.h=0 host_device.h=0 tensor.h=0 dev.h=0 kernels.h=0 optypes.h=0 file.h=0
comm.h=2 plateau.h=2"

MAX_LINES=900
MAX_FN_LINES=120
LONG_LIST=engine/layers_long.txt

dirs=""
for d in engine baselines suite dev; do [ -d "$d" ] && dirs+=" $d"; done
# shellcheck disable=SC2086
files=$(find $dirs -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.def' \) |
  LC_ALL=C sort)

# Pass 1 (awk): resolve includes, print edges and back-up includes.
# Pass 2 (awk): cycles over the edges.
report=$(
  {
    echo "$files" | sed 's/^/F /'
    [ -z "$allow" ] || sed 's/#.*//' "$allow" | awk 'NF == 2 { print "A", $1, $2 }'
    # shellcheck disable=SC2086
    awk '
      /^[ \t]*#[ \t]*include[ \t]*["<]/ {
        s = $0; sub(/^[ \t]*#[ \t]*include[ \t]*/, "", s)
        q = substr(s, 1, 1); close_ch = q == "<" ? ">" : "\""
        s = substr(s, 2); e = index(s, close_ch)
        if (e > 1) print "I", FILENAME, FNR, substr(s, 1, e - 1)
      }' $files
  } | LC_ALL=C awk -v public="$PUBLIC" -v allowfile="${allow##*/}" '
    function norm(p,    n, i, parts, out, k, o) {
      n = split(p, parts, "/"); k = 0
      for (i = 1; i <= n; i++) {
        if (parts[i] == "" || parts[i] == ".") continue
        if (parts[i] == "..") { if (k > 0) k--; continue }
        out[++k] = parts[i]
      }
      o = ""
      for (i = 1; i <= k; i++) o = o (i > 1 ? "/" : "") out[i]
      return o
    }
    function dirof(p) { return sub(/\/[^\/]*$/, "", p) ? p : "." }
    function layer(p,    b) {
      if (p ~ /^engine\/include\/plateau\//) {
        b = p; sub(/^.*\//, "", b)
        if (b in pub) return pub[b]
        return -1
      }
      if (p ~ /^engine\/core\//) return 0
      if (p ~ /^engine\/backend\//) return 1
      if (p ~ /^engine\/comm\//) return 2
      if (p ~ /^engine\/ops\//) return 3
      if (p ~ /^engine\/model\//) return 4
      if (p ~ /^engine\/train\//) return 5
      if (p ~ /^engine\/plan\//) return 6
      if (p ~ /^baselines\//) return 7
      if (p ~ /^suite\/results\//) return 8
      if (p ~ /^suite\/harness\//) return 9
      if (p ~ /^suite\/report\//) return 10
      if (p ~ /^suite\/cli\//) return 11
      if (p ~ /^suite\/bench\/[^\/]+\//) return 12
      if (p ~ /^suite\//) return -3
      if (p ~ /^dev\//) return 13
      return -2
    }
    # The folder of a layer (a public header: the folder of its layer; a
    # bench: its own folder).
    function module(p,    l, b) {
      l = layer(p)
      if (l < 0) return ""
      if (l == 12) { b = p; sub(/^suite\/bench\//, "", b); sub(/\/.*/, "", b); return "suite/bench/" b }
      return l == 0 ? "engine/core" : l == 1 ? "engine/backend" : l == 2 ? "engine/comm" : \
             l == 3 ? "engine/ops" : l == 4 ? "engine/model" : l == 5 ? "engine/train" : \
             l == 6 ? "engine/plan" : l == 7 ? "baselines" : l == 8 ? "suite/results" : \
             l == 9 ? "suite/harness" : l == 10 ? "suite/report" : l == 11 ? "suite/cli" : "dev"
    }
    BEGIN {
      n = split(public, kv, /[ \n]+/)
      for (i = 1; i <= n; i++) if (split(kv[i], x, "=") == 2) pub[x[1]] = x[2]
      nsearch = split("engine/include engine suite", search, " ")
    }
    $1 == "F" {
      have[$2] = 1
      if (layer($2) == -3)
        printf "B place: %s is in none of the layer folders of suite/ (results, harness, report, cli, bench/NAME)\n", $2
      next
    }
    $1 == "A" { allowed[$2 " " $3] = 1; next }
    $1 == "I" {
      from = $2; line = $3; inc = $4; to = ""
      c = norm(dirof(from) "/" inc)
      if (c in have) to = c
      for (i = 1; to == "" && i <= nsearch; i++) {
        c = norm(search[i] "/" inc)
        if (c in have) to = c
      }
      if (to == "") next             # a system or generated header
      lf = layer(from); lt = layer(to)
      if (lf == -1) unknown[from] = 1
      if (lt == -1) unknown[to] = 1
      up = lf >= 0 && lt >= 0 && lt > lf
      if (up && ((from " " to) in allowed)) {
        used[from " " to] = 1        # pending: reported, not in the graph
        printf "P pending: %s:%d includes %s (L%d includes L%d; listed in %s)\n",
               from, line, to, lf, lt, allowfile
        next
      }
      print "E", from, to
      mf = module(from); mt = module(to)
      if (mf != "" && mt != "" && mf != mt) print "M", mf, mt
      if (up)
        printf "B back-up: %s:%d includes %s (L%d includes L%d)\n", from, line, to, lf, lt
    }
    END {
      for (k in allowed)
        if (!(k in used))
          printf "S stale: %s is no back-up include now (remove it from %s)\n", k, allowfile
      for (u in unknown)
        printf "B back-up: %s: public header without a layer (add it to PUBLIC in check_layers.sh)\n", u
    }'
)

strip() { echo "$report" | awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' | LC_ALL=C sort -u; }
backups=$(strip B)
pending=$(strip P)
stale=$(strip S)
# circles KIND PREFIX: the circles of the edges "KIND from to" of the report.
circles() {
  echo "$report" | LC_ALL=C awk -v kind="$1" -v prefix="$2" '
  function add(v) { if (!(v in node)) { node[v] = 1; order[++nn] = v } }
  $1 == kind { if (!(($2, $3) in seen)) { seen[$2, $3] = 1; adj[$2] = adj[$2] " " $3 }
              add($2); add($3) }
  # Iterative depth-first search; a grey node met again closes a circle:
  # the stack from that node up to the top.
  function visit(r,    top, v, nb, i, j, c, m, best, k, cyc) {
    top = 1; stk[1] = r; pos[1] = 0; color[r] = 1
    while (top > 0) {
      v = stk[top]; m = split(adj[v], nb, " ")
      if (pos[top] >= m) { color[v] = 2; top--; continue }
      pos[top]++; w = nb[pos[top]]
      if (color[w] == 1) {
        for (i = top; i >= 1 && stk[i] != w; i--) ;
        # rotate so the circle starts at its smallest file: printed once
        best = i
        for (j = i; j <= top; j++) if (stk[j] < stk[best]) best = j
        cyc = ""
        for (k = 0; k <= top - i; k++) {
          j = best + k; if (j > top) j -= top - i + 1
          cyc = cyc stk[j] " -> "
        }
        cyc = cyc stk[best]
        if (!(cyc in found)) { found[cyc] = 1; print prefix cyc }
      } else if (color[w] == 0) {
        color[w] = 1; top++; stk[top] = w; pos[top] = 0
      }
    }
  }
  END { for (i = 1; i <= nn; i++) if (!color[order[i]]) visit(order[i]) }' | LC_ALL=C sort
}
circles=$(
  circles E "circle: "
  circles M "circle (folders): "
)

sizes=""
for f in $files; do
  head -n 5 "$f" | grep -qiE 'generated (by|file)|do not edit' && continue
  n=$(wc -l <"$f")
  if [ "$n" -gt "$MAX_LINES" ]; then
    sizes+="size: $f: $n lines (over $MAX_LINES)"$'\n'
  fi
done
sizes=${sizes%$'\n'}

# Functions and multi-line macros over MAX_FN_LINES (fnscan: "L lines file
# line name kind"), against the list of allowed and pending ones.
fnfiles=$(echo "$files" | grep -E '^(engine|baselines|suite)/' | grep -vE '\.def$' || true)
longs=$(
  {
    [ ! -f "$LONG_LIST" ] || awk '
      /^[ \t]*(#|$)/ { next }
      { why = $0; has = sub(/^[^#]*#[ \t]*/, "", why) && why != ""
        print "W", $1, $2, $3, FNR, has ? 1 : 0 }' "$LONG_LIST"
    # shellcheck disable=SC2086
    [ -z "$fnfiles" ] || awk '
      function fname(s,    t) {
        t = s
        gsub(/__launch_bounds__[ \t]*\([^)]*\)/, "", t)
        gsub(/__attribute__[ \t]*\(\([^)]*\)\)/, "", t)
        if (t !~ /\(/) return ""
        sub(/\(.*/, "", t); sub(/[ \t]+$/, "", t); sub(/.*[ \t*]/, "", t)
        return t
      }
      FNR == 1 { body = 0; sig = 0; mac = 0 }
      {
        line = $0
        if (mac) {
          if (line !~ /\\[ \t]*$/) { print "L", FNR - mstart + 1, FILENAME, mstart, mname, "macro"; mac = 0 }
          next
        }
        if (line ~ /^[ \t]*#[ \t]*define[ \t]/ && line ~ /\\[ \t]*$/) {
          mac = 1; mstart = FNR; mname = line
          sub(/^[ \t]*#[ \t]*define[ \t]+/, "", mname); sub(/[ \t(].*/, "", mname)
          next
        }
        if (body) {
          if (line ~ /^\}/) { print "L", FNR - start + 1, FILENAME, start, name, "function"; body = 0 }
          next
        }
        # a definition starts at column 0 with a name and "(" (or a kernel
        # whose name follows on the next line) and opens its body with "{"
        if (!sig && line ~ /^[A-Za-z_][A-Za-z0-9_ \t*,()]*(\(|__launch_bounds__)/ && line !~ /=/ &&
            line !~ /^(typedef|struct|enum|union|extern)[ \t]/) {
          sig = 1; start = FNR; name = fname(line)
        } else if (sig && name == "") name = fname(line)
        if (sig) {
          if (line ~ /;[ \t]*$/) sig = 0
          else if (line ~ /\{[ \t]*$/) { sig = 0; body = line !~ /\}[ \t]*$/ }
          else if (line ~ /\{.*\}[ \t]*$/) sig = 0
        }
      }' $fnfiles
  } | awk -v max="$MAX_FN_LINES" -v list="$LONG_LIST" '
    $1 == "W" { kind[$3 " " $4] = $2; at[$3 " " $4] = $5
                if (!$6) printf "B unexplained: %s:%d: %s %s has no \"# why\"\n", list, $5, $3, $4
                if ($2 != "allow" && $2 != "pending")
                  printf "B unexplained: %s:%d: %s is neither allow nor pending\n", list, $5, $2
                next }
    $1 == "L" && $2 > max {
      k = $3 " " $5; seen[k] = 1
      if (kind[k] == "allow") { print "A"; next }
      msg = sprintf("%s:%d %s: %d lines (a %s over %d)", $3, $4, $5, $2, $6, max)
      if (kind[k] == "pending") print "P pending long: " msg
      else print "G long: " msg
    }
    END { for (k in kind) if (!(k in seen))
            printf "S stale: %s is no long function now (remove line %d of %s)\n", k, at[k], list }'
)
lstrip() { echo "$longs" | awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' | LC_ALL=C sort -u; }
backups=$(printf '%s\n%s\n' "$backups" "$(lstrip B)" | sed '/^$/d')

# The names baselines/ gives its ops tables, then every strcmp-like call of
# engine/ (tests left out) that holds an ops table's name and one of them.
bnames=$(echo "$files" | grep -E '^baselines/.*\.c$' | xargs -r sed -n \
  's/^[ \t]*\(static[ \t]\{1,\}\)\{0,1\}const char [A-Za-z0-9_]*_name\[\] = "\([^"]*\)";.*/\2/p' |
  LC_ALL=C sort -u)
engfiles=$(echo "$files" | grep -E '^engine/.*\.(c|h|cu|cuh)$' | grep -vE '(^|/)test_[^/]*$' || true)
byname=""
if [ -n "$bnames" ] && [ -n "$engfiles" ]; then
  # shellcheck disable=SC2086
  byname=$(awk -v names="$(echo "$bnames" | tr '\n' ' ')" '
    BEGIN { n = split(names, nm, " ") }
    /str(n)?(case)?cmp[ \t]*\(/ && /(->|\.)name[^A-Za-z0-9_]/ {
      for (i = 1; i <= n; i++)
        if (index($0, "\"" nm[i] "\"")) {
          printf "by-name: %s:%d compares an ops table'"'"'s name with \"%s\", a name baselines/ defines (ask for a capability flag instead)\n", FILENAME, FNR, nm[i]
          break
        }
    }' $engfiles | LC_ALL=C sort)
fi
# Umbrella headers of the benches' folders (suite/bench/NAME/): the
# functions each .c file defines (not static, at column 0), then the names
# each header declares and the folder's headers it includes.
benchfiles=$(echo "$files" | grep -E '^suite/bench/[^/]+/[^/]+\.(c|h)$' || true)
umbrellas=""
if [ -n "$benchfiles" ]; then
  # shellcheck disable=SC2086
  umbrellas=$(awk '
    function dirof(p) { return sub(/\/[^\/]*$/, "", p) ? p : "." }
    function base(p) { sub(/^.*\//, "", p); return p }
    function fname(s,    t) {
      t = s; sub(/\(.*/, "", t); sub(/[ \t]+$/, "", t); sub(/.*[ \t*]/, "", t)
      return t
    }
    FNR == 1 { sig = 0; incom = 0; isc = FILENAME ~ /\.c$/ }
    isc {
      line = $0
      if (!sig && line ~ /^[A-Za-z_][A-Za-z0-9_ \t*]*\(/ && line !~ /=/ &&
          line !~ /^(static|typedef|struct|enum|union|extern)[ \t]/) {
        sig = 1; name = fname(line)
      }
      if (sig) {
        if (line ~ /;[ \t]*$/) sig = 0
        else if (line ~ /\{[ \t]*(\}[ \t]*)?$/) { sig = 0; def[name] = FILENAME }
      }
      next
    }
    {
      line = $0
      if (line ~ /^[ \t]*#[ \t]*include[ \t]*"/) {
        inc = line; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
        to = inc ~ /\// ? "suite/" inc : dirof(FILENAME) "/" inc
        if (dirof(to) == dirof(FILENAME)) incs[FILENAME] = incs[FILENAME] " " to
        next
      }
      # the code of the line: comments and strings left out
      out = ""
      while (line != "") {
        if (incom) {
          e = index(line, "*/"); if (!e) { line = ""; break }
          line = substr(line, e + 2); incom = 0; continue
        }
        b = index(line, "/*"); l = index(line, "//")
        if (l && (!b || l < b)) { out = out substr(line, 1, l - 1); line = ""; break }
        if (!b) { out = out line; break }
        out = out substr(line, 1, b - 1); line = substr(line, b + 2); incom = 1
      }
      gsub(/"([^"\\]|\\.)*"/, "", out)
      while (match(out, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
        id = substr(out, RSTART, RLENGTH); sub(/[ \t]*\($/, "", id)
        names[FILENAME] = names[FILENAME] " " id
        out = substr(out, RSTART + RLENGTH)
      }
      hdr[FILENAME] = 1
    }
    END {
      for (h in hdr) {
        # the headers h reaches within its folder, h included
        delete seen; delete files; n = 0; nq = 1; q[1] = h; seen[h] = 1
        for (i = 1; i <= nq; i++) {
          m = split(incs[q[i]], tl, " ")
          for (j = 1; j <= m; j++) if (!(tl[j] in seen)) { seen[tl[j]] = 1; q[++nq] = tl[j] }
        }
        unit = base(h); sub(/\.h$/, "", unit)
        list = ""
        for (i = 1; i <= nq; i++) {
          m = split(names[q[i]], ids, " ")
          for (j = 1; j <= m; j++) {
            if (!(ids[j] in def)) continue
            f = def[ids[j]]
            if (dirof(f) != dirof(h) || (f in files)) continue
            b = base(f)
            if (b == unit ".c" || index(b, unit "_") == 1) continue
            files[f] = 1; n++; list = list (list == "" ? "" : ", ") b
          }
        }
        if (n >= 3)
          printf "umbrella: %s declares functions of %d files of its folder (%s): declare each unit'"'"'s in its own header\n", h, n, list
      }
    }' $benchfiles | LC_ALL=C sort)
fi
longfns=$(lstrip G)
pendlong=$(lstrip P)
stale=$(printf '%s\n%s\n' "$stale" "$(lstrip S)" | sed '/^$/d')
nallowed=$(echo "$longs" | grep -c '^A$' || true)
[ -z "$longfns" ] || sizes=$(printf '%s\n%s\n' "$sizes" "$longfns" | sed '/^$/d')


count() { [ -z "$1" ] && echo 0 || echo "$1" | wc -l; }
nb=$(count "$backups")
nc=$(count "$circles")
nn=$(count "$byname")
ns=$(count "$sizes")
nu=$(count "$umbrellas")
[ -n "$backups" ] && echo "$backups"
[ -n "$circles" ] && echo "$circles"
[ -n "$byname" ] && echo "$byname"
[ -n "$pending" ] && echo "$pending"
[ -n "$pendlong" ] && echo "$pendlong"
[ -n "$stale" ] && echo "$stale" | sed 's/^/warning: /'
for findings in "$sizes" "$umbrellas"; do
  [ -n "$findings" ] || continue
  if [ "$strict" = 1 ]; then echo "$findings"; else echo "$findings" | sed 's/^/warning: /'; fi
done
np=$(count "$pending")
npl=$(count "$pendlong")
echo "check_layers: $(echo "$files" | wc -l) files, $nb back-up includes, $nc circles, $nn by-name, $ns size findings, $nu umbrella headers$([ "$strict" = 1 ] || echo ' (warnings)')$([ -z "$allow" ] || echo ", $np pending"), $nallowed long functions allowed, $npl pending"
[ "$nb" = 0 ] && [ "$nc" = 0 ] && [ "$nn" = 0 ] || exit 1
[ "$strict" = 0 ] || { [ "$ns" = 0 ] && [ "$nu" = 0 ]; } || exit 1
exit 0
