#!/usr/bin/env python3
"""torch_sdpa.py — the peer row for `plateau bench attention`: PyTorch's
scaled_dot_product_attention (flash and cuDNN backends), causal, bf16, on the
same shapes as the bench (token-major [B, S, H, d] tensors viewed as
[B, H, S, d]), forward and forward+backward.

A measurement of another system, not a dependency of plateau.  TFLOP/s use the
same causal count as plateau: fwd = 4*S^2*d*n_q/2 per sequence, bwd = 2.5*fwd.
GQA: `enable_gqa=True` when the backend accepts it, otherwise K/V are expanded
to n_q heads first (column gqa says which; the expansion is outside the timed
region).  Times: CUDA events, median of --iters after --warmup.

Output: TSV on stdout (or --out), '#' metadata lines first, one row per
(backend, S, pass); a point that fails (OOM, unsupported) gets its status.

  python3 analysis/peers/torch_sdpa.py --seq 4096,8192 --heads 64 --kv-heads 8 \
      --head-dim 128 --out peer.tsv
"""
import argparse
import datetime
import statistics
import sys


def parse_size(s):
    s = s.strip()
    mult = 1
    for suf, m in (("Ki", 1024), ("Mi", 1024 ** 2), ("K", 1000), ("M", 1000 ** 2)):
        if s.endswith(suf):
            s, mult = s[: -len(suf)], m
            break
    return int(s) * mult


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", default="4Ki,8Ki,16Ki,32Ki,64Ki,128Ki")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--backends", default="flash,cudnn")
    ap.add_argument("--passes", default="fwd,fwdbwd")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = open(a.out, "w") if a.out else sys.stdout
    dev = torch.cuda.get_device_name(0)
    # the plateau result-file format (suite/results/results.h), so `plateau report`
    # reads it like a bench's file (bench "peer_torch_sdpa")
    print("# plateau-results: 2", file=out)
    print("# bench: peer_torch_sdpa", file=out)
    print(f"# torch: {torch.__version__}", file=out)
    print(f"# cuda: {torch.version.cuda}", file=out)
    print(f"# cudnn: {torch.backends.cudnn.version()}", file=out)
    print(f"# device: {dev}", file=out)
    print(f"# utc: {datetime.datetime.utcnow().isoformat()}Z", file=out)
    print("# flops: fwd = 4*S^2*d*n_q/2 per sequence (causal), bwd = 2.5*fwd", file=out)
    # the plateau result schema, version 2 (`plateau schema`); variant is
    # the SDPA backend asked for
    cols = ["bench", "variant", "batch", "seq", "n_q", "n_kv", "d", "pass", "gqa",
            "time_ms", "time_p10_ms", "time_p90_ms", "tflops", "dev_peak_bytes",
            "status", "check", "note"]
    print("\t".join(cols), file=out)
    out.flush()

    bmap = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    B, Hq, Hk, d = a.batch, a.heads, a.kv_heads, a.head_dim
    for S in [parse_size(x) for x in a.seq.split(",")]:
        for bname in a.backends.split(","):
            for pname in a.passes.split(","):
                bwd = pname == "fwdbwd"
                ff = 4.0 * S * S * d * Hq / 2 * B
                flops = ff * (3.5 if bwd else 1.0)
                row = dict(bench="peer_torch_sdpa", variant=bname, batch=B, seq=S, n_q=Hq,
                           n_kv=Hk, d=d, **{"pass": pname}, gqa="-", time_ms="-",
                           time_p10_ms="-", time_p90_ms="-", tflops="-", dev_peak_bytes="-",
                           status="ok", check="skip", note="-")
                q = k = v = kx = vx = None
                try:
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                    g = torch.Generator(device="cuda").manual_seed(1)
                    mk = lambda h: torch.randn(B, S, h, d, device="cuda", dtype=torch.bfloat16,
                                               generator=g).transpose(1, 2)
                    q, k, v = mk(Hq), mk(Hk), mk(Hk)
                    if bwd:
                        q.requires_grad_(True); k.requires_grad_(True); v.requires_grad_(True)
                    do = torch.randn(B, S, Hq, d, device="cuda", dtype=torch.bfloat16,
                                     generator=g).transpose(1, 2) if bwd else None

                    def run_gqa():
                        with sdpa_kernel(bmap[bname]):
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                               enable_gqa=(Hq != Hk))
                            if bwd:
                                o.backward(do)
                        return o

                    kx = vx = None

                    def run_expand():
                        with sdpa_kernel(bmap[bname]):
                            o = F.scaled_dot_product_attention(q, kx, vx, is_causal=True)
                            if bwd:
                                o.backward(do)
                        return o

                    fn = run_gqa
                    row["gqa"] = "native" if Hq != Hk else "none"
                    try:
                        fn()
                        torch.cuda.synchronize()
                    except Exception as e:  # backend refuses GQA: expand K/V
                        if Hq == Hk:
                            raise
                        rep = Hq // Hk
                        kx = k.detach().repeat_interleave(rep, dim=1)
                        vx = v.detach().repeat_interleave(rep, dim=1)
                        if bwd:
                            kx.requires_grad_(True); vx.requires_grad_(True)
                        fn = run_expand
                        row["gqa"] = "expanded"
                        row["note"] = ("native gqa refused: " + str(e).splitlines()[0])[:120] \
                            .replace("\t", " ")
                        fn()
                        torch.cuda.synchronize()
                    for _ in range(max(0, a.warmup - 1)):
                        fn()
                    torch.cuda.synchronize()
                    ts = []
                    for _ in range(a.iters):
                        e0 = torch.cuda.Event(enable_timing=True)
                        e1 = torch.cuda.Event(enable_timing=True)
                        e0.record()
                        fn()
                        e1.record()
                        e1.synchronize()
                        ts.append(e0.elapsed_time(e1))
                    ts.sort()
                    med = statistics.median(ts)
                    row.update(time_ms=f"{med:.4f}", time_p10_ms=f"{ts[0]:.4f}",
                               time_p90_ms=f"{ts[-1]:.4f}",
                               tflops=f"{flops / (med * 1e-3) * 1e-12:.2f}",
                               dev_peak_bytes=str(torch.cuda.max_memory_allocated()))
                except torch.cuda.OutOfMemoryError as e:
                    row["status"] = "oom"
                    row["note"] = str(e).splitlines()[0][:120].replace("\t", " ")
                except Exception as e:
                    row["status"] = "error"
                    row["note"] = (type(e).__name__ + ": " + str(e).splitlines()[0])[:160] \
                        .replace("\t", " ")
                finally:
                    q = k = v = kx = vx = None
                print("\t".join(str(row[c]) for c in cols), file=out)
                out.flush()
                print(f"[torch_sdpa] {bname} S={S} {pname}: {row['status']} "
                      f"{row['time_ms']} ms {row['tflops']} TFLOP/s ({row['gqa']})", file=sys.stderr)
    print(f"# end: ok {datetime.datetime.utcnow().isoformat()}Z", file=out)


if __name__ == "__main__":
    main()
