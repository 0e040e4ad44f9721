#!/usr/bin/env bash
# test_torch_fsdp2.sh — the PyTorch FSDP2 peer's parts that run without
# PyTorch or a GPU: it compiles; --list reads the points shared with the
# baseline (fsdp2_points.tsv) and counts the parameters and FLOPs per token
# as pl_model_count / pl_model_flops_per_token do (the C side asserts the
# same counts in baselines/fsdp2/test_mpi_fsdp2.c); a run without --out, an
# unknown point, and (where PyTorch with CUDA is absent) a measuring run stop
# with exit 2 and say why, writing nothing; so does --world 0.  The engine's
# generator in Python (plateau_init.py, behind --init plateau and --data
# synthetic) gives the C header's values (normal and uniform draws at
# indices past 2^23, where the f32 sums round, and past 2^32; the u32 draws
# of the synthetic stream), and its parameter table has the engine's order
# and shapes.
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

# the learning rate's schedule: engine/ops/test_adamw.c's values of
# pl_adamw_lr_at (warm-up 4, lr 2e-3 down to 2e-4 at step 14)
python3 - <<'PY' && ok "lr schedule: the engine's values" || bad "lr schedule"
import argparse, math, sys
sys.path.insert(0, "analysis/peers")
import torch_fsdp2 as t
a = argparse.Namespace(lr=2e-3, lr_warmup=4, lr_decay="constant", lr_min=2e-4,
                       lr_steps=14)
ok = t.lr_at(a, 99, 1) == 2e-3 / 4 and t.lr_at(a, 99, 4) == 2e-3
ok = ok and t.lr_at(a, 99, 50) == 2e-3
for d in ("linear", "cosine"):
    a.lr_decay = d
    ok = ok and abs(t.lr_at(a, 99, 9) - (2e-4 + 1.8e-3 * 0.5)) < 1e-15
    ok = ok and abs(t.lr_at(a, 99, 14) - 2e-4) < 1e-15
    ok = ok and abs(t.lr_at(a, 99, 20) - 2e-4) < 1e-15
ok = ok and abs(t.lr_at(a, 99, 6) -
                (2e-4 + 1.8e-3 * 0.5 * (1 + math.cos(math.pi * 0.2)))) < 1e-15
a.lr_steps = 0  # the point's steps: 14 here
ok = ok and abs(t.lr_at(a, 14, 14) - 2e-4) < 1e-15
sys.exit(0 if ok else 1)
PY
out=$(python3 "$peer" --list --lr-decay cosine --lr-warmup 300 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -q "lr-warmup=300: the cosine decay needs steps after the warm-up" <<<"$out" &&
  ok "a decay that ends inside the warm-up: exit 2" || bad "lr-warmup 300: rc $rc: $out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the generator: the C header's values against the Python integers'
cat >"$tmp/rng.c" <<'EOF'
#include <stdio.h>
#include "plateau/host_device.h"
int main(void) {
  const unsigned long long seeds[3] = {1, 0x9e3779b97f4a7c15ull, 12345678901234567ull};
  const unsigned long long idx[6] = {0, 1, 8388607, 8388609, 4294967301ull, 123456789012ull};
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < 6; i++)
      printf("%.9e %.9e %.9e %u\n", pl_rng_normal(seeds[s], idx[i], 0.0f, 0.0118f),
             pl_rng_uniform(seeds[s], idx[i], 0.9f, 1.1f),
             pl_rng_normal(seeds[s], idx[i], 0.5f, 1.0f), pl_rng_u32(seeds[s], idx[i]));
  return 0;
}
EOF
if ${CC:-cc} -std=c11 -O2 -Iengine/include -o "$tmp/rng" "$tmp/rng.c" 2>"$tmp/err"; then
  "$tmp/rng" >"$tmp/c.txt"
  PYTHONPATH=analysis/peers python3 - >"$tmp/py.txt" <<'EOF'
import plateau_init as pi
for s in (1, 0x9e3779b97f4a7c15, 12345678901234567):
    for i in (0, 1, 8388607, 8388609, 4294967301, 123456789012):
        print("%.9e %.9e %.9e %d" % (pi.rng_normal(s, i, 0.0, 0.0118), pi.rng_uniform(s, i, 0.9, 1.1),
                                     pi.rng_normal(s, i, 0.5, 1.0), pi.rng_u32(s, i)))
EOF
  # 9 digits after the point: a float32 printed exactly enough to tell any two apart
  cmp -s "$tmp/c.txt" "$tmp/py.txt" && [ "$(wc -l <"$tmp/c.txt")" -eq 18 ] &&
    ok "generator: the C header's values" || bad "generator differs from the C header: $(diff "$tmp/c.txt" "$tmp/py.txt" | head -3)"
else
  bad "the generator check's C program did not compile: $(head -3 "$tmp/err")"
fi
tab=$(PYTHONPATH=analysis/peers python3 -c '
import plateau_init as pi
p = dict(hidden=64, layers=3, n_q=4, n_kv=2, head_dim=16, vocab=512, experts=8, topk=2,
         expert_width=32, shared_width=32, dense_width=48, dense_layers=1)
print(" ".join("%s:%dx%d" % (t["name"], t["rows"], t["cols"]) for t in pi.param_table(p)))')
want="embed:512x64 layer0.attn_norm:1x64 layer0.qkv:64x128 layer0.o:64x64 layer0.ffn_norm:1x64 layer0.up:64x96"
want="$want layer0.down:48x64 layer1.attn_norm:1x64 layer1.qkv:64x128 layer1.o:64x64 layer1.ffn_norm:1x64"
want="$want layer1.router:64x8 layer1.up:64x64 layer1.down:32x64 layer1.experts.wg:512x32 layer1.experts.wu:512x32"
want="$want layer1.experts.wd:256x64 layer2.attn_norm:1x64 layer2.qkv:64x128 layer2.o:64x64 layer2.ffn_norm:1x64"
want="$want layer2.router:64x8 layer2.up:64x64 layer2.down:32x64 final_norm:1x64 layer2.experts.wg:512x32"
want="$want layer2.experts.wu:512x32 layer2.experts.wd:256x64 head:64x512"
[ "$tab" = "$want" ] && ok "parameter table: the engine's order and shapes" || bad "parameter table: $tab"
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
