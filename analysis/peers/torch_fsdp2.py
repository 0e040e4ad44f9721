#!/usr/bin/env python3
"""torch_fsdp2.py — peer measurement: the model of the FSDP2 baseline trained
by real PyTorch FSDP2 the way torchtitan trains it, on one GPU, for the points
of analysis/peers/fsdp2_points.tsv (the shapes and knobs our baseline runs:
`plateau bench train --system fsdp2`), so each of its rows has a PyTorch row
beside it (tok/s and peak memory; DESIGN §6: FSDP2-best must not be a
strawman).  PyTorch is a peer we measure, never a dependency.

    python3 analysis/peers/torch_fsdp2.py --out DIR [--configs dense-8k,moe-8k]
    python3 analysis/peers/torch_fsdp2.py --out DIR --world 2   # two GPUs
    python3 analysis/peers/torch_fsdp2.py --list      # the points, no torch

The model (per point: hidden H, layers L, GQA n_q/n_kv heads of head_dim,
vocabulary V): token embedding → L decoder layers → final RMSNorm → untied
head → cross-entropy on the full logits upcast to fp32 (torchtitan's loss).
A layer: RMSNorm → attention (separate q, k, v, o projections without bias,
RoPE rotate-half with theta rope_theta, SDPA causal with GQA) → residual →
RMSNorm → FFN → residual.  FFN: a dense SwiGLU of dense_width in the first
dense_layers layers; else MoE: a softmax router (fp32 scores, top-k chosen
on score + the DeepSeek-V3 balancing bias, weights renormalized over the
chosen; the bias moves by 1e-3·sign(mean load − load) after each step, never
part of the gradient), `experts` routed SwiGLU experts of expert_width
(torch._grouped_mm over expert-sorted rows padded to 16 per expert when this
PyTorch has it and it agrees with the loop on a check, else a loop over the
experts), one shared SwiGLU expert of shared_width; route weights applied at
the combine.  Parameters counted as pl_model_count does (metadata "params").

Parallelism as torchtitan applies it, over --world W GPUs of this host (default
1): the script starts W processes itself (torch.multiprocessing, no torchrun),
one per GPU, in one NCCL process group on a 1-D mesh of W (FSDP over all of
them: dp_shard = W), each rank its own sequences (seeded by its rank), as our
baseline's ranks at cp = ep = 1.  Activation checkpointing per layer first
(checkpoint_wrapper, non-reentrant; full = every layer, selective = every
other layer: layer l wrapped iff (l + 1) % 2 == 0), then fully_shard on the
embedding, every layer (reshard_after_forward except the last), [final
norm, head] (not resharded after forward) and the root, with
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) and, for optim
"cpu", CPUOffloadPolicy(pin_memory=True).  AdamW (lr 1e-3, betas 0.9/0.999,
eps 1e-8, weight decay 0.01; fused, else foreach), clip_grad_norm_ 1.0; the
learning rate's schedule as `plateau bench train`'s (--lr, --lr-warmup,
--lr-decay, --lr-min, --lr-steps: lr_at, the engine's pl_adamw_lr_at), set
on the optimizer's groups before each step.
cp and ep must be 1 here (no context or expert parallelism in the peer).

Measured per point: `warmup` steps, then `steps` timed steps (a step:
forward and backward of each micro-batch, clipping, the optimizer, the bias
update; the wall time between CUDA synchronizations): the median and the
spread (time_ms, time_p10_ms, time_p90_ms; a step's time is the slowest
rank's), tok_s_gpu = tokens of one rank / median,
tflops by the FLOP formula of pl_model_flops_per_token (6 · active
parameters + 6 · S · head_dim · n_q · L per token), and the memory of the
timed steps: dev_peak_bytes = torch.cuda.max_memory_allocated (the caching
allocator's live tensors: the analogue of our tracked device peak; the
largest over the ranks), pool_peak_bytes = max_memory_reserved, flops the
step's model FLOPs of one rank.  Rank 0 writes the file; ranks = W.  An
out-of-memory point is a row with status oom.  Rows use the result schema's
columns (suite/results/schema.def; tokens = tokens per step of the one rank, variant
= pl_fsdp2_cfg_name's spelling, the point's name and the loss in the note),
one TSV per run in --out, '#' metadata lines (torch version, CUDA, device),
a closing '# end:' line.
Without CUDA the script stops with an error (exit 2) and writes nothing.

The loss of every step goes to the row's `losses` column (warm-ups first,
comma-separated, as ours).  By default the weights are torchtitan-like
(normal 0.02, residual outputs /sqrt(2L), norms 1) and every step trains on
one batch of uniform random tokens drawn once (time and memory do not
depend on the values).  For a loss curve to compare with ours, `--init
plateau` starts from the engine's weights (the same fp32 values bit for
bit: plateau_init.py's generator and parameter table, checked against the
Python-integer reference before use) and `--data synthetic` reads the
engine's synthetic stream (step t, micro-batch m, rank r: window
(t·micro + m)·W + r), both seeded by `--seed` as `plateau bench train
--seed`: the same model, data, initialization and hyperparameters.
"""
import argparse
import datetime
import gc
import math
import os
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def repo_path(path):
    """A path for the metadata: relative to the repository when it lies in
    it (where the repository sits is a fact of the machine, not of the run),
    else as given."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return path if rel.startswith("..") else rel


# the result schema's names (suite/results/schema.def); the point's name and the
# loss go to the note
COLUMNS = ["bench", "variant", "kernel", "ranks", "dtype", "seq", "tokens",
           "batch", "hidden", "ffn", "n_q", "n_kv", "d", "vocab", "experts",
           "topk", "layers", "params", "flops", "time_ms", "time_p10_ms",
           "time_p90_ms", "tok_s_gpu", "tflops", "dev_peak_bytes",
           "pool_peak_bytes", "host_peak_bytes", "losses", "status", "check",
           "note"]

INT_COLS = ["hidden", "layers", "n_q", "n_kv", "head_dim", "vocab", "experts",
            "topk", "expert_width", "shared_width", "dense_width",
            "dense_layers", "seq", "cp", "ep", "micro", "warmup", "steps"]


def read_points(path):
    """The points of the shared TSV: '#' comments, a header, one per line."""
    pts, hdr = [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            cells = line.split("\t")
            if hdr is None:
                hdr = cells
                continue
            p = dict(zip(hdr, cells))
            for k in INT_COLS:
                p[k] = int(p[k])
            p["rope_theta"] = float(p["rope_theta"])
            pts.append(p)
    return pts


def is_moe(p, l):
    return l >= p["dense_layers"] and p["experts"] > 0


def count_params(p):
    """(total, active) as pl_model_count: active = the head, attention
    projections, router, k experts, shared expert, dense FFN (no norms, no
    embedding lookup)."""
    H, V, L = p["hidden"], p["vocab"], p["layers"]
    qkv = (p["n_q"] + 2 * p["n_kv"]) * p["head_dim"]
    attn = H * qkv + p["n_q"] * p["head_dim"] * H
    total = 2 * V * H + H  # embedding, head, final norm
    active = V * H
    for l in range(L):
        total += attn + 2 * H
        active += attn
        if is_moe(p, l):
            router, expert = H * p["experts"], 3 * H * p["expert_width"]
            shared = 3 * H * p["shared_width"]
            total += router + p["experts"] * expert + shared
            active += router + p["topk"] * expert + shared
        else:
            total += 3 * H * p["dense_width"]
            active += 3 * H * p["dense_width"]
    return total, active


def flops_per_token(p):
    _, active = count_params(p)
    return 6.0 * active + 6.0 * p["seq"] * p["head_dim"] * p["n_q"] * \
        p["layers"]


def variant(p):
    """pl_fsdp2_cfg_name's spelling, so rows join with ours."""
    return "cp%d/ep%d/ac=%s/opt=%s/mb%d" % (p["cp"], p["ep"], p["ac"],
                                            p["optim"], p["micro"])


