#!/usr/bin/env python3
"""liger_ce.py — a MEASUREMENT OF ANOTHER SYSTEM (Liger-Kernel), not a dependency.

The peer row of the one-rank vocabulary head: Liger's fused linear
cross-entropy (PyPI package liger-kernel, LigerFusedLinearCrossEntropyLoss),
forward + backward, on the shapes of `plateau bench vocab` (bf16, H 7168,
V 200,000, N 16K and 32K by default), one GPU.  Liger runs the schedule our
three-GEMM head runs: token chunks against the whole vocabulary, the softmax
gradient formed in place in the chunk's bf16 logits, dX and dW (bf16,
accumulated over the chunks) from it, no recompute.

    loss = LigerFusedLinearCrossEntropyLoss(ignore_index=-100)(w, x, t)
    loss.backward()                      (x: N×H, w: V×H, bf16; mean)

Peak = torch.cuda.max_memory_allocated() after resetting the peak with the
inputs allocated (X, W and the targets included, as our bench's
dev_peak_bytes); memory above the inputs is that minus X and W (the report
and analysis/device/speed.sh compute it the same way for both).  Time = CUDA
events around fwd+bwd, median (p10, p90) of -n iterations after -w warm-ups;
gradients are dropped between iterations.  Ignore-index rows (every 61st
target = -100) as in bench_vocab.  Check: the loss against PyTorch's dense
linear + cross_entropy on the first 1024 rows (relative error < 1e-2; "skip"
with --no-check).

It needs liger_kernel and refuses to run without it: exit 3 with a message
saying how to get it (pip install liger-kernel; on a machine without the
registry, a wheel carried in and installed with pip --no-index).  Nothing in
plateau imports or needs this script.

Output: a result file in the plateau format (schema 2, '#' metadata with
bench: vocab and peer: Liger-Kernel <version>, rows with variant "liger") in
-o DIR, so `plateau report` puts these rows beside ours.

usage: python3 analysis/peers/liger_ce.py [--tokens 16384,32768] [--hidden 7168]
         [--vocab 200000] [--dtypes bf16] [-w 1] [-n 5] [--no-check] [-o DIR]
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
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("-w", "--warmup", type=int, default=1)
    ap.add_argument("-n", "--iters", type=int, default=5)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--out", default="results/runs/peers")
    a = ap.parse_args()
    try:
        import liger_kernel
        from liger_kernel.transformers.fused_linear_cross_entropy import (
            LigerFusedLinearCrossEntropyLoss)
    except ImportError as e:
        print("liger_ce.py: liger_kernel is not importable (%s): nothing "
              "measured.  Install the PyPI package liger-kernel (pip install "
              "liger-kernel; offline: pip install --no-index --find-links "
              "DIR liger-kernel with its wheel carried in DIR)" % e,
              file=sys.stderr)
        return 3
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print("liger_ce.py: PyTorch not importable (%s): nothing measured" % e,
              file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("liger_ce.py: no CUDA device: nothing measured", file=sys.stderr)
        return 3
    try:
        from importlib.metadata import version
        lver = version("liger-kernel")
    except Exception:
        lver = getattr(liger_kernel, "__version__", "?")
    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    # the plateau result schema, version 2 (`plateau schema`)
    cols = ["bench", "variant", "kernel", "tokens", "hidden", "vocab", "ranks",
            "dtype", "math", "block", "mode", "time_ms", "time_p10_ms",
            "time_p90_ms", "dev_peak_bytes", "live_set", "max_err", "status",
            "check", "note"]
    os.makedirs(a.out, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(a.out, "vocab-liger.%s.%s.%d.0.tsv" % (
        stamp, socket.gethostname(), os.getpid()))
    f = open(path, "x")
    meta = {
        "bench": "vocab",
        "backend": "cuda",
        "peer": "Liger-Kernel %s, PyTorch %s (a measurement of another system)"
                % (lver, torch.__version__),
        "device": torch.cuda.get_device_name(0),
        "cuda": str(torch.version.cuda),
        "utc_start": stamp,
        "argv": " ".join(sys.argv),
        "iters": str(a.iters),
        "warmup": str(a.warmup),
    }
    f.write("# plateau-results: 2\n")
    for k, v in meta.items():
        f.write("# %s: %s\n" % (k, v))
    f.write("\t".join(cols) + "\n")
    f.flush()

    def pct(xs, p):
        xs = sorted(xs)
        k = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
        return xs[k]

    H, V = a.hidden, a.vocab
    loss_fn = LigerFusedLinearCrossEntropyLoss(ignore_index=-100)
    print("# variant tokens dtype time_ms dev_peak_bytes status")
    rc = 0
    for n in [int(s) for s in a.tokens.split(",")]:
        for dt in a.dtypes.split(","):
            tdt = torch.float32 if dt == "f32" else torch.bfloat16
            row = {"bench": "vocab", "variant": "liger",
                   "kernel": "liger-flce", "tokens": n, "hidden": H,
                   "vocab": V, "ranks": 1, "dtype": dt,
                   "math": "fp32" if dt == "f32" else "-", "block": "-",
                   "mode": "-", "check": "skip"}
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
                    out = loss_fn(w, x, t)
                    loss = out[0] if isinstance(out, tuple) else out
                    loss.backward()
                    return loss

                for _ in range(a.warmup):
                    step()
                times = []
                for _ in range(a.iters):
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    e0.record()
                    loss = step()
                    e1.record()
                    e1.synchronize()
                    times.append(e0.elapsed_time(e1))
                peak = torch.cuda.max_memory_allocated()
                err = "-"
                if not a.no_check:
                    m = min(n, 1024)
                    with torch.no_grad():
                        out = loss_fn(w, x[:m], t[:m])
                        got = float(out[0] if isinstance(out, tuple) else out)
                        ref = float(F.cross_entropy((x[:m].float() @ w.float().t()),
                                                    t[:m], ignore_index=-100))
                    rel = abs(got - ref) / max(abs(ref), 1e-30)
                    err = "%.3g" % rel
                    row["check"] = "pass" if rel < 1e-2 else "fail"
                    if row["check"] == "fail":
                        rc = 1
                row.update(time_ms="%.6g" % statistics.median(times),
                           time_p10_ms="%.6g" % pct(times, 10),
                           time_p90_ms="%.6g" % pct(times, 90),
                           dev_peak_bytes=str(peak), live_set="-", max_err=err,
                           status="ok",
                           note="Liger fused linear cross-entropy %s, one GPU; "
                                "peak includes X, W, targets" % lver)
            except torch.cuda.OutOfMemoryError:
                row.update(status="oom", note="Liger: CUDA out of memory")
            finally:
                x = w = t = None
                torch.cuda.empty_cache()
            f.write("\t".join(str(row.get(c, "-")) for c in cols) + "\n")
            f.flush()
            print("liger", n, dt, row.get("time_ms", "-"),
                  row.get("dev_peak_bytes", "-"), row["status"])
    f.write("# end: ok %s\n" % datetime.datetime.now(
        datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    f.close()
    print(path)
    return rc


if __name__ == "__main__":
    sys.exit(main())
