#!/usr/bin/env python3
"""torch_ce.py — a MEASUREMENT OF ANOTHER SYSTEM (PyTorch), not a dependency.

The peer row of the vocabulary head (doc/performance/README.md): PyTorch's dense
linear + cross_entropy, forward + backward, on the shapes of `plateau bench
vocab`, one GPU.  It records what PyTorch itself allocates and how long it
takes, so the report can put PyTorch's numbers beside ours:

    fp32:  loss = F.cross_entropy(x @ w.T, t)              (x: N×H, w: V×H)
    bf16:  loss = F.cross_entropy((x @ w.T).float(), t)     (the upcast the
           paper-style bf16 dense baseline does; bench_vocab's dense mirrors it)
    loss.backward()

Peak = torch.cuda.max_memory_allocated() after resetting the peak with the
inputs allocated (so X and W are included, as in the paper's Table 2).
Time = CUDA events around fwd+bwd, median (p10, p90) of -n iterations after
-w warm-ups.  TF32 is off unless --tf32 (then an extra "torch-tf32" row;
--tf32-only: that row alone for f32, without the slow fp32 one).
Gradients are dropped between iterations.  Ignore-index rows (every 61st
target = -100) as in bench_vocab.

Output: a result file in the plateau format (schema 1, '#' metadata with
bench: vocab and peer: PyTorch <version>, rows with variant "torch") in -o DIR,
so `plateau report` shows these rows in the vocab tables.  Nothing in plateau
imports or needs this script.

usage: python3 analysis/peers/torch_ce.py [--tokens 16384,32768] [--hidden 7168]
         [--vocab 200000] [--dtypes f32,bf16] [-w 1] [-n 3] [--tf32]
         [--tf32-only] [-o DIR]
"""
import argparse
import datetime
import os
import socket
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="16384,32768")
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--vocab", type=int, default=200000)
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("-w", "--warmup", type=int, default=1)
    ap.add_argument("-n", "--iters", type=int, default=3)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--tf32-only", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--out", default="results/runs/peers")
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"torch_ce.py: PyTorch not importable ({e}); nothing measured")
        return 0
    if not torch.cuda.is_available():
        print("torch_ce.py: no CUDA device; nothing measured")
        return 0
    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    # the plateau result schema, version 2 (`plateau schema`)
    cols = ["bench", "variant", "tokens", "hidden", "vocab", "ranks", "dtype",
            "math", "block", "mode", "time_ms", "time_p10_ms", "time_p90_ms",
            "dev_peak_bytes", "live_set", "status", "check", "note"]
    os.makedirs(a.out, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(a.out, f"vocab-torch.{stamp}.{socket.gethostname()}.{os.getpid()}.0.tsv")
    f = open(path, "x")
    meta = {
        "bench": "vocab",
        "backend": "cuda",
        "peer": f"PyTorch {torch.__version__} (a measurement of another system)",
        "device": torch.cuda.get_device_name(0),
        "cuda": str(torch.version.cuda),
        "utc_start": stamp,
        "argv": " ".join(sys.argv),
        "iters": str(a.iters),
        "warmup": str(a.warmup),
    }
    f.write("# plateau-results: 2\n")
    for k, v in meta.items():
        f.write(f"# {k}: {v}\n")
    f.write("\t".join(cols) + "\n")
    f.flush()

    def pct(xs, p):
        xs = sorted(xs)
        k = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
        return xs[k]

    H, V = a.hidden, a.vocab
    runs = []
    for dt in a.dtypes.split(","):
        if not (dt == "f32" and a.tf32_only):
            runs.append((dt, False))
        if dt == "f32" and (a.tf32 or a.tf32_only):
            runs.append((dt, True))
    print("# variant tokens dtype time_ms dev_peak_bytes status")
    for n in [int(s) for s in a.tokens.split(",")]:
        for dt, tf32 in runs:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            tdt = torch.float32 if dt == "f32" else torch.bfloat16
            variant = "torch-tf32" if tf32 else "torch"
            row = {"bench": "vocab", "variant": variant, "tokens": n, "hidden": H, "vocab": V,
                   "ranks": 1, "dtype": dt, "block": "-", "mode": "-",
                   "math": ("tf32" if tf32 else "fp32") if dt == "f32" else "-",
                   "check": "skip"}
            x = w = t = None
            try:
                x = ((torch.rand(n, H, device=dev) * 2 - 1).to(tdt)).requires_grad_()
                s = 1.0 / H ** 0.5
                w = ((torch.rand(V, H, device=dev) * 2 - 1) * s).to(tdt).requires_grad_()
                t = torch.randint(0, V, (n,), device=dev)
                t[60::61] = -100
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()

                def step():
                    x.grad = None
                    w.grad = None
                    y = x @ w.t()
                    if tdt != torch.float32:
                        y = y.float()
                    loss = F.cross_entropy(y, t, ignore_index=-100)
                    del y
                    loss.backward()

                for _ in range(a.warmup):
                    step()
                times = []
                for _ in range(a.iters):
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    e0.record()
                    step()
                    e1.record()
                    e1.synchronize()
                    times.append(e0.elapsed_time(e1))
                peak = torch.cuda.max_memory_allocated()
                row.update(time_ms=f"{statistics.median(times):.6g}",
                           time_p10_ms=f"{pct(times, 10):.6g}",
                           time_p90_ms=f"{pct(times, 90):.6g}",
                           dev_peak_bytes=str(peak), live_set="-", status="ok",
                           note=("PyTorch dense linear+cross_entropy, one GPU"
                                 + ("; TF32 on" if tf32 else "; TF32 off")
                                 + ("; logits upcast .float()" if dt == "bf16" else "")))
            except torch.cuda.OutOfMemoryError:
                row.update(status="oom", note="PyTorch: CUDA out of memory")
            finally:
                x = w = t = None
                torch.cuda.empty_cache()
            line = "\t".join(str(row.get(c, "-")) for c in cols)
            f.write(line + "\n")
            f.flush()
            print(variant, n, dt, row.get("time_ms", "-"), row.get("dev_peak_bytes", "-"),
                  row["status"])
    f.write(f"# end: ok {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}\n")
    f.close()
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