# ---- the model (torch imported by build_torch) ------------------------------

def build_torch():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.empty(dim))

        def forward(self, x):
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return (y * self.weight.float()).type_as(x)

    _rope = {}

    def rope_tables(S, d, theta, device):
        key = (S, d, theta, str(device))
        if key not in _rope:
            inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=device,
                                                dtype=torch.float64) / d))
            ang = torch.outer(torch.arange(S, device=device,
                                           dtype=torch.float64), inv)
            _rope[key] = (ang.cos().float(), ang.sin().float())
        return _rope[key]

    def rope(x, cos, sin):  # x [B, S, h, d], rotate-half
        d2 = x.shape[-1] // 2
        xf = x.float()
        a, b = xf[..., :d2], xf[..., d2:]
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        return torch.cat([a * c - b * s, a * s + b * c], -1).type_as(x)

    class Attention(nn.Module):
        def __init__(self, p):
            super().__init__()
            H, d = p["hidden"], p["head_dim"]
            self.nq, self.nkv, self.d = p["n_q"], p["n_kv"], d
            self.theta = p["rope_theta"]
            self.wq = nn.Linear(H, self.nq * d, bias=False)
            self.wk = nn.Linear(H, self.nkv * d, bias=False)
            self.wv = nn.Linear(H, self.nkv * d, bias=False)
            self.wo = nn.Linear(self.nq * d, H, bias=False)

        def forward(self, x):
            B, S, _ = x.shape
            q = self.wq(x).view(B, S, self.nq, self.d)
            k = self.wk(x).view(B, S, self.nkv, self.d)
            v = self.wv(x).view(B, S, self.nkv, self.d)
            cos, sin = rope_tables(S, self.d, self.theta, x.device)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                is_causal=True, enable_gqa=self.nq != self.nkv)
            return self.wo(o.transpose(1, 2).reshape(B, S, self.nq * self.d))

    class SwiGLU(nn.Module):
        def __init__(self, H, I):
            super().__init__()
            self.w1 = nn.Linear(H, I, bias=False)
            self.w3 = nn.Linear(H, I, bias=False)
            self.w2 = nn.Linear(I, H, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    ALIGN = 16  # rows per expert group of torch._grouped_mm

    class Experts(nn.Module):
        def __init__(self, E, H, I):
            super().__init__()
            self.E = E
            self.w1 = nn.Parameter(torch.empty(E, H, I))
            self.w3 = nn.Parameter(torch.empty(E, H, I))
            self.w2 = nn.Parameter(torch.empty(E, I, H))
            self.grouped = False

        def loop(self, x, counts):
            outs, r0 = [], 0
            for e, c in enumerate(counts.tolist()):
                xe = x[r0:r0 + c]
                r0 += c
                h = F.silu(xe @ self.w1[e]) * (xe @ self.w3[e])
                outs.append(h @ self.w2[e])
            return torch.cat(outs)

        def grouped_mm(self, x, counts):
            # rows of expert e at [start_pad[e], start_pad[e] + counts[e]);
            # groups padded to ALIGN rows with zero rows (torchtitan's
            # permutation); no host synchronization
            R = x.shape[0]
            padded = (counts + ALIGN - 1) // ALIGN * ALIGN
            end_pad = torch.cumsum(padded, 0)
            start_pad = end_pad - padded
            start = torch.cumsum(counts, 0) - counts
            eid = torch.repeat_interleave(torch.arange(self.E,
                                                       device=x.device),
                                          counts, output_size=R)
            dest = start_pad[eid] + torch.arange(R, device=x.device) - \
                start[eid]
            xp = x.new_zeros(R + ALIGN * self.E, x.shape[1])
            xp[dest] = x
            offs = end_pad.to(torch.int32)
            w1, w3, w2 = (w.to(x.dtype) for w in (self.w1, self.w3, self.w2))
            h = F.silu(torch._grouped_mm(xp, w1, offs=offs)) * \
                torch._grouped_mm(xp, w3, offs=offs)
            return torch._grouped_mm(h, w2, offs=offs)[dest]

        def forward(self, x, counts):
            return self.grouped_mm(x, counts) if self.grouped else \
                self.loop(x, counts)

    class MoE(nn.Module):
        def __init__(self, p):
            super().__init__()
            H = p["hidden"]
            self.E, self.k = p["experts"], p["topk"]
            self.router = nn.Linear(H, self.E, bias=False)
            self.experts = Experts(self.E, H, p["expert_width"])
            self.shared = SwiGLU(H, p["shared_width"]) \
                if p["shared_width"] else None
            self.bias = None    # the balancing bias (set on the device)
            self.load = None    # routes per expert since the last update

        def forward(self, x):
            B, S, H = x.shape
            xt = x.reshape(-1, H)
            scores = F.softmax(self.router(xt).float(), dim=-1)
            with torch.no_grad():
                idx = torch.topk(scores + self.bias, self.k, dim=-1).indices
            w = scores.gather(1, idx)
            w = w / w.sum(-1, keepdim=True)
            flat = idx.reshape(-1)
            order = torch.argsort(flat, stable=True)
            counts = torch.bincount(flat, minlength=self.E)
            with torch.no_grad():
                self.load += counts
            tok = order // self.k
            y = self.experts(xt[tok], counts)
            y = y * w.reshape(-1)[order, None].to(y.dtype)
            out = torch.zeros_like(xt).index_add_(0, tok, y)
            if self.shared is not None:
                out = out + self.shared(xt)
            return out.view(B, S, H)

    class Block(nn.Module):
        def __init__(self, p, l):
            super().__init__()
            self.attention_norm = RMSNorm(p["hidden"])
            self.attention = Attention(p)
            self.ffn_norm = RMSNorm(p["hidden"])
            self.moe = is_moe(p, l)
            self.ffn = MoE(p) if self.moe else SwiGLU(p["hidden"],
                                                      p["dense_width"])

        def forward(self, x):
            h = x + self.attention(self.attention_norm(x))
            return h + self.ffn(self.ffn_norm(h))

    class Model(nn.Module):
        def __init__(self, p):
            super().__init__()
            self.tok_embeddings = nn.Embedding(p["vocab"], p["hidden"])
            self.layers = nn.ModuleList(Block(p, l)
                                        for l in range(p["layers"]))
            self.norm = RMSNorm(p["hidden"])
            self.output = nn.Linear(p["hidden"], p["vocab"], bias=False)

        def forward(self, tokens, labels):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h)
            logits = self.output(self.norm(h))
            return F.cross_entropy(logits.flatten(0, 1).float(),
                                   labels.flatten(0, 1))

    return torch, Model, Experts


