#!/usr/bin/env bash
# test_plan.sh — `plateau plan`: a configuration that fits exits 0 and prints
# the budget table (every Eq. 6 term, the total against HBM, the host, the
# time and the runner-up of the automatic choice); one that does not exits 1
# and names its binding term; --format tsv writes the schema's columns;
# FSDP2 too; whether adversarial routing fits is said in words; --machine
# lists every parameter with its unit and meaning; a calib result file
# changes the machine; bad values exit 2 with a message naming the value and
# write nothing on stdout: --set values outside what the model takes (0, nan,
# inf, negative, 2^64 bytes), --calib files of another schema, with a nan
# rate, a FIFO, empty list elements, a --table output that cannot be written
# (refused before the work); --table paper -o DIR prints progress per point
# on stderr and writes the Markdown, the TSVs and (with gnuplot) the reach
# chart as SVG and PNG, renamed into place, and analysis/plan_reach.gp
# renders a small reach file with its legend outside the panels.
# Usage: BUILD=build bash suite/cli/test_plan.sh
set -uo pipefail
PL_TEST=test_plan.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

# fits: exit 0, the table's parts
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki 2>&1); rc=$?
[[ $rc -eq 0 ]] && pass || fail "120b/16/128K: exit $rc: $out"
for want in "per-rank device memory at the peak" "weights" "grads" "dispatch" \
  "resident" "total" "usable" "host memory per node" "fits:" "tok/s/GPU" \
  "runner-up:" "configuration (chosen:"; do
  [[ $out == *"$want"* ]] && pass || fail "table lacks '$want'"
done

# explicit and too long: exit 1, the binding term named
out=$("$BIN" plan --config explicit --seq 1Mi 2>&1); rc=$?
[[ $rc -eq 1 ]] && pass || fail "explicit 1M: exit $rc (want 1)"
[[ $out == *"DOES NOT FIT — binding term: acts"* ]] && pass || fail "no binding term: $out"

# tsv: the header and one row, the schema's names
"$BIN" plan --format tsv --seq 64Ki >"$tmp/p.tsv" 2>&1 || fail "tsv exit $?"
[[ $(wc -l <"$tmp/p.tsv") -eq 2 ]] && pass || fail "tsv: $(wc -l <"$tmp/p.tsv") lines"
hdr=$(head -1 "$tmp/p.tsv")
for col in bench variant ranks seq tokens status dev_peak_bytes dispatch_bytes \
  logits_bytes boundary_bytes time_ms tok_s_gpu tflops live_set note; do
  [[ $'\t'$hdr$'\t' == *$'\t'$col$'\t'* ]] && pass || fail "tsv lacks column $col"
done
[[ $(cut -f10 "$tmp/p.tsv" | tail -1) == ok ]] && pass || fail "tsv status"
# live_set as the result files write it: tag=size items, single spaces, no
# comma, every row as many fields as the header
live=$(awk -F'\t' 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "live_set") c = i} NR == 2 {print $c}' "$tmp/p.tsv")
[[ $live =~ ^[a-z_0-9]+=[0-9.]+[KMG]?i?B( [a-z_0-9]+=[0-9.]+[KMG]?i?B)+$ ]] && pass || fail "tsv live_set '$live'"
[[ $(awk -F'\t' '{print NF}' "$tmp/p.tsv" | sort -u | wc -l) -eq 1 ]] && pass || fail "tsv rows of unequal width"

# adversarial routing: whether it fits, said plainly
# (Ep = W: the dispatch over the world, whose adversarial bound is 8x a
# node-sized expert group's; D = 8: 128K tokens per rank)
out=$("$BIN" plan --model 667b --gpus 64 --seq 1Mi --ep 64 --D 8 2>&1); rc=$?
[[ $rc -eq 0 && $out =~ "adversarial routing (every route to one rank): "[0-9.]+" GiB: DOES NOT FIT" ]] && pass ||
  fail "667b/64/1M: the adversarial peak is not called unfit: $(grep adversarial <<<"$out")"
[[ $out == *"with balanced routing; NOT with adversarial routing"* ]] && pass || fail "667b/64/1M: the verdict hides the adversarial peak"
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki 2>&1)
[[ $out == *"GiB: fits ("* && $out == *"(and with adversarial routing)"* ]] && pass || fail "120b/16/128K: adversarial fit not said"

