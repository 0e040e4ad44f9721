"""plateau_init.py — the engine's initial weights and synthetic token stream
for a peer in Python, so a PyTorch run can start from the same weights, bit
for bit in fp32, and read the same tokens as `plateau bench train` (same
model, data, initialization and hyperparameters: the loss curves compare).

What it reproduces (engine/include/plateau/host_device.h, the parameter
table of engine/train/step_build.c and baselines/fsdp2/fsdp2_params.c,
engine/train/data.c):
- the counter-based generator: value i of stream `seed` is a pure function of
  (seed, i) (splitmix64 finalizers), so a parameter's element j is
  draw(param_seed(seed, index), j) whatever the sharding;
- the parameter table: the index (the seed) and the distribution of each
  tensor in the engine's order — embedding; per layer attention norm, QKV,
  O, FFN norm, router (MoE layers), the SwiGLU up (gate | up columns) and
  down of the dense FFN or shared expert, the final norm after the last
  layer's, then the layer's routed experts; the head last — with
  unit-ish norm gains U[0.9, 1.1), 1/sqrt(fan-in) matrices and residual
  outputs scaled by 1/sqrt(2L);
- the synthetic stream: runs of 8 tokens in arithmetic progression; window q
  of a context S is the tokens [q·S, q·S + S].

Two implementations of the generator: Python integers (exact, slow: the
reference, and what the tests compare with the C header) and int64 tensors
of a torch-like module (the same operations: products wrap modulo 2^64,
right shifts made logical by a mask), which the peer checks against the
reference before it uses them.  No torch import here.
"""
import math
import struct

M64 = (1 << 64) - 1


def _f32(x):
    """x rounded to float32 (round to nearest even), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _mix64(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


def rng_u32(seed, i):
    z = (_mix64(seed ^ 0x5851f42d4c957f2d) + (i + 1) * 0x9e3779b97f4a7c15) & M64
    return _mix64(z) >> 32


# float32 constants of the header, as the C compiler rounds them
_NSCALE = _f32(1.7320508075688772 / 16777216.0)
_USCALE = 1.0 / 16777216.0  # a power of two: exact


def rng_normal(seed, i, mean, std):
    """pl_rng_normal: Irwin-Hall sum of four 24-bit uniforms, f32 scaling."""
    a = _mix64((seed * 0xd1342543de82ef95 + 2 * i + 1) & M64)
    b = _mix64(a ^ 0x2545f4914f6cdd1d)
    s = ((a >> 40) + ((a >> 8) & 0xffffff) + (b >> 40) +
         ((b >> 8) & 0xffffff)) & 0xffffffff
    z = _f32(_f32(float(s - (2 << 24))) * _NSCALE)
    return _f32(_f32(mean) + _f32(_f32(std) * z))


def rng_uniform(seed, i, lo, hi):
    unit = _f32(float(rng_u32(seed, i) >> 8) + 0.5) * _USCALE  # f32 sum
    return _f32(_f32(lo) + _f32(_f32(_f32(hi) - _f32(lo)) * unit))


def param_seed(seed, index):
    return (seed * 0x9e3779b97f4a7c15 + index * 0x632be59bd9b4e019 + 17) & M64


def rsqrtf(n):
    """1.0f / sqrtf((float)n)."""
    return _f32(1.0 / _f32(math.sqrt(_f32(float(n)))))


# ---- the parameter table ----------------------------------------------------

def param_table(p):
    """The engine's parameters of a model (the points file's keys: hidden,
    layers, n_q, n_kv, head_dim, vocab, experts, topk, expert_width,
    shared_width, dense_width, dense_layers), in its order (the position is
    the seed index): a list of dicts name, rows, cols, dist ('normal' |
    'uniform'), a, b (mean, std or lo, hi, float32 values)."""
    H, L, V = p["hidden"], p["layers"], p["vocab"]
    nq = p["n_q"] * p["head_dim"]
    qkv = (p["n_q"] + 2 * p["n_kv"]) * p["head_dim"]
    res = rsqrtf(2 * L)  # 1.0f / sqrtf(2.0f * L)
    rH = rsqrtf(H)
    out = []

    def add(name, rows, cols, dist, a, b):
        out.append(dict(name=name, rows=rows, cols=cols, dist=dist, a=a, b=b))

    add("embed", V, H, "normal", 0.0, 1.0)
    for l in range(L):
        moe = l >= p["dense_layers"] and p["experts"] > 0
        I = p["shared_width"] if moe else p["dense_width"]
        add("layer%d.attn_norm" % l, 1, H, "uniform", _f32(0.9), _f32(1.1))
        add("layer%d.qkv" % l, H, qkv, "normal", 0.0, rH)
        add("layer%d.o" % l, nq, H, "normal", 0.0,
            _f32(res / _f32(math.sqrt(float(nq)))))
        add("layer%d.ffn_norm" % l, 1, H, "uniform", _f32(0.9), _f32(1.1))
        if moe:
            add("layer%d.router" % l, H, p["experts"], "normal", 0.0, rH)
        if I > 0:
            add("layer%d.up" % l, H, 2 * I, "normal", 0.0, rH)
            add("layer%d.down" % l, I, H, "normal", 0.0,
                _f32(res / _f32(math.sqrt(float(I)))))
        if l == L - 1:
            add("final_norm", 1, H, "uniform", _f32(0.9), _f32(1.1))
        if moe:
            E, Ie = p["experts"], p["expert_width"]
            add("layer%d.experts.wg" % l, E * H, Ie, "normal", 0.0, rH)
            add("layer%d.experts.wu" % l, E * H, Ie, "normal", 0.0, rH)
            add("layer%d.experts.wd" % l, E * Ie, H, "normal", 0.0,
                _f32(res / _f32(math.sqrt(float(Ie)))))
    add("head", H, V, "normal", 0.0, rH)
    for i, t in enumerate(out):
        t["index"] = i
    return out


def reference_values(seed, t, first, n):
    """Elements [first, first + n) of tensor t (a param_table entry) by the
    Python-integer generator."""
    ps = param_seed(seed, t["index"])
    f = rng_normal if t["dist"] == "normal" else rng_uniform
    return [f(ps, first + j, t["a"], t["b"]) for j in range(n)]


# ---- the generator on int64 tensors ------------------------------------------

def _s64(c):
    """A 64-bit constant as the signed int64 with the same bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