def fsdp_api(torch):
    try:
        from torch.distributed.fsdp import (CPUOffloadPolicy,
                                            MixedPrecisionPolicy, fully_shard)
    except ImportError:  # before 2.6
        from torch.distributed._composable.fsdp import (CPUOffloadPolicy,
                                                        MixedPrecisionPolicy,
                                                        fully_shard)
    return fully_shard, MixedPrecisionPolicy, CPUOffloadPolicy


def grouped_mm_ok(torch, Experts):
    """torch._grouped_mm exists and agrees with the loop on a small check."""
    if not hasattr(torch, "_grouped_mm"):
        return False, "torch._grouped_mm absent"
    try:
        g = torch.Generator(device="cuda").manual_seed(3)
        ex = Experts(4, 256, 128).cuda().to(torch.bfloat16)
        with torch.no_grad():
            for w in (ex.w1, ex.w3, ex.w2):
                w.copy_(torch.randn(w.shape, generator=g, device="cuda") * 0.05)
            counts = torch.tensor([37, 0, 100, 3], device="cuda")
            x = torch.randn(140, 256, generator=g, device="cuda",
                            dtype=torch.bfloat16)
            a = ex.loop(x, counts).float()
            b = ex.grouped_mm(x, counts).float()
        err = ((a - b).abs().max() / a.abs().max()).item()
        if not err < 2e-2:
            return False, "torch._grouped_mm differs from the loop (%.3g)" % err
        return True, "grouped_mm"
    except Exception as e:
        return False, ("torch._grouped_mm failed: " +
                       str(e).splitlines()[0])[:100]


