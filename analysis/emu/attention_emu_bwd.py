#!/usr/bin/env python3
# attention_emu_bwd.py — host emulation (numpy) of the index logic of the CUDA
# flash-attention kernel in engine/backend/cuda/attention.cu (bwd): shared-memory
# tiles, ldmatrix / mma.sync / wgmma fragment layouts as the PTX ISA defines them
# (wgmma: the SW128 K-major descriptor model the kernel assumes), against a
# dense reference in double.  A development check of the kernel's addressing
# (written without a GPU at hand), not a substitute for the device tests.
#   python3 analysis/emu/attention_emu_bwd.py   -> max abs error per shape (~1e-15)
import numpy as np

from mma_frag import ldsm_x4, mma

np.random.seed(1)

def pack(st, kk):
    A = np.zeros((32, 4, 2))
    A[:, 0] = st[2*kk, :, 0:2]; A[:, 1] = st[2*kk, :, 2:4]
    A[:, 2] = st[2*kk+1, :, 0:2]; A[:, 3] = st[2*kk+1, :, 2:4]
    return A

def run(S, D, nq, nkv, NW=4):
    BN = 16 * NW; BM = BN; LD = D + 8; LDS = BM + 8; NQ = BM // 8; ND = D // 8
    grp = nq // nkv
    q = np.random.randn(S, nq, D); k = np.random.randn(S, nkv, D); v = np.random.randn(S, nkv, D)
    do = np.random.randn(S, nq, D)
    scale = 1 / np.sqrt(D); sl2 = scale * np.log2(np.e)
    # forward reference: O, LSE; delta
    O = np.zeros((S, nq, D)); L = np.zeros((nq, S))
    dq_ref = np.zeros_like(q); dk_ref = np.zeros_like(k); dv_ref = np.zeros_like(v)
    for h in range(nq):
        hk = h // grp
        sc = q[:, h] @ k[:, hk].T * scale
        sc[np.triu_indices(S, 1)] = -np.inf
        mx = sc.max(1, keepdims=True); p = np.exp(sc - mx); z = p.sum(1, keepdims=True)
        P = p / z
        O[:, h] = P @ v[:, hk]; L[h] = (mx + np.log(z))[:, 0]
        dP = do[:, h] @ v[:, hk].T
        Dl = (do[:, h] * O[:, h]).sum(1, keepdims=True)
        dS = P * (dP - Dl)
        dq_ref[:, h] = dS @ k[:, hk] * scale
        dk_ref[:, hk] += dS.T @ q[:, h] * scale
        dv_ref[:, hk] += P.T @ do[:, h]
    delta = np.array([(do[:, h] * O[:, h]).sum(1) for h in range(nq)])
    dqacc = np.zeros((S, nq, D)); dK = np.full_like(k, np.nan); dV = np.full_like(v, np.nan)
    nkb = (S + BN - 1) // BN; nqb = (S + BM - 1) // BM
    for hk in range(nkv):
        for bx in range(nkb):
            k0 = bx * BN
            sK = np.zeros(BN * LD); sV = np.zeros(BN * LD)
            for r in range(BN):
                if k0 + r < S: sK[r*LD: r*LD+D] = k[k0 + r, hk]; sV[r*LD: r*LD+D] = v[k0 + r, hk]
            qb0 = k0 // BM; per_head = nqb - qb0; niter = per_head * grp
            dk = np.zeros((NW, ND, 32, 4)); dv = np.zeros((NW, ND, 32, 4))
            for it in range(niter):
                h = hk * grp + it // per_head; qs = (qb0 + it % per_head) * BM
                cQ = np.zeros(BM * LD); cdO = np.zeros(BM * LD); cL = np.zeros(BM); cD = np.zeros(BM)
                for r in range(BM):
                    if qs + r < S:
                        cQ[r*LD: r*LD+D] = q[qs + r, h]; cdO[r*LD: r*LD+D] = do[qs + r, h]
                        cL[r] = L[h, qs + r] * np.log2(np.e); cD[r] = delta[h, qs + r]
                sdS = np.zeros(BN * LDS)
                stw = []
                for warp in range(NW):
                    wk0 = warp * 16
                    st = np.zeros((NQ, 32, 4)); dpt = np.zeros((NQ, 32, 4))
                    for kk in range(D // 16):
                        ak = ldsm_x4(sK, lambda l: (wk0 + (l & 15))*LD + kk*16 + (l >> 4)*8)
                        av = ldsm_x4(sV, lambda l: (wk0 + (l & 15))*LD + kk*16 + (l >> 4)*8)
                        for nt in range(0, NQ, 2):
                            offf = lambda l: (nt*8 + (l >> 4)*8 + (l & 7))*LD + kk*16 + ((l >> 3) & 1)*8
                            bq = ldsm_x4(cQ, offf); bo = ldsm_x4(cdO, offf)
                            st[nt] = mma(st[nt], ak, bq[:, 0], bq[:, 1]); st[nt+1] = mma(st[nt+1], ak, bq[:, 2], bq[:, 3])
                            dpt[nt] = mma(dpt[nt], av, bo[:, 0], bo[:, 1]); dpt[nt+1] = mma(dpt[nt+1], av, bo[:, 2], bo[:, 3])
                    need = (qs < k0 + BN - 1) or (qs + BM > S)
                    for nt in range(NQ):
                        for l in range(32):
                            g, t = l // 4, l % 4
                            for e in range(4):
                                ql = nt*8 + 2*t + (e & 1)
                                pr = np.exp2(st[nt, l, e] * sl2 - cL[ql])
                                if need:
                                    key = k0 + wk0 + g + (e >> 1)*8; qq = qs + ql
                                    if key > qq or qq >= S: pr = 0.0
                                st[nt, l, e] = pr
                                dpt[nt, l, e] = pr * (dpt[nt, l, e] - cD[ql])
                    for kk in range(BM // 16):
                        ap = pack(st, kk); as_ = pack(dpt, kk)
                        for dt in range(0, ND, 2):
                            offt = lambda l: (kk*16 + ((l >> 3) & 1)*8 + (l & 7))*LD + dt*8 + (l >> 4)*8
                            bo = ldsm_x4(cdO, offt, True); bq = ldsm_x4(cQ, offt, True)
                            dv[warp, dt] = mma(dv[warp, dt], ap, bo[:, 0], bo[:, 1]); dv[warp, dt+1] = mma(dv[warp, dt+1], ap, bo[:, 2], bo[:, 3])
                            dk[warp, dt] = mma(dk[warp, dt], as_, bq[:, 0], bq[:, 1]); dk[warp, dt+1] = mma(dk[warp, dt+1], as_, bq[:, 2], bq[:, 3])
                    for nt in range(NQ):
                        for hf in range(2):
                            for l in range(32):
                                g, t = l // 4, l % 4
                                base = (wk0 + g + hf*8)*LDS + nt*8 + 2*t
                                sdS[base: base+2] = dpt[nt, l, 2*hf: 2*hf+2]
                # barrier; dQ phase
                for warp in range(NW):
                    wq0 = warp * 16
                    for dc in range(D // 32):
                        acc = np.zeros((4, 32, 4))
                        for kk in range(BN // 16):
                            a = ldsm_x4(sdS, lambda l: (kk*16 + (l >> 4)*8 + (l & 7))*LDS + wq0 + ((l >> 3) & 1)*8, True)
                            for j in range(0, 4, 2):
                                bk = ldsm_x4(sK, lambda l: (kk*16 + ((l >> 3) & 1)*8 + (l & 7))*LD + dc*32 + j*8 + (l >> 4)*8, True)
                                acc[j] = mma(acc[j], a, bk[:, 0], bk[:, 1]); acc[j+1] = mma(acc[j+1], a, bk[:, 2], bk[:, 3])
                        for hf in range(2):
                            for l in range(32):
                                g, t = l // 4, l % 4
                                qq = qs + wq0 + g + hf*8
                                if qq < S:
                                    for j in range(4):
                                        dqacc[qq, h, dc*32 + 2*t + j*8: dc*32 + 2*t + j*8 + 2] += acc[j, l, 2*hf: 2*hf+2]
            for warp in range(NW):
                wk0 = warp * 16
                for hf in range(2):
                    for l in range(32):
                        g, t = l // 4, l % 4
                        key = k0 + wk0 + g + hf*8
                        if key < S:
                            for dt in range(ND):
                                dK[key, hk, dt*8 + 2*t: dt*8 + 2*t + 2] = dk[warp, dt, l, 2*hf: 2*hf+2] * scale
                                dV[key, hk, dt*8 + 2*t: dt*8 + 2*t + 2] = dv[warp, dt, l, 2*hf: 2*hf+2]
    dQ = dqacc * scale
    return (np.abs(dQ - dq_ref).max(), np.abs(dK - dk_ref).max(), np.abs(dV - dv_ref).max(),
            int(np.isnan(dK).sum() + np.isnan(dV).sum()))

for (S, D, nq, nkv) in [(1, 32, 1, 1), (70, 32, 2, 1), (130, 64, 2, 2), (100, 32, 4, 1)]:
    print(S, D, nq, nkv, run(S, D, nq, nkv))
