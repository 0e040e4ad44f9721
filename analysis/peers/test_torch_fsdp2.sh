#!/usr/bin/env bash
# test_torch_fsdp2.sh — the PyTorch FSDP2 peer's parts that run without
# PyTorch or a GPU: it compiles; --list reads the points shared with the
# baseline (fsdp2_points.tsv) and counts the parameters and FLOPs per token
# as pl_model_count / pl_model_flops_per_token do (the C side asserts the
# same counts in baselines/fsdp2/test_mpi_fsdp2.c); a run without --out, an
# unknown point, and (where PyTorch with CUDA is absent) a measuring run stop
# with exit 2 and say why, writing nothing; so does --world 0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
peer=analysis/peers/torch_fsdp2.py
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

python3 -m py_compile "$peer" && ok "compiles" || bad "compiles"
list=$(python3 "$peer" --list)
n=$(printf '%s\n' "$list" | wc -l)
[ "$n" -eq 10 ] && ok "ten points" || bad "ten points (got $n)"
grep -q $'^dense-8k\tdense2b\tseq 8192\tcp1/ep1/ac=full/opt=gpu/mb1\tparams 2007044096\tactive 1875902464\tflops/token 1.287e+10$' <<<"$list" &&
  ok "dense2b counts" || bad "dense2b counts: $(head -1 <<<"$list")"
grep -q $'^moe-32k\tmoe3b\tseq 32768\t.*params 2921893888\tactive 676855808\tflops/token 7.282e+09$' <<<"$list" &&
  ok "moe3b counts" || bad "moe3b counts"
grep -q $'^moe-8k-off\t.*ac=full/opt=cpu' <<<"$list" && ok "offload point" || bad "offload point"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
python3 "$peer" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q -- '--out DIR is required' "$tmp/err" && ok "no --out" || bad "no --out (rc $rc)"
rc=0
python3 "$peer" --list --configs dense-8k,nope 2>"$tmp/err" >/dev/null || rc=$?
[ "$rc" -eq 2 ] && grep -q 'unknown point(s) nope' "$tmp/err" && ok "unknown point" || bad "unknown point (rc $rc)"
rc=0
python3 "$peer" --out "$tmp/out0" --world 0 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q -- '--world 0: a number of GPUs >= 1' "$tmp/err" && [ ! -e "$tmp/out0" ] &&
  ok "--world 0" || bad "--world 0 (rc $rc)"
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  rc=0
  python3 "$peer" --out "$tmp/out" --configs dense-8k 2>"$tmp/err" || rc=$?
  [ "$rc" -eq 2 ] && grep -qE 'PyTorch is not importable|no CUDA device' "$tmp/err" &&
    [ ! -e "$tmp/out" ] && ok "no CUDA: a clear stop" || bad "no CUDA (rc $rc: $(cat "$tmp/err"))"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