def init_weights(torch, model, p):
    """Values do not matter for time and memory; the scales keep the loss
    finite (normal 0.02, residual outputs /sqrt(2L), norms 1)."""
    res = 0.02 / math.sqrt(2 * p["layers"])
    with torch.no_grad():
        for name, w in model.named_parameters():
            if w.dim() == 1:
                w.fill_(1.0)
            elif name.endswith(("wo.weight", "w2.weight", "w2")):
                w.normal_(0.0, res)
            else:
                w.normal_(0.0, 0.02)


def init_plateau(torch, model, p, seed, rank, world):
    """The engine's initial weights (plateau_init.py) in model's parameters:
    each engine tensor generated on the GPU in chunks, cut and transposed
    into torch's layout ([out, in] linears; QKV's columns q | k | v; the
    SwiGLU's up columns gate | up), and this rank's dim-0 shard of each
    (FSDP2's Shard(0)) copied into its local tensor."""
    import plateau_init as pi
    table = {t["name"]: t for t in pi.param_table(p)}
    # the bulk generator against the Python-integer reference first
    for t in list(table.values())[:3] + [table["head"]]:
        n = t["rows"] * t["cols"]
        idx = [0, 1, n // 2, n - 1]
        ref = [pi.reference_values(seed, t, j, 1)[0] for j in idx]
        got = [float(pi.tensor_values(torch, seed, t, j, 1, "cuda")[0])
               for j in idx]
        if ref != got:
            raise RuntimeError("--init plateau: the tensor generator differs "
                               "from the reference on %s: %r vs %r" %
                               (t["name"], got, ref))

    def full(name):
        t = table[name]
        n = t["rows"] * t["cols"]
        out = torch.empty(n, device="cuda", dtype=torch.float32)
        step = 1 << 24
        for a in range(0, n, step):
            b = min(n, a + step)
            out[a:b] = pi.tensor_values(torch, seed, t, a, b - a, "cuda")
        return out.view(t["rows"], t["cols"])

    H, d = p["hidden"], p["head_dim"]
    nq, nk = p["n_q"] * d, p["n_kv"] * d

    def swiglu(prefix, mod):
        up = full(prefix + ".up")
        I = up.shape[1] // 2
        return {mod + ".w1.weight": up[:, :I].t(),
                mod + ".w3.weight": up[:, I:].t(),
                mod + ".w2.weight": full(prefix + ".down").t()}

    def values(name):
        """torch parameter name -> the engine tensor in torch's layout."""
        if name == "tok_embeddings.weight":
            return {name: full("embed")}
        if name == "output.weight":
            return {name: full("head").t()}
        if name == "norm.weight":
            return {name: full("final_norm").view(-1)}
        parts = name.split(".")
        l, rest = int(parts[1]), ".".join(parts[2:])
        pre = "layer%d" % l
        blk = "layers.%d." % l
        if rest == "attention_norm.weight":
            return {name: full(pre + ".attn_norm").view(-1)}
        if rest == "ffn_norm.weight":
            return {name: full(pre + ".ffn_norm").view(-1)}
        if rest.startswith("attention.w") and rest[11] in "qkv":
            w = full(pre + ".qkv")
            return {blk + "attention.wq.weight": w[:, :nq].t(),
                    blk + "attention.wk.weight": w[:, nq:nq + nk].t(),
                    blk + "attention.wv.weight": w[:, nq + nk:].t()}
        if rest == "attention.wo.weight":
            return {name: full(pre + ".o").t()}
        if rest == "ffn.router.weight":
            return {name: full(pre + ".router").t()}
        if rest.startswith("ffn.experts.w"):
            E, Ie = p["experts"], p["expert_width"]
            return {blk + "ffn.experts.w1": full(pre + ".experts.wg").view(E, H, Ie),
                    blk + "ffn.experts.w3": full(pre + ".experts.wu").view(E, H, Ie),
                    blk + "ffn.experts.w2": full(pre + ".experts.wd").view(E, Ie, H)}
        if rest.startswith("ffn.shared."):
            return swiglu(pre, blk + "ffn.shared")
        if rest.startswith("ffn.w"):
            return swiglu(pre, blk + "ffn")
        raise RuntimeError("--init plateau: no engine tensor for %s" % name)

    params = dict(model.named_parameters())
    # checkpoint_wrapper inserts "_checkpoint_wrapped_module." in the names
    canon = {k.replace("_checkpoint_wrapped_module.", ""): k for k in params}
    done = set()
    with torch.no_grad():
        for name in canon:
            if name in done:
                continue
            for tname, v in values(name).items():
                w = params[canon[tname]]
                local = w.to_local() if hasattr(w, "to_local") else w
                shard = torch.chunk(v.contiguous(), world, dim=0)[rank] \
                    if world > 1 else v
                if tuple(local.shape) != tuple(shard.shape):
                    raise RuntimeError("--init plateau: %s: local %s, engine "
                                       "shard %s" % (tname, tuple(local.shape),
                                                     tuple(shard.shape)))
                local.copy_(shard)
                done.add(tname)
        torch.cuda.synchronize()
    missing = set(canon) - done
    if missing:
        raise RuntimeError("--init plateau: not set: %s" %
                           ", ".join(sorted(missing)))


def synthetic_batch(torch, p, seed, step, rank, world):
    """The engine's windows of this rank for step `step`: [micro, 1, S + 1]."""
    import plateau_init as pi
    S, micro = p["seq"], p["micro"]
    rows = [pi.synthetic_window(seed, p["vocab"], (step * micro + m) * world +
                                rank, S) for m in range(micro)]
    return torch.tensor(rows, device="cuda", dtype=torch.int64).view(
        micro, 1, S + 1)


def max_over_ranks(torch, v):
    if torch.distributed.get_world_size() == 1:
        return int(v)
    t = torch.tensor([int(v)], device="cuda", dtype=torch.int64)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return int(t.item())


def run_point(torch, Model, Experts, dist_mesh, p, grouped, row, a):
    fully_shard, MixedPrecisionPolicy, CPUOffloadPolicy = fsdp_api(torch)
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, checkpoint_wrapper)
    if p["cp"] != 1 or p["ep"] != 1:
        raise ValueError("cp %d ep %d: one GPU runs cp = ep = 1" %
                         (p["cp"], p["ep"]))
    offload = p["optim"] == "cpu"
    L = p["layers"]
    with torch.device("meta"):
        model = Model(p)
    for l, block in enumerate(model.layers):
        if isinstance(block.ffn, torch.nn.Module) and block.moe:
            block.ffn.experts.grouped = grouped
    # activation checkpointing per layer, then FSDP (torchtitan's order)
    for l in range(L):
        ckpt = p["ac"] == "full" or (p["ac"] == "selective" and
                                     (l + 1) % 2 == 0)
        if ckpt:
            model.layers[l] = checkpoint_wrapper(
                model.layers[l], checkpoint_impl=CheckpointImpl.NO_REENTRANT,
                preserve_rng_state=False)
    kw = dict(mesh=dist_mesh,
              mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                             reduce_dtype=torch.float32))
    if offload:
        kw["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
    fully_shard(model.tok_embeddings, reshard_after_forward=True, **kw)
    for l in range(L):
        fully_shard(model.layers[l], reshard_after_forward=l < L - 1, **kw)
    try:
        fully_shard([model.norm, model.output], reshard_after_forward=False,
                    **kw)
    except TypeError:  # a fully_shard that takes one module
        fully_shard(model.output, reshard_after_forward=False, **kw)
    fully_shard(model, **kw)
    model.to_empty(device="cpu" if offload else "cuda")
    dist = torch.distributed
    world = dist.get_world_size()
    if a.init == "plateau":
        init_plateau(torch, model, p, a.seed, dist.get_rank(), world)
    else:
        init_weights(torch, model, p)
    moes = [m for m in model.modules() if type(m).__name__ == "MoE"]
    for m in moes:
        m.bias = torch.zeros(m.E, device="cuda")
        m.load = torch.zeros(m.E, device="cuda", dtype=torch.int64)
    params = [w for w in model.parameters()]
    try:
        opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.01, fused=True)
        impl = "fused"
    except Exception:
        opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.01, foreach=True)
        impl = "foreach"
    g = torch.Generator(device="cuda").manual_seed(7 + dist.get_rank())
    S, micro = p["seq"], p["micro"]
    if a.data == "random":
        data = torch.randint(0, p["vocab"], (micro, 1, S + 1), generator=g,
                             device="cuda")
    times, losses = [], []
    for it in range(p["warmup"] + p["steps"]):
        if a.data == "synthetic":
            data = synthetic_batch(torch, p, a.seed, it, dist.get_rank(),
                                   world)
        if it == p["warmup"]:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss_sum = 0.0
        for mi in range(micro):
            loss = model(data[mi, :, :-1], data[mi, :, 1:]) / micro
            loss.backward()
            loss_sum += loss.detach()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        for grp in opt.param_groups:  # the schedule, step it + 1
            grp["lr"] = lr_at(a, p["warmup"] + p["steps"], it + 1)
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for m in moes:
                load = m.load.float()
                m.bias += 1e-3 * torch.sign(load.mean() - load)
                m.load.zero_()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        step = torch.tensor([(t1 - t0) * 1e3, float(loss_sum)],
                            device="cuda", dtype=torch.float64)
        if world > 1:  # the slowest rank's time; the mean loss
            dist.all_reduce(step[:1], op=dist.ReduceOp.MAX)
            dist.all_reduce(step[1:], op=dist.ReduceOp.SUM)
            step[1] /= world
        losses.append(float(step[1]))
        if it >= p["warmup"]:
            times.append(float(step[0]))
    times.sort()
    med = statistics.median(times)
    q = lambda f: times[min(len(times) - 1, int(f * (len(times) - 1) + 0.5))]
    tokens = S * micro
    row.update(time_ms="%.3f" % med, time_p10_ms="%.3f" % q(0.1),
               time_p90_ms="%.3f" % q(0.9),
               tok_s_gpu="%.1f" % (tokens / (med * 1e-3)),
               tflops="%.2f" % (flops_per_token(p) * tokens / (med * 1e-3) *
                                1e-12),
               dev_peak_bytes=max_over_ranks(torch,
                                             torch.cuda.max_memory_allocated()),
               pool_peak_bytes=max_over_ranks(torch,
                                              torch.cuda.max_memory_reserved()),
               losses=",".join("%.6g" % x for x in losses),
               status="ok")
    row["note"] = "point %s; adamw %s; loss %.4f -> %.4f" % (
        p["point"], impl, losses[0], losses[-1])
    if not all(math.isfinite(x) for x in losses):
        row["status"] = "error"
        row["note"] = "non-finite loss: " + row["note"]


