#!/usr/bin/env bash
# test_guides.sh — the README (the front page) and the guides in doc/guide/
# hold together:
#   - every relative Markdown link resolves: its file exists and its anchor
#     (`#...`), when it has one, is the anchor of a heading of that file (as
#     GitHub makes them: lower case, punctuation dropped, spaces to `-`);
#   - the table of contents between `<!-- contents: begin -->` and
#     `<!-- contents: end -->` of the README and of every guide lists that
#     file's `##` and `###` headings, in order, with their anchors;
#   - the README stays a front page: at most 300 lines.
# Each check is shown to catch a fault: run on a copy with a broken anchor, a
# heading missing from the contents, or a README grown past 300 lines, it must
# fail and name the fault.
#
#   bash doc/test_guides.sh            check
#   bash doc/test_guides.sh --write    rewrite every contents block from the headings
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# check ROOT [--write]: the checks above on ROOT's README.md and doc/guide/*.md;
# prints one line per fault, exit 1 when there is one
check() {
  python3 - "$@" <<'EOF'
import glob, os, re, sys
root, write = sys.argv[1], "--write" in sys.argv[2:]
docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "doc/guide/*.md")))
BEGIN, END = "<!-- contents: begin -->", "<!-- contents: end -->"

def slug(text):
    s = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return s.replace(" ", "-")

def headings(path):
    """(level, text, anchor) of every heading outside fenced code."""
    out, seen, fence = [], {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^(#{1,6}) +(.*?)\s*$", line)
        if m:
            a = slug(m.group(2))
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.append((len(m.group(1)), m.group(2), a if n == 0 else f"{a}-{n}"))
    return out

def contents(path):
    return [("  " if lvl == 3 else "") + f"- [{t}](#{a})" for lvl, t, a in headings(path) if lvl in (2, 3)]

faults = []
for d in docs:
    rel = os.path.relpath(d, root)
    text = open(d, encoding="utf-8").read()
    lines = text.split("\n")
    if BEGIN not in lines or END not in lines:
        faults.append(f"{rel}: no contents block ({BEGIN} ... {END})")
    else:
        b, e = lines.index(BEGIN), lines.index(END)
        want = contents(d)
        if write:
            lines[b + 1:e] = want
            open(d, "w", encoding="utf-8").write("\n".join(lines))
        elif lines[b + 1:e] != want:
            missing = [w for w in want if w not in lines[b + 1:e]]
            extra = [l for l in lines[b + 1:e] if l not in want]
            faults.append(f"{rel}: contents differ from the headings (missing {missing[:3]}, "
                          f"stale {extra[:3]}): bash doc/test_guides.sh --write")
    fence = False
    for no, line in enumerate(lines, 1):
        if line.startswith("```"):
            fence = not fence
        if fence or line.startswith("    "):
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z]+:", target):
                continue
            f, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(d), f)) if f else d
            if not os.path.exists(path):
                faults.append(f"{rel}:{no}: link to {target}: no such file")
            elif anchor and path.endswith(".md") and anchor not in [a for _, _, a in headings(path)]:
                faults.append(f"{rel}:{no}: link to {target}: no heading with anchor #{anchor}")
n = len(open(docs[0], encoding="utf-8").read().rstrip("\n").split("\n"))
if n > 300:
    faults.append(f"README.md: {n} lines, a front page has at most 300 (move the detail to a guide)")
for f in faults:
    print(f)
sys.exit(1 if faults else 0)
EOF
}

if [[ ${1:-} == --write ]]; then
  check . --write
  exit
fi

nfail=0
if out=$(check .); then
  echo "ok: links, anchors and contents of README.md and doc/guide/*.md agree"
else
  echo "FAIL:"
  echo "$out" | sed 's/^/    /'
  nfail=$((nfail + 1))
fi

# the checks catch a fault: each broken copy must fail, naming it
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy() {
  rm -rf "$tmp/c"
  mkdir -p "$tmp/c/doc"
  cp README.md "$tmp/c/"
  cp -r doc/guide "$tmp/c/doc/"
}
catches() { # catches WHAT REGEX: the broken copy fails with a line matching REGEX
  if out=$(check "$tmp/c"); then
    echo "FAIL: $1 was not found"
    nfail=$((nfail + 1))
  elif grep -qE "$2" <<<"$out"; then
    echo "ok: $1 is found"
  else
    echo "FAIL: $1: the message does not name it: $out"
    nfail=$((nfail + 1))
  fi
}
copy
echo 'See [nothing](doc/guide/training.md#no-such-heading).' >>"$tmp/c/README.md"
catches "a link to a heading that does not exist" 'README\.md:[0-9]+: link to .*#no-such-heading'
copy
echo 'See [gone](doc/guide/gone.md).' >>"$tmp/c/doc/guide/training.md"
catches "a link to a file that does not exist" 'training\.md:[0-9]+: link to doc/guide/gone\.md: no such file'
copy
printf '\n## A section the contents lack\n' >>"$tmp/c/doc/guide/planner.md"
catches "a heading missing from the contents" 'planner\.md: contents differ.*a-section-the-contents-lack'
copy
yes '' | head -300 >>"$tmp/c/README.md"
echo 'one line too many' >>"$tmp/c/README.md"
catches "a README past 300 lines" 'README\.md: [0-9]+ lines'

echo "test_guides.sh: $nfail failed"
[[ $nfail -eq 0 ]]
