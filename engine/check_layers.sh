#!/usr/bin/env bash
# check_layers.sh — the include graph of the project against its layers.
#
# Folders are layers (README "Layers"); an #include never runs up a floor:
#   L0 engine/core/ and the core's public headers   L5 engine/train/
#   L1 engine/backend/ (cpu/, cuda/)                 L6 engine/plan/
#   L2 engine/comm/                                  L7 baselines/
#   L3 engine/ops/                                   L8 suite/
#   L4 engine/model/                                 L9 dev/ (may include anything)
# A public header under engine/include/plateau/ has the layer of the module
# that implements it (the table PUBLIC below; a header missing from it is a
# finding, so a new one gets a layer when it is added).
#
# Reads every #include of the C, CUDA and header files under engine/,
# baselines/, suite/ and dev/, resolves it the way the build does (the
# including file's folder, then -Iengine/include -Iengine -Isuite), and prints
#   back-up   an include of a higher layer (file:line, both layers)
#   circle    a cycle of includes between files, and one between layer
#             folders (each circle once, from its smallest name)
#   size      a file over 900 lines (generated files excepted) and a
#             suite/bench_*.c over 250 lines — warnings unless --strict
# Exit status: 1 when there is a back-up include or a circle (with --strict,
# also a size finding), 2 on usage errors, 0 otherwise.
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
PUBLIC="status.h=0 log.h=0 timer.h=0 hd.h=0 host_device.h=0 tensor.h=0 dev.h=0 kernels.h=0 optypes.h=0 file.h=0
comm.h=2 plateau.h=2"

MAX_LINES=900
MAX_BENCH_LINES=250

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
      if (p ~ /^suite\//) return 8
      if (p ~ /^dev\//) return 9
      return -2
    }
    # The folder of a layer (a public header: the folder of its layer).
    function module(p,    l) {
      l = layer(p)
      if (l < 0) return ""
      return l == 0 ? "engine/core" : l == 1 ? "engine/backend" : l == 2 ? "engine/comm" : \
             l == 3 ? "engine/ops" : l == 4 ? "engine/model" : l == 5 ? "engine/train" : \
             l == 6 ? "engine/plan" : l == 7 ? "baselines" : l == 8 ? "suite" : "dev"
    }
    BEGIN {
      n = split(public, kv, /[ \n]+/)
      for (i = 1; i <= n; i++) if (split(kv[i], x, "=") == 2) pub[x[1]] = x[2]
      nsearch = split("engine/include engine suite", search, " ")
    }
    $1 == "F" { have[$2] = 1; next }
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
  case "$f" in
  suite/bench_*.c)
    [ "$n" -gt "$MAX_BENCH_LINES" ] &&
      sizes+="size: $f: $n lines (a bench file over $MAX_BENCH_LINES)"$'\n'
    ;;
  esac
done
sizes=${sizes%$'\n'}

count() { [ -z "$1" ] && echo 0 || echo "$1" | wc -l; }
nb=$(count "$backups")
nc=$(count "$circles")
ns=$(count "$sizes")
[ -n "$backups" ] && echo "$backups"
[ -n "$circles" ] && echo "$circles"
[ -n "$pending" ] && echo "$pending"
[ -n "$stale" ] && echo "$stale" | sed 's/^/warning: /'
if [ -n "$sizes" ]; then
  if [ "$strict" = 1 ]; then echo "$sizes"; else echo "$sizes" | sed 's/^/warning: /'; fi
fi
np=$(count "$pending")
echo "check_layers: $(echo "$files" | wc -l) files, $nb back-up includes, $nc circles, $ns size findings$([ "$strict" = 1 ] || echo ' (warnings)')$([ -z "$allow" ] || echo ", $np pending")"
[ "$nb" = 0 ] && [ "$nc" = 0 ] || exit 1
[ "$strict" = 0 ] || [ "$ns" = 0 ] || exit 1
exit 0