def lr_at(a, steps, t):
    """The learning rate of step t (>= 1) of a point of `steps` steps:
    engine/ops/adamw.h's pl_adamw_lr_at with --lr-steps 0 as the point's
    steps (warm-ups + timed), as `plateau bench train` takes it."""
    if a.lr_warmup > 0 and t <= a.lr_warmup:
        return a.lr * t / a.lr_warmup
    end = a.lr_steps or steps
    if a.lr_decay == "constant" or end <= a.lr_warmup:
        return a.lr
    p = min(1.0, (t - a.lr_warmup) / (end - a.lr_warmup))
    f = 1 - p if a.lr_decay == "linear" else 0.5 * (1 + math.cos(math.pi * p))
    return a.lr_min + (a.lr - a.lr_min) * f


def lr_check(a, pts):
    """The schedule's bad values, as the bench says them (None: fine)."""
    if not 1e-12 <= a.lr <= 10:
        return "--lr=%g: out of range (allowed: 1e-12..10)" % a.lr
    if a.lr_warmup < 0 or a.lr_steps < 0:
        return "--lr-warmup and --lr-steps: steps >= 0"
    if a.lr_decay == "constant":
        return None
    if a.lr_min < 0 or a.lr_min > a.lr:
        return "--lr-min=%g: above --lr=%g (allowed: 0..%g)" % (
            a.lr_min, a.lr, a.lr)
    for p in pts:
        end = a.lr_steps or p["warmup"] + p["steps"]
        if end <= a.lr_warmup:
            return ("--lr-warmup=%d: the %s decay needs steps after the "
                    "warm-up, and point %s runs %d (allowed: --lr-steps "
                    "above %d)" % (a.lr_warmup, a.lr_decay, p["point"], end,
                                   a.lr_warmup))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="directory of the result file")
    ap.add_argument("--points", default=os.path.join(HERE,
                                                     "fsdp2_points.tsv"))
    ap.add_argument("--configs", default="",
                    help="comma-separated point names (default: all)")
    ap.add_argument("--experts", choices=["auto", "grouped", "loop"],
                    default="auto", help="routed experts: torch._grouped_mm "
                    "(auto: when present and it agrees with the loop)")
    ap.add_argument("--world", type=int, default=1,
                    help="GPUs of this host, one process each (default 1)")
    ap.add_argument("--init", choices=["torchtitan", "plateau"],
                    default="torchtitan", help="initial weights: "
                    "torchtitan-like normal 0.02, or the engine's own "
                    "(plateau_init.py: the same fp32 values as ours)")
    ap.add_argument("--data", choices=["random", "synthetic"],
                    default="random", help="tokens: one random batch drawn "
                    "once and trained on every step, or the engine's "
                    "synthetic stream (a new window each step, as ours)")
    ap.add_argument("--seed", type=int, default=1,
                    help="--init plateau and --data synthetic: the seed of "
                    "`plateau bench train --seed` (default 1)")
    ap.add_argument("--lr", type=float, default=1e-3,
                    help="AdamW's (peak) learning rate (default 1e-3)")
    ap.add_argument("--lr-warmup", type=int, default=0,
                    help="linear warm-up steps: step t <= N at lr*t/N")
    ap.add_argument("--lr-decay", choices=["constant", "linear", "cosine"],
                    default="constant", help="the lr after the warm-up, "
                    "down to --lr-min at step --lr-steps")
    ap.add_argument("--lr-min", type=float, default=0.0,
                    help="the decay's last lr")
    ap.add_argument("--lr-steps", type=int, default=0,
                    help="the step the decay reaches --lr-min (0: the "
                    "point's warm-ups + timed steps)")
    ap.add_argument("--list", action="store_true",
                    help="print the points and their parameter counts; no "
                    "torch, no GPU")
    a = ap.parse_args()
    pts = read_points(a.points)
    if a.configs:
        want = [c for c in a.configs.split(",") if c]
        names = [p["point"] for p in pts]
        bad = [c for c in want if c not in names]
        if bad:
            print("torch_fsdp2: unknown point(s) %s; the points: %s" %
                  (",".join(bad), ",".join(names)), file=sys.stderr)
            return 2
        pts = [p for p in pts if p["point"] in want]
    bad = lr_check(a, pts)
    if bad:
        print("torch_fsdp2: " + bad, file=sys.stderr)
        return 2
    if a.list:
        for p in pts:
            tot, act = count_params(p)
            print("%s\t%s\tseq %d\t%s\tparams %d\tactive %d\tflops/token %.4g"
                  % (p["point"], p["model"], p["seq"], variant(p), tot, act,
                     flops_per_token(p)))
        return 0
    if not a.out:
        print("torch_fsdp2: --out DIR is required", file=sys.stderr)
        return 2
    if a.world < 1:
        print("torch_fsdp2: --world %d: a number of GPUs >= 1" % a.world,
              file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
    except Exception as e:
        print("torch_fsdp2: PyTorch is not importable (%s): this peer needs "
              "PyTorch with CUDA" % e, file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_fsdp2: no CUDA device: this peer measures PyTorch FSDP2 "
              "on a GPU", file=sys.stderr)
        return 2
    if a.world > torch.cuda.device_count():
        print("torch_fsdp2: --world %d: this host has %d CUDA device(s) "
              "(allowed: 1..%d)" % (a.world, torch.cuda.device_count(),
                                    torch.cuda.device_count()),
              file=sys.stderr)
        return 2
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    if a.world == 1:
        return worker(0, 1, port, a, pts)
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(a.world, port, a, pts), nprocs=a.world, join=True)
    return 0