# fsdp2: fits at 32K on 16 GPUs, its own formulas
out=$("$BIN" plan --system fsdp2 --seq 32Ki 2>&1); rc=$?
[[ $rc -eq 0 && $out == *"cp="* && $out == *"dense CE"* ]] && pass || fail "fsdp2: exit $rc: $out"
# fsdp2 --tokens: 3 sequences of 32K per step over 16 GPUs is one CP group
# of 16 (cp=16) with 3 micro-batches
out=$("$BIN" plan --system fsdp2 --seq 32Ki --tokens 96Ki 2>&1); rc=$?
[[ $rc -eq 0 && $(grep '^# configuration' <<<"$out") == *"cp=16 "*" micro=3" ]] && pass ||
  fail "fsdp2 --tokens 96Ki: exit $rc: $(grep '^# configuration' <<<"$out")"
out=$("$BIN" plan --system fsdp2 --seq 1Mi 2>&1); rc=$?
[[ $rc -eq 1 && $out == *"no configuration fits"* ]] && pass || fail "fsdp2 1M: exit $rc: $out"

# the machine from a calib result file (a small one written here)
cal=$tmp/calib.tsv
calib_file() { # calib_file SCHEMA GEMM_TFLOPS > file
  printf '# plateau-results: %s\n# bench: calib\n' "$1"
  printf 'bench\tvariant\tbytes\tranks\tdtype\tmnk\talgbw_gbs\tbusbw_gbs\ttflops\tstatus\n'
  printf 'calib\tgemm\t-\t1\tbf16\t8192\t-\t-\t%s\tok\n' "$2"
  printf 'calib\th2d\t268435456\t1\t-\t-\t55.44\t55.44\t-\tok\n# end: ok\n'
}
calib_file 2 754.529 >"$cal"
out=$("$BIN" plan --machine --calib "$cal" 2>&1)
[[ $out == *"machine: $cal"* && $out == *"gemm_tflops=754.529"* && $out == *"h2d_gbs=55.44"* ]] && pass || fail "calib not read: $out"
# calib's alloc row (the allocatable ceiling; the smallest of its ranks')
# bounds the usable HBM below hbm_bytes - hbm_reserve: a point that fits the
# 135.8 GiB of the defaults is refused against a 100 GiB ceiling
{ calib_file 2 754.529 | sed '$d'
  printf 'calib\talloc\t107374182400\t1\t-\t-\t-\t-\t-\tok\n'
  printf 'calib\talloc\t117374182400\t1\t-\t-\t-\t-\t-\tok\n# end: ok\n'; } >"$tmp/calib_alloc.tsv"
out=$("$BIN" plan --machine --calib "$tmp/calib_alloc.tsv" 2>&1)
[[ $out == *"hbm_alloc=107374182400 "* ]] && pass || fail "calib alloc not read: $out"
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki --D 1 2>&1)
[[ $out == *"of 135.80 GiB usable"* ]] && pass || fail "defaults' usable: $out"
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki --D 1 --calib "$tmp/calib_alloc.tsv" 2>&1)
[[ $out == *"of 100.00 GiB usable"* ]] && pass || fail "the ceiling's usable: $out"
out=$("$BIN" plan --machine --set ib_gbs=25,coll_us=5 2>&1)
[[ $out == *"ib_gbs=25"* && $out == *"coll_us=5"* ]] && pass || fail "--set: $out"
# --machine: every parameter with its unit and meaning
out=$("$BIN" plan --machine 2>&1)
for want in "gemm_tflops=793 .*TFLOP/s .*dense bf16 GEMM" "hbm_bytes=150109880320 .*bytes .*device memory per GPU: 139.80 GiB" \
  "ib_lat_us=5 .*us .*latency per message across nodes" "expert_eff=0.85 .*x gemm .*expert GEMMs"; do
  grep -Eq -- "$want" <<<"$out" && pass || fail "--machine lacks /$want/"
done

