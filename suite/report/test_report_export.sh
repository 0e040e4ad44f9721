#!/usr/bin/env bash
# test_report_export.sh — `plateau report RUN_DIR --format csv|json` on the
# committed reference results (cpu, h200x1): one table per bench, loaded back
# with python3's csv and json modules: every row of every result file of the
# bench (counted here from the TSV files themselves), the metadata columns
# (file, machine, commit, date, point, ...) filled, units in the header, the
# same cells in both formats and in the TSV, numbers as JSON numbers and "-"
# as null; a bad --format exits 2 and writes nothing.
# Usage: BUILD=build bash suite/report/test_report_export.sh
set -uo pipefail
PL_TEST=test_report_export.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
command -v python3 >/dev/null || { echo "$PL_TEST: no python3: skipped"; exit 0; }

ref=$ROOT/results/reference
for r in cpu h200x1; do
  mkdir -p "$tmp/$r"
  tar -C "$ref/$r" --exclude=./report -cf - . | tar -C "$tmp/$r" -xf -
  for f in csv json; do
    if "$BIN" report "$tmp/$r" --format "$f" >"$tmp/$r.$f.out" 2>"$tmp/$r.$f.err" &&
      grep -q "^$tmp/$r/report/train\.$f$" "$tmp/$r.$f.out"; then pass; else
      fail "report $r --format $f: exit or listing: $(tail -2 "$tmp/$r.$f.err")"
    fi
  done
  # nothing but the asked format written
  [[ -z $(find "$tmp/$r/report" -name '*.md' -o -name '*.svg') ]] && pass || fail "$r: --format wrote Markdown or charts"
  python3 - "$tmp/$r" >"$tmp/$r.py" 2>&1 <<'PY'
import csv, glob, json, os, sys
run = sys.argv[1]
bad = []
# rows per bench, from the TSV files: lines that are not '#', not the header
rows, first = {}, {}
for p in sorted(glob.glob(run + "/*.tsv") + glob.glob(run + "/*/*.tsv")):
    if "/report/" in p:
        continue
    bench, hdr = None, None
    for line in open(p):
        line = line.rstrip("\n")
        if line.startswith("# bench: "):
            bench = line[9:]
        elif line.startswith("#") or not line:
            continue
        elif hdr is None:
            hdr = line.split("\t")
        elif bench:
            rows[bench] = rows.get(bench, 0) + 1
            first.setdefault(bench, (os.path.basename(p), dict(zip(hdr, line.split("\t")))))
for bench, n in rows.items():
    name = bench.replace("/", "_").replace(" ", "_").replace(".", "_")
    c = list(csv.DictReader(open(f"{run}/report/{name}.csv")))
    j = json.load(open(f"{run}/report/{name}.json"))
    if len(c) != n or len(j["rows"]) != n:
        bad.append(f"{bench}: {n} TSV rows, {len(c)} CSV, {len(j['rows'])} JSON")
        continue
    if j["bench"] != bench:
        bad.append(f"{bench}: JSON bench {j['bench']}")
    names = [k["name"] for k in j["columns"]]
    for m in ("file", "machine", "device", "backend", "commit", "date", "sweep", "point", "file_ranks", "finished"):
        if m not in names and "file_" + m not in names:
            bad.append(f"{bench}: no metadata column {m}")
    if len(set(names)) != len(names):
        bad.append(f"{bench}: a column named twice")
    # the metadata of the first file, as its '#' lines say
    meta = {}
    for p in glob.glob(run + "/" + first[bench][0]) + glob.glob(run + "/*/" + first[bench][0]):
        for line in open(p):
            if line.startswith("# ") and ": " in line:  # '# plateau-results: N' too
                k, v = line[2:].rstrip("\n").split(": ", 1)
                meta.setdefault(k, v)
    fr = next(r for r in c if r["file"] == first[bench][0])
    for k, col in (("git_sha", "commit"), ("start_utc", "date"), ("hostname", "machine"), ("point", "point")):
        col = col if col in fr else "file_" + col
        if k in meta and meta[k] != "-" and not fr[col].startswith(meta[k]):
            bad.append(f"{bench}: {col} {fr[col]!r}, file says {meta[k]!r}")
    units = {k["name"]: k["unit"] for k in j["columns"]}
    if "time_ms" in units and (units["time_ms"] != "ms" or "time_ms (ms)" not in c[0]):
        bad.append(f"{bench}: time_ms unit {units['time_ms']}")
    # the first row of the first file, cell by cell, in both formats
    fname, tsv = first[bench]
    cr = next(r for r in c if r["file"] == fname)
    jr = next(r for r in j["rows"] if r["file"] == fname)
    if meta.get("plateau-results") != "2":
        continue  # a v1 file: the reader maps its names (test_report_reference.sh)
    for col, v in tsv.items():
        unit = units.get(col)
        ccol = f"{col} ({unit})" if unit else col
        cv, jv = cr.get(ccol), jr.get(col, "absent")
        if ccol not in cr or jv == "absent":
            continue  # a v1 name the reader maps to the current one
        want = "" if v == "-" else v
        if cv != want:
            bad.append(f"{bench}.{col}: CSV {cv!r}, TSV {v!r}")
        if v == "-" and jv is not None:
            bad.append(f"{bench}.{col}: JSON {jv!r} for '-'")
        if v not in ("-", "nan") and isinstance(jv, (int, float)) and float(v) != jv:
            bad.append(f"{bench}.{col}: JSON {jv!r}, TSV {v!r}")
    if bench == "train" and not isinstance(jr.get("tok_s_gpu"), (int, float, type(None))):
        bad.append(f"train.tok_s_gpu: JSON {jr.get('tok_s_gpu')!r} not a number")
print("\n".join(bad) if bad else "ok", len(rows))
PY
  if [[ $(head -1 "$tmp/$r.py") == "ok "* ]]; then pass; else fail "$r: $(head -5 "$tmp/$r.py")"; fi
done

# bad input: exit 2 naming the value, nothing written
mkdir -p "$tmp/bad"
tar -C "$ref/cpu" --exclude=./report -cf - . | tar -C "$tmp/bad" -xf -
"$BIN" report "$tmp/bad" --format xml >"$tmp/o" 2>"$tmp/e"; rc=$?
[[ $rc == 2 && ! -e $tmp/bad/report ]] && grep -q "'xml'" "$tmp/e" && pass || fail "--format xml: exit $rc, $(cat "$tmp/e")"
"$BIN" report "$tmp/bad" --format >"$tmp/o" 2>"$tmp/e"; rc=$?
[[ $rc == 2 && ! -e $tmp/bad/report ]] && pass || fail "--format without a value: exit $rc"

echo "$PL_TEST: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
