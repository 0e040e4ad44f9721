# mma_frag.py — fragment layouts of ldmatrix.x4 and mma.sync.m16n8k16 (bf16,
# f32 accumulate) as the PTX ISA defines them, in numpy, shared by the
# attention kernels' host emulations (attention_emu_fwd.py, _bwd.py).
import numpy as np


def ldsm_x4(smem, addr_fn, trans=False):
    # addr_fn(lane) -> flat element index of the row start (8 contiguous elems)
    rows = [smem[addr_fn(l): addr_fn(l) + 8] for l in range(32)]
    regs = np.zeros((32, 4, 2))
    for i in range(4):
        M = np.array(rows[8 * i: 8 * i + 8])  # matrix i, rows from lanes 8i..8i+7
        for l in range(32):
            if not trans:
                regs[l, i] = M[l // 4, 2 * (l % 4): 2 * (l % 4) + 2]
            else:
                regs[l, i] = [M[2 * (l % 4), l // 4], M[2 * (l % 4) + 1, l // 4]]
    return regs

def mma(c, a, b0, b1):
    # c: [32,4], a: [32,4,2], b0,b1: [32,2]
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for l in range(32):
        g, t = l // 4, l % 4
        A[g, 2*t:2*t+2] = a[l, 0]; A[g+8, 2*t:2*t+2] = a[l, 1]
        A[g, 2*t+8:2*t+10] = a[l, 2]; A[g+8, 2*t+8:2*t+10] = a[l, 3]
        B[2*t:2*t+2, g] = b0[l]; B[2*t+8:2*t+10, g] = b1[l]
    C = A @ B
    out = c.copy()
    for l in range(32):
        g, t = l // 4, l % 4
        out[l, 0:2] += C[g, 2*t:2*t+2]; out[l, 2:4] += C[g+8, 2*t:2*t+2]
    return out
