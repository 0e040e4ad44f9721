#!/usr/bin/env python3
"""torch_adamw.py — peer measurement: PyTorch's fused CPU AdamW
(torch.optim.AdamW(fused=True)) stepping one rank's shard of P fp32 params,
the update the paper's CPU baseline performs, measured on the same host as
`plateau bench adam` (doc/performance/README.md lists it as a row to beat).

Run one process per rank at once (analysis/device/adam.sh starts them in the
background) so they share the host as the bench's ranks do.  Each process
writes one result file in the plateau results format (TSV, '#' metadata, the
status/check/note columns) into --out, which report_adam.c reads.

What it measures: opt.step() only (params, grads, m, v all fp32 in host
memory; 16 bytes/param resident).  Not included: gradient D2H or weight H2D
(our `cpu` mode times the whole offloaded step) — the note says so.
Check: before timing, one step on the shard is compared on 4096 sampled
elements with a float64 evaluation of AdamW (decoupled weight decay, bias
correction); relative error must be < 1e-5.
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time


def parse_size(s):
    mult = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    s = s.strip()
    if s and s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(s)


# the plateau result schema, version 2 (`plateau schema`)
COLUMNS = ["bench", "variant", "params", "ranks", "rank", "threads", "time_ms",
           "time_p10_ms", "time_p90_ms", "gparam_s", "status", "check", "note"]


def write(out, rank, meta, row):
    os.makedirs(out, exist_ok=True)
    stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(out, "torch_adamw.%s.%s.%d.%d.tsv" % (
        stamp, socket.gethostname(), os.getpid(), rank))
    with open(path, "x") as f:
        f.write("# plateau-results: 2\n")
        for k, v in meta.items():
            f.write("# %s: %s\n" % (k, v))
        f.write("\t".join(COLUMNS) + "\n")
        f.write("\t".join(str(row.get(c, "-")) for c in COLUMNS) + "\n")
        f.write("# end: ok %s\n" % datetime.datetime.utcnow().strftime(
            "%Y-%m-%dT%H:%M:%SZ"))
    print(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="2625M")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ranks", type=int, default=1,
                    help="processes started at once (recorded)")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    P = parse_size(a.params)
    meta = {"bench": "torch_adamw", "host": socket.gethostname(),
            "argv": " ".join(sys.argv), "utc_start":
            datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")}
    row = {"bench": "torch_adamw", "variant": "torch_fused_adamw", "params": P, "ranks": a.ranks,
           "rank": a.rank, "threads": a.threads, "check": "skip"}
    try:
        import torch
    except Exception as e:  # a bench that cannot run records why
        row.update(status="error", note="torch not importable: %s" % e)
        write(a.out, a.rank, meta, row)
        return 0
    meta["torch"] = torch.__version__
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    row["threads"] = torch.get_num_threads()
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01
    try:
        g = torch.Generator().manual_seed(1234 + a.rank)
        p = torch.empty(P, dtype=torch.float32).uniform_(-0.05, 0.05,
                                                         generator=g)
        p = torch.nn.Parameter(p)
        p.grad = torch.empty(P, dtype=torch.float32).normal_(0, 1e-4,
                                                             generator=g)
        opt = torch.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps,
                                weight_decay=wd, fused=True)
        # check: first step on samples against float64 AdamW
        idx = torch.arange(0, P, max(1, P // 4096), dtype=torch.long)
        p0 = p.detach()[idx].double()
        g0 = p.grad[idx].double()
        opt.step()
        m = (1 - b1) * g0
        v = (1 - b2) * g0 * g0
        mhat, vhat = m / (1 - b1), v / (1 - b2)
        want = p0 - lr * wd * p0 - lr * mhat / (vhat.sqrt() + eps)
        got = p.detach()[idx].double()
        rel = ((got - want).abs() / want.abs().clamp_min(1e-30)).max().item()
        row["check"] = "pass" if rel < 1e-5 else "fail"
        for _ in range(a.warmup):
            opt.step()
        t = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            opt.step()
            t.append((time.perf_counter() - t0) * 1e3)
        t.sort()
        med = statistics.median(t)
        row.update(time_ms="%.6g" % med, time_p10_ms="%.6g" % t[0],
                   time_p90_ms="%.6g" % t[-1],
                   gparam_s="%.6g" % (P / (med * 1e-3) / 1e9), status="ok",
                   note="opt.step() only (fp32 grads in host memory; no "
                   "D2H/H2D); first-step max rel err vs float64 %.3g" % rel)
    except MemoryError as e:
        row.update(status="oom", note=str(e))
    except Exception as e:
        row.update(status="error", note=str(e).replace("\t", " ")[:200])
    write(a.out, a.rank, meta, row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