def _shr(x, k):
    """Logical right shift of int64 tensors (>> is arithmetic on int64)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def _mix64_t(z):
    z = (z ^ _shr(z, 30)) * _s64(0xbf58476d1ce4e5b9)
    z = (z ^ _shr(z, 27)) * _s64(0x94d049bb133111eb)
    return z ^ _shr(z, 31)


def tensor_values(torch, seed, t, first, n, device):
    """Elements [first, first + n) of tensor t as a float32 torch tensor on
    device: the same integer operations as the reference (int64 products
    wrap modulo 2^64) and the same float32 roundings."""
    ps = param_seed(seed, t["index"])
    i = torch.arange(first, first + n, device=device, dtype=torch.int64)
    if t["dist"] == "normal":
        a = _mix64_t(i * 2 + _s64((ps * 0xd1342543de82ef95 + 1) & M64))
        b = _mix64_t(a ^ _s64(0x2545f4914f6cdd1d))
        s = (_shr(a, 40) + (_shr(a, 8) & 0xffffff) + _shr(b, 40) +
             (_shr(b, 8) & 0xffffff))
        z = (s - (2 << 24)).to(torch.float32) * _NSCALE
        return z * t["b"] + t["a"]
    k = _s64(_mix64(ps ^ 0x5851f42d4c957f2d))
    z = k + (i + 1) * _s64(0x9e3779b97f4a7c15)
    u = _shr(_mix64_t(z), 40)  # the u32's top 24 bits
    unit = (u.to(torch.float32) + 0.5) * _USCALE
    return unit * _f32(_f32(t["b"]) - _f32(t["a"])) + t["a"]


# ---- the synthetic token stream -----------------------------------------------

def synthetic_window(seed, V, q, S):
    """Window q of context S: the S + 1 tokens [q·S, q·S + S] of the
    engine's synthetic stream (pl_data_synthetic)."""
    out, cache = [], {}
    for g in range(q * S, q * S + S + 1):
        run, j = divmod(g, 8)
        if run not in cache:
            cache[run] = (rng_u32(seed, run), 1 + rng_u32(seed + 1, run) % 3)
        a, step = cache[run]
        out.append((a + j * step) % V)
    return out
