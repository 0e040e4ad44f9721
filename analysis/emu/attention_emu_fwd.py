#!/usr/bin/env python3
# attention_emu_fwd.py — host emulation (numpy) of the index logic of the CUDA
# flash-attention kernel in engine/backend/cuda/attention.cu (fwd): shared-memory
# tiles, ldmatrix / mma.sync / wgmma fragment layouts as the PTX ISA defines them
# (wgmma: the SW128 K-major descriptor model the kernel assumes), against a
# dense reference in double.  A development check of the kernel's addressing
# (written without a GPU at hand), not a substitute for the device tests.
#   python3 analysis/emu/attention_emu_fwd.py   -> max abs error per shape (~1e-15)
import numpy as np

from mma_frag import ldsm_x4, mma
np.random.seed(0)

def run(S, D, nq, nkv, BNS, NW=4, BN=64):
    MT = 2; BM = 16 * MT * NW; LD = D + 8
    grp = nq // nkv
    q = np.random.randn(S, nq, D); k = np.random.randn(S, nkv, D); v = np.random.randn(S, nkv, D)
    scale = 1 / np.sqrt(D); sl2 = scale * np.log2(np.e)
    O = np.full((S, nq, D), np.nan); L = np.full((nq, S), np.nan)
    nmb = (S + BM - 1) // BM
    for h in range(nq):
        hk = h // grp
        for bx in range(nmb):
            mblk = nmb - 1 - bx; q0 = mblk * BM
            sQ = np.zeros(BM * LD)
            for r in range(BM):
                if q0 + r < S: sQ[r*LD: r*LD + D] = q[q0 + r, h]
            kend = min(S, q0 + BM); nkb = (kend + BN - 1) // BN
            for warp in range(NW):
                wrow0 = warp * MT * 16
                o = np.zeros((MT, D // 8, 32, 4)); m = np.full((MT, 2, 32), -np.inf); lr = np.zeros((MT, 2, 32))
                for kb in range(nkb):
                    sK = np.zeros(BN * LD); sV = np.zeros(BN * LD)
                    for r in range(BN):
                        if kb*BN + r < S:
                            sK[r*LD: r*LD+D] = k[kb*BN + r, hk]; sV[r*LD: r*LD+D] = v[kb*BN + r, hk]
                    for sb in range(BN // BNS):
                        k0 = kb * BN + sb * BNS; off = sb * BNS * LD
                        if not (k0 <= q0 + wrow0 + MT*16 - 1): continue
                        NN = BNS // 8
                        s = np.zeros((MT, NN, 32, 4))
                        for kk in range(D // 16):
                            a = [ldsm_x4(sQ, lambda l: (wrow0 + mt*16 + (l & 15))*LD + kk*16 + (l >> 4)*8) for mt in range(MT)]
                            for nt in range(0, NN, 2):
                                bb = ldsm_x4(sK, lambda l: off + (nt*8 + (l >> 4)*8 + (l & 7))*LD + kk*16 + ((l >> 3) & 1)*8)
                                for mt in range(MT):
                                    s[mt, nt] = mma(s[mt, nt], a[mt], bb[:, 0], bb[:, 1])
                                    s[mt, nt+1] = mma(s[mt, nt+1], a[mt], bb[:, 2], bb[:, 3])
                        if k0 + BNS - 1 > q0:
                            for mt in range(MT):
                                for nt in range(NN):
                                    for l in range(32):
                                        g, t = l // 4, l % 4
                                        for e in range(4):
                                            row = q0 + wrow0 + mt*16 + g + (e >> 1)*8
                                            col = k0 + nt*8 + 2*t + (e & 1)
                                            if col > row: s[mt, nt, l, e] = -np.inf
                        for mt in range(MT):
                            for hf in range(2):
                                mx = np.maximum(m[mt, hf], np.max(s[mt, :, :, 2*hf:2*hf+2], axis=(0, 2)))
                                # quad reduce
                                mx = np.array([max(mx[(l & ~3) + j] for j in range(4)) for l in range(32)])
                                msc = np.where(mx == -np.inf, 0, mx * sl2)
                                alpha = np.exp2(m[mt, hf] * sl2 - msc)
                                m[mt, hf] = mx
                                pv = np.exp2(s[mt, :, :, 2*hf:2*hf+2] * sl2 - msc[None, :, None])
                                s[mt, :, :, 2*hf:2*hf+2] = pv
                                lr[mt, hf] = lr[mt, hf] * alpha + pv.sum(axis=(0, 2))
                                o[mt, :, :, 2*hf:2*hf+2] *= alpha[None, :, None]
                        for kk in range(BNS // 16):
                            a = []
                            for mt in range(MT):
                                A = np.zeros((32, 4, 2))
                                A[:, 0] = s[mt, 2*kk, :, 0:2]; A[:, 1] = s[mt, 2*kk, :, 2:4]
                                A[:, 2] = s[mt, 2*kk+1, :, 0:2]; A[:, 3] = s[mt, 2*kk+1, :, 2:4]
                                a.append(A)
                            for dt in range(0, D // 8, 2):
                                bb = ldsm_x4(sV, lambda l: off + (kk*16 + ((l >> 3) & 1)*8 + (l & 7))*LD + dt*8 + (l >> 4)*8, trans=True)
                                for mt in range(MT):
                                    o[mt, dt] = mma(o[mt, dt], a[mt], bb[:, 0], bb[:, 1])
                                    o[mt, dt+1] = mma(o[mt, dt+1], a[mt], bb[:, 2], bb[:, 3])
                for mt in range(MT):
                    for hf in range(2):
                        l4 = np.array([sum(lr[mt, hf][(l & ~3) + j] for j in range(4)) for l in range(32)])
                        for l in range(32):
                            g, t = l // 4, l % 4
                            row = q0 + wrow0 + mt*16 + g + hf*8
                            if row < S:
                                for dt in range(D // 8):
                                    O[row, h, dt*8 + 2*t: dt*8 + 2*t + 2] = o[mt, dt, l, 2*hf:2*hf+2] / l4[l]
                                if t == 0: L[h, row] = m[mt, hf][l] * scale + np.log(l4[l])
    # reference
    Oref = np.zeros_like(O); Lref = np.zeros_like(L)
    for h in range(nq):
        sc = q[:, h] @ k[:, h // grp].T * scale
        sc[np.triu_indices(S, 1)] = -np.inf
        mx = sc.max(1, keepdims=True); p = np.exp(sc - mx); z = p.sum(1, keepdims=True)
        Oref[:, h] = (p / z) @ v[:, h // grp]; Lref[h] = (mx + np.log(z))[:, 0]
    return np.nanmax(np.abs(O - Oref)), np.nanmax(np.abs(L - Lref)), np.isnan(O).sum()

for (S, D, nq, nkv, BNS) in [(1, 64, 1, 1, 64), (70, 64, 2, 1, 64), (150, 32, 1, 1, 32), (200, 32, 2, 2, 32)]:
    print(S, D, nq, nkv, BNS, run(S, D, nq, nkv, BNS))