# bad input: exit 2, the value named, nothing on stdout
bad() {
  local want=$1
  shift
  local o e rc
  o=$(timeout 20 "$BIN" plan "$@" 2>"$tmp/err"); rc=$?
  e=$(cat "$tmp/err")
  [[ $rc -eq 2 ]] && pass || fail "plan $* -> exit $rc (want 2)"
  [[ -z $o ]] && pass || fail "plan $* wrote to stdout"
  [[ $e == *"$want"* ]] && pass || fail "plan $*: message '$e' lacks '$want'"
}
bad "--gpus=0" --gpus 0
bad "999b" --model 999b
bad "12Q" --seq 12Q
bad "D=16" --D 16 --model tiny
bad "D=128: n_q must divide by D" --gpus 128 --D 128
bad "--cp=3" --system fsdp2 --cp 3
bad "--D: a knob of plateau" --system fsdp2 --D 2
bad "Ep=3: an expert group is the whole world" --ep 3
bad "--sco=lots" --sco lots
bad "unknown key 'warp'" --set warp=9
bad "--tokens=1000" --tokens 1000 --D 1
# FSDP2 runs one sequence per CP group per micro-batch: no --mbs; tokens per
# step are made whole by cp and micro-batches
bad "unknown option '--mbs'" --system fsdp2 --mbs 2
bad "--tokens=1000: must be a multiple of one pass's 524288 tokens (W/cp sequences of S: one per CP group" --system fsdp2 --config explicit --seq 32Ki --tokens 1000
bad "tokens per step 1000: no cp makes it a whole number of passes" --system fsdp2 --seq 32Ki --tokens 1000
bad "/nonexistent" --calib /nonexistent/calib.tsv
# the machine's values: each in the range its model accepts
bad "gemm_tflops=0: out of range (allowed: above 0 up to 1000000 TFLOP/s" --set gemm_tflops=0
bad "hbm_gbs=0: out of range (allowed: above 0" --set hbm_gbs=0
bad "host_bytes=0: out of range (allowed: above 0 up to 1000000000000000 B" --set host_bytes=0
bad "hbm_bytes=18446744073709551616: out of range" --set hbm_bytes=18446744073709551616
bad "hbm_bytes=2e15: out of range" --set hbm_bytes=2e15
bad "ib_gbs=-1: out of range" --set ib_gbs=-1
bad "ib_lat_us=-5: out of range (allowed: 0 up to" --set ib_lat_us=-5
bad "h2d_gbs=nan: not a finite number" --set h2d_gbs=nan
bad "nvl_gbs=inf: not a finite number" --set nvl_gbs=inf
bad "expert_eff=3: out of range (allowed: above 0 up to 2 x gemm" --set expert_eff=3
bad "gpus_per_node=0: out of range (allowed: an integer 1..1024)" --set gpus_per_node=0
bad "must exceed the reserve" --set host_reserve=4Ti
bad "--set=ib_gbs=25,: empty list element" --set ib_gbs=25,
bad "--set=,ib_gbs=25: empty list element" --set ,ib_gbs=25
bad "--calib=$cal,,$cal: empty list element" --calib "$cal,,$cal"
# --calib: a schema this build reads, finite rates, a regular file
calib_file 99 754.529 >"$tmp/c99.tsv"
bad "result schema version 99 is not one this plateau reads" --calib "$tmp/c99.tsv"
calib_file 2 nan >"$tmp/cnan.tsv"
bad "line 4: column tflops is 'nan' (allowed: a finite number > 0" --calib "$tmp/cnan.tsv"
calib_file 2 -3 >"$tmp/cneg.tsv"
bad "line 4: column tflops is '-3'" --calib "$tmp/cneg.tsv"
# a rate the file sets is held to --set's bounds (1e308 TFLOP/s is no GPU)
calib_file 2 1e308 >"$tmp/chuge.tsv"
bad "gemm_tflops=1e+308 from the file: out of range (allowed: above 0 up to 1000000 TFLOP/s" --calib "$tmp/chuge.tsv"
bad "gemm_tflops=1e308: out of range (allowed: above 0 up to 1000000 TFLOP/s" --set gemm_tflops=1e308
mkfifo "$tmp/fifo.tsv"
bad "fifo.tsv: not a regular file" --calib "$tmp/fifo.tsv"
# --table's output directory: checked before the half minute of work
t0=$(date +%s)
echo keep >"$tmp/afile" # a file of ours, never a device node of the machine
bad "--out=$tmp/afile: '$tmp/afile' exists and is not a directory" --table paper -o "$tmp/afile"
[[ $(cat "$tmp/afile") == keep ]] && pass || fail "--out at a regular file changed it"
mkdir -p "$tmp/tbl/plan_paper.md"
bad "plan_paper.md exists and is not a regular file" --table paper -o "$tmp/tbl"
[[ $(($(date +%s) - t0)) -le 10 ]] && pass || fail "a bad --out was refused only after the work"
"$BIN" plan --help >/dev/null 2>&1 && pass || fail "--help"

# the reach chart from a small file (columns by name)
if command -v gnuplot >/dev/null; then
  printf '# reach\nmodel\tranks\tsystem\tmax_context\tmax_tokens_step\tpaper_max_context\n' >"$tmp/r.tsv"
  for m in 120b 241b 667b; do
    printf '%s\t16\tplateau\t1048576\t1\t1048576\n%s\t32\tplateau\t2097152\t1\t-\n' $m $m >>"$tmp/r.tsv"
    printf '%s\t16\tfsdp2\t131072\t1\t131072\n%s\t32\tfsdp2\t-\t0\t-\n' $m $m >>"$tmp/r.tsv"
  done
  gnuplot -c "$ROOT/analysis/plan_reach.gp" "$tmp/r.tsv" "$tmp/r.svg" >/dev/null 2>&1 && pass || fail "plan_reach.gp failed"
  [[ -s $tmp/r.svg && $(grep -c '<path' "$tmp/r.svg") -gt 10 ]] && pass || fail "no chart drawn"
  [[ $(grep -c 'FSDP2-best' "$tmp/r.svg") -gt 0 ]] && pass || fail "chart lacks its titles"
