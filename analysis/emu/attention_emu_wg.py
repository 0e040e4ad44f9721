#!/usr/bin/env python3
# attention_emu_wg.py — host emulation (numpy) of the index logic of the CUDA
# flash-attention kernel in engine/backend/cuda/attention.cu (wg): shared-memory
# tiles, ldmatrix / mma.sync / wgmma fragment layouts as the PTX ISA defines them
# (wgmma: the SW128 K-major descriptor model the kernel assumes), against a
# dense reference in double.  A development check of the kernel's addressing
# (written without a GPU at hand), not a substitute for the device tests.
#   python3 analysis/emu/attention_emu_wg.py   -> max abs error per shape (~1e-15)
# descriptors (address-based XOR of bits [4:6] with [7:9], SBO = 1024 between
# 8-row groups) and the wgmma fragment layouts.
import numpy as np
np.random.seed(2)

def swz(byte_addr):
    return byte_addr ^ (((byte_addr >> 7) & 7) << 4)

def desc_read(smem, start_elem, rows, k16=16):
    # returns [rows][16] matrix read through the descriptor (K-major, SW128)
    out = np.zeros((rows, k16))
    sb = start_elem * 2
    for i in range(rows):
        for kk in range(k16):
            a = sb + (i // 8) * 1024 + (i % 8) * 128 + kk * 2
            out[i, kk] = smem[swz(a) // 2]
    return out

def ldsm_x4_t(smem, addr_fn):
    rows = [smem[addr_fn(l): addr_fn(l) + 8] for l in range(32)]
    regs = np.zeros((32, 4, 2))
    for i in range(4):
        M = np.array(rows[8*i: 8*i+8])
        for l in range(32):
            regs[l, i] = [M[2*(l % 4), l // 4], M[2*(l % 4) + 1, l // 4]]
    return regs

def run(S, nq, nkv):
    D = 128; BM = 128; BN = 64; LDV = 136
    grp = nq // nkv
    q = np.random.randn(S, nq, D); k = np.random.randn(S, nkv, D); v = np.random.randn(S, nkv, D)
    scale = 1 / np.sqrt(D); sl2 = scale * np.log2(np.e)
    O = np.full((S, nq, D), np.nan)
    nmb = (S + BM - 1) // BM
    QE = BM * 128; KE = 2 * BN * 128; VTE = 128 * BN; VE = 2 * BN * LDV
    for h in range(nq):
        hk = h // grp
        for bx in range(nmb):
            q0 = (nmb - 1 - bx) * BM
            smem = np.zeros(QE + KE + VTE + VE)
            sQ, sK, sVt, sV = 0, QE, QE + KE, QE + KE + VTE
            def load_sw(dst, src, row0, ROWS):
                for c in range(ROWS * 16):
                    r, ch = c >> 4, c & 15; half, cc = ch >> 3, ch & 7
                    gr = row0 + r
                    vals = src[gr, ch*8: ch*8+8] if gr < S else np.zeros(8)
                    d = dst + half*(ROWS*64) + r*64 + ((cc ^ (r & 7))*8)
                    smem[d: d+8] = vals
            load_sw(sQ, q[:, h], q0, BM)
            kend = min(S, q0 + BM); nkb = (kend + BN - 1) // BN
            o = np.zeros((2, 4, 32, 64)); m = np.full((2, 4, 2, 32), -np.inf); lr = np.zeros((2, 4, 2, 32))
            for kb in range(nkb):
                buf = kb & 1
                load_sw(sK + buf*BN*128, k[:, hk], kb*BN, BN)
                for r in range(BN):
                    gr = kb*BN + r
                    smem[sV + buf*BN*LDV + r*LDV: sV + buf*BN*LDV + r*LDV + D] = v[gr, hk] if gr < S else 0
                cV = sV + buf*BN*LDV
                for it in range(4):
                    for warp in range(8):
                        blk4 = it*8 + warp; kc, dm4 = blk4 // 4, blk4 % 4
                        r = ldsm_x4_t(smem, lambda l: cV + (kc*8 + (l & 7))*LDV + (dm4*4 + (l >> 3))*8)
                        for jj in range(4):
                            for l in range(32):
                                g, t = l // 4, l % 4
                                n = (dm4*4 + jj)*8 + g; chunk = kc ^ (n & 7)
                                base = sVt + n*64 + chunk*8 + 2*t
                                smem[base: base+2] = r[l, jj]
                cK = sK + buf*BN*128; k0 = kb*BN
                for wg in range(2):
                    # S for 64 rows: sum over kk of A(desc) B(desc)^T
                    Sm = np.zeros((64, BN))
                    for kk in range(8):
                        A = desc_read(smem, sQ + (kk >> 2)*(BM*64) + wg*64*64 + (kk & 3)*16, 64)
                        B = desc_read(smem, cK + (kk >> 2)*(BN*64) + (kk & 3)*16, BN)
                        Sm += A @ B.T
                    for wq in range(4):
                        wrow0 = wg*64 + wq*16
                        s = np.zeros((32, 32))
                        for l in range(32):
                            g, t = l // 4, l % 4
                            for jn in range(8):
                                for e in range(4):
                                    s[l, 4*jn + e] = Sm[wq*16 + g + (e >> 1)*8, jn*8 + 2*t + (e & 1)]
                        if k0 + BN - 1 > q0 + wrow0:
                            for l in range(32):
                                g, t = l // 4, l % 4
                                for jn in range(8):
                                    for e in range(4):
                                        row = q0 + wrow0 + g + (e >> 1)*8; col = k0 + jn*8 + 2*t + (e & 1)
                                        if col > row: s[l, 4*jn + e] = -np.inf
                        for hf in range(2):
                            idx = [4*jn + 2*hf + e for jn in range(8) for e in range(2)]
                            mx = np.maximum(m[wg, wq, hf], s[:, idx].max(1))
                            mx = np.array([max(mx[(l & ~3) + j] for j in range(4)) for l in range(32)])
                            msc = np.where(mx == -np.inf, 0, mx*sl2)
                            alpha = np.exp2(m[wg, wq, hf]*sl2 - msc); m[wg, wq, hf] = mx
                            pv = np.exp2(s[:, idx]*sl2 - msc[:, None]); s[:, idx] = pv
                            lr[wg, wq, hf] = lr[wg, wq, hf]*alpha + pv.sum(1)
                            oi = [4*jd + 2*hf + e for jd in range(16) for e in range(2)]
                            o[wg, wq][:, oi] *= alpha[:, None]
                        # P regs -> A fragments; O += P Vt^T via descriptor of Vt
                        for kk in range(4):
                            A = np.zeros((16, 16))
                            for l in range(32):
                                g, t = l // 4, l % 4
                                a = [s[l, 8*kk:8*kk+2], s[l, 8*kk+2:8*kk+4], s[l, 8*kk+4:8*kk+6], s[l, 8*kk+6:8*kk+8]]
                                A[g, 2*t:2*t+2] = a[0]; A[g+8, 2*t:2*t+2] = a[1]
                                A[g, 2*t+8:2*t+10] = a[2]; A[g+8, 2*t+8:2*t+10] = a[3]
                            Bv = desc_read(smem, sVt + kk*16, 128)  # [n=d][16 keys]
                            C = A @ Bv.T  # 16 x 128
                            for l in range(32):
                                g, t = l // 4, l % 4
                                for jd in range(16):
                                    o[wg, wq, l, 4*jd: 4*jd+2] += C[g, jd*8 + 2*t: jd*8 + 2*t + 2]
                                    o[wg, wq, l, 4*jd+2: 4*jd+4] += C[g+8, jd*8 + 2*t: jd*8 + 2*t + 2]
            for wg in range(2):
                for wq in range(4):
                    for hf in range(2):
                        l4 = np.array([sum(lr[wg, wq, hf][(l & ~3) + j] for j in range(4)) for l in range(32)])
                        for l in range(32):
                            g, t = l // 4, l % 4
                            row = q0 + wg*64 + wq*16 + g + hf*8
                            if row < S:
                                for jd in range(16):
                                    O[row, h, jd*8 + 2*t: jd*8 + 2*t + 2] = o[wg, wq, l, 4*jd + 2*hf: 4*jd + 2*hf + 2] / l4[l]
    Oref = np.zeros_like(O)
    for h in range(nq):
        sc = q[:, h] @ k[:, h // grp].T * scale; sc[np.triu_indices(S, 1)] = -np.inf
        p = np.exp(sc - sc.max(1, keepdims=True)); Oref[:, h] = (p / p.sum(1, keepdims=True)) @ v[:, h // grp]
    return np.nanmax(np.abs(O - Oref)), int(np.isnan(O).sum())

for (S, nq, nkv) in [(1, 1, 1), (150, 2, 1)]:
    print(S, nq, nkv, run(S, nq, nkv))