def worker(rank, world, port, a, pts):
    """One rank: the process group, every point, rank 0 writes the file."""
    torch, Model, Experts = build_torch()
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    torch.cuda.set_device(rank)
    # a rank that fails inside a collective leaves the others waiting: the
    # group's timeout ends that wait with an error instead of a hang
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(minutes=20))
    mesh = init_device_mesh("cuda", (world,))
    if a.experts == "loop":
        grouped, how = False, "loop"
    else:
        grouped, how = grouped_mm_ok(torch, Experts)
        if a.experts == "grouped" and not grouped:
            print("torch_fsdp2: --experts grouped: %s" % how, file=sys.stderr)
            dist.destroy_process_group()
            return 2
        if not grouped:
            how = "loop (%s)" % how
    lead = rank == 0
    meta = {"bench": "torch_fsdp2",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0),
            "host": socket.gethostname(),
            "argv": " ".join([repo_path(sys.argv[0])] + sys.argv[1:]),
            "points": repo_path(a.points), "experts": how, "world": world,
            "init": a.init, "data": a.data, "seed": a.seed,
            "utc_start": datetime.datetime.utcnow().strftime(
                "%Y-%m-%dT%H:%M:%SZ")}
    out = None
    if lead:
        os.makedirs(a.out, exist_ok=True)
        stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
        path = os.path.join(a.out, "torch_fsdp2.%s.%s.%d.tsv" %
                            (stamp, socket.gethostname(), os.getpid()))
        out = open(path, "x")
        out.write("# plateau-results: 1\n")
        for k, v in meta.items():
            out.write("# %s: %s\n" % (k, v))
        out.write("\t".join(COLUMNS) + "\n")
        out.flush()
    for p in pts:
        tot, _ = count_params(p)
        tokens = p["seq"] * p["micro"]
        row = dict(bench="torch_fsdp2", variant=variant(p),
                   kernel="sdpa+" + ("grouped_mm" if grouped else "loop"),
                   ranks=world, dtype="bf16", seq=p["seq"], tokens=tokens,
                   batch=p["micro"], hidden=p["hidden"],
                   ffn=p["expert_width"] if p["experts"] else
                   p["dense_width"], n_q=p["n_q"], n_kv=p["n_kv"],
                   d=p["head_dim"], vocab=p["vocab"],
                   experts=p["experts"], topk=p["topk"],
                   layers=p["layers"], params=tot,
                   flops="%.6g" % (flops_per_token(p) * tokens),
                   host_peak_bytes="-", check="skip",
                   note="point %s" % p["point"])
        for c in COLUMNS:
            row.setdefault(c, "-")
        try:
            run_point(torch, Model, Experts, mesh, p, grouped, row, a)
        except torch.cuda.OutOfMemoryError as e:
            row["status"] = "oom"
            row["dev_peak_bytes"] = torch.cuda.max_memory_allocated()
            row["note"] = "point %s; %s" % (p["point"],
                                           str(e).splitlines()[0][:160])
        except Exception as e:
            row["status"] = "error"
            row["note"] = "point %s; %s: %s" % (
                p["point"], type(e).__name__,
                str(e).splitlines()[0][:200])
        if world > 1:  # one verdict: the worst rank's (ok < oom < error)
            code = {"ok": 0, "oom": 1}.get(row["status"], 2)
            v = torch.tensor([code], device="cuda", dtype=torch.int64)
            dist.all_reduce(v, op=dist.ReduceOp.MAX)
            worst = ["ok", "oom", "error"][int(v.item())]
            if worst != row["status"]:
                row["note"] = "point %s; %s on another rank" % (p["point"],
                                                                 worst)
                row["status"] = worst
        row["note"] = str(row["note"]).replace("\t", " ")
        if lead:
            out.write("\t".join(str(row[c]) for c in COLUMNS) + "\n")
            out.flush()
            print("[torch_fsdp2] %s %s: %s %s ms %s tok/s peak %s B (%s)" %
                  (p["point"], row["variant"], row["status"], row["time_ms"],
                   row["tok_s_gpu"], row["dev_peak_bytes"], row["note"]),
                  file=sys.stderr)
        gc.collect()
        torch.cuda.empty_cache()
    if lead:
        out.write("# end: ok %s\n" % datetime.datetime.utcnow().strftime(
            "%Y-%m-%dT%H:%M:%SZ"))
        out.close()
    dist.destroy_process_group()
    if lead:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