fi

# the paper's table: files, the paper's figures beside ours, the chart
if "$BIN" plan --table paper -o "$tmp/paper" >"$tmp/paper.out" 2>"$tmp/paper.err"; then pass; else fail "table: $(cat "$tmp/paper.out" "$tmp/paper.err")"; fi
# progress: a line per point on stderr, none in the outputs
[[ $(grep -c '^\[plan --table paper\] point [0-9]*/144 .*ETA' "$tmp/paper.err") -eq 144 ]] && pass || fail "progress lines: $(head -3 "$tmp/paper.err")"
! grep -q 'plan --table paper\] point' "$tmp/paper.out" "$tmp"/paper/*.md "$tmp"/paper/*.tsv && pass || fail "progress in the outputs"
[[ -z $(find "$tmp/paper" -name '.*') ]] && pass || fail "temporary files left: $(ls -A "$tmp/paper")"
md=$tmp/paper/plan_paper.md
[[ -s $md && $(grep -c projection "$md") -gt 0 ]] && pass || fail "no Markdown"
grep -q "| 120b | 16 | 128K |.*| 1355 (91) | 178 (7.6× less) |" "$md" && pass || fail "paper's 120B/128K figures missing"
grep -q "| 667b | 64 | 1M |.*| 124 (233) | OOM |" "$md" && pass || fail "paper's 667B/1M figures missing"
grep -q "| 241b | 32 | .* | 32K | .* | 1.8M (7×) |" "$md" && pass || fail "paper's 241B reach/batch missing"
[[ $(grep -c $'^plan\t' "$tmp/paper/plan_paper.tsv") -eq 108 ]] && pass || fail "plan_paper.tsv rows"
[[ $(grep -vc '^#' "$tmp/paper/plan_reach.tsv") -eq 19 ]] && pass || fail "plan_reach.tsv rows"
if command -v gnuplot >/dev/null; then
  [[ -s $tmp/paper/plan_reach.svg ]] && pass || fail "no plan_reach.svg"
  # a PNG beside the SVG, both paths printed
  [[ $(head -c 8 "$tmp/paper/plan_reach.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] && pass ||
    fail "no plan_reach.png"
  [[ $(grep -c 'plan_reach\.\(svg\|png\)$' "$tmp/paper.out") -eq 2 ]] && pass || fail "chart paths not printed"
fi

# --system as a list, as bench train takes it: each system planned in turn,
# each given its own knobs (--D to plateau, --cp to fsdp2) and the shared ones
out=$("$BIN" plan --system plateau,fsdp2 --model 120b --gpus 16 --seq 128Ki --D 4 --cp 2 2>&1); rc=$?
[[ $rc -le 1 && $out == *"== plateau plan --system=plateau"*"== plateau plan --system=fsdp2"* ]] && pass ||
  fail "--system plateau,fsdp2: exit $rc: ${out:0:300}"
[[ $out == *"configuration"*"D=4 "*"configuration"*"cp=2 "* ]] && pass || fail "--system list: knobs not passed to their system"
for bad in "plateau,nope" "plateau,plateau" "plateau,"; do
  "$BIN" plan --system "$bad" >"$tmp/o" 2>"$tmp/e"; rc=$?
  [[ $rc -eq 2 && ! -s $tmp/o ]] && grep -q -- "--system" "$tmp/e" && pass || fail "--system $bad: exit $rc: $(cat "$tmp/e")"
done
"$BIN" plan --system plateau,fsdp2 --format tsv >"$tmp/o" 2>"$tmp/e"; rc=$?
[[ $rc -eq 2 && ! -s $tmp/o ]] && pass || fail "--system list with --format tsv: exit $rc"

# the configuration line writes every byte budget in binary units (never
# "keep=14560M" beside "resident=21.3GiB")
out=$("$BIN" plan --model 120b --gpus 16 --seq 128Ki --keep 14560M --optim-resident 20G 2>&1)
line=$(grep '^# configuration' <<<"$out")
[[ $line == *" keep=13.6GiB"* && $line == *" resident=18.6GiB"* ]] && pass || fail "configuration units: $line"

echo "test_plan.sh: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
