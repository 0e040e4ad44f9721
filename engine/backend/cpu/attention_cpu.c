/* attention_cpu.c — the CPU kernels of GQA flash attention (causal or full
 * mask), the reference the CUDA kernels (backend/cuda/attention*.cu) are
 * checked against, and the log-sum-exp merge of partial outputs.
 *
 * The fp32 kernels are blocked exactly like the flash algorithm (query blocks
 * of BQ rows × key blocks of BK keys, online softmax, LSE saved; backward
 * recomputes P from LSE), so they need O(tile) scratch, not O(S²), and a test
 * at a few thousand tokens runs in CI time.  Scores, P and all sums are fp32;
 * outputs are rounded to the storage dtype once (bf16 like CUDA, or f32).
 * Scratch tiles are per-thread malloc (O(BQ·d), not tensors); the backward's
 * fp32 accumulators are the caller's tracked workspace.
 *
 * Layouts: model/attention.h.  Q [B,S,n_q,d], K/V [B,S,n_kv,d], LSE [B,n_q,S].
 * The kernel choice of the shape (sh->kernels) is a CUDA matter: one kernel
 * runs here whatever it says. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/attention_kernels.h"
#include "plateau/host_device.h"

#define BQ 64
#define BK 64

static inline float ld(const void *p, int bf, int64_t i) {
  return bf ? pl_bf16_to_f32(((const pl_bf16 *)p)[i]) : ((const float *)p)[i];
}
static inline void st(void *p, int bf, int64_t i, float x) {
  if (bf)
    ((pl_bf16 *)p)[i] = pl_f32_to_bf16(x);
  else
    ((float *)p)[i] = x;
}

/* rows [r0, r0+n) of head `head` of a [B,S,nh,d] tensor into dst[n][d] */
static void load_rows(float *dst, const void *src, int bf, int64_t b, int64_t S,
                      int nh, int head, int d, int64_t r0, int n) {
  for (int r = 0; r < n; r++) {
    int64_t base = ((b * S + r0 + r) * nh + head) * (int64_t)d;
    for (int c = 0; c < d; c++)
      dst[(int64_t)r * d + c] = ld(src, bf, base + c);
  }
}

static inline float dotf(const float *a, const float *b, int d) {
  float s = 0.f;
  for (int c = 0; c < d; c++)
    s += a[c] * b[c];
  return s;
}

pl_status pl__cpu_attn_check(const pl_attn_shape *sh) {
  if (sh->dtype != PL_F32 && sh->dtype != PL_BF16)
    return pl_set_error(PL_EINVAL, "attention: dtype %s: CPU takes f32 or bf16",
                        pl_dtype_name(sh->dtype));
  return PL_OK;
}

/* fp32 dQ [B,S,n_q,d], dK and dV [B,S,n_kv,d] accumulators, then D [B,n_q,S] */
size_t pl__cpu_attn_bwd_workspace_bytes(const pl_attn_shape *sh) {
  const size_t B = (size_t)sh->batch, S = (size_t)sh->seq,
               d = (size_t)sh->head_dim;
  return (B * S * (size_t)sh->n_q * d + 2 * B * S * (size_t)sh->n_kv * d +
          B * (size_t)sh->n_q * S) *
         sizeof(float);
}

const char *pl__cpu_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *sh) {
  (void)s, (void)sh;
  return "cpu";
}
const char *pl__cpu_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *sh) {
  (void)s, (void)sh;
  return "cpu";
}

pl_status pl__cpu_attn_fwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, void *o, float *lse) {
  (void)s;
  PL_TRY(pl__cpu_attn_check(sh));
  const int64_t B = sh->batch, S = sh->seq;
  const int nq = sh->n_q, nkv = sh->n_kv, d = sh->head_dim, grp = nq / nkv;
  const int bf = sh->dtype == PL_BF16;
  const float scale = pl__attn_scale(sh);
  const int full = sh->mask == PL_ATTN_FULL;
  const int64_t nqb = (S + BQ - 1) / BQ, ntask = B * nq * nqb;
  if (ntask == 0)
    return PL_OK;
  int fail = 0;
#pragma omp parallel
  {
    float *qf = malloc(sizeof(float) * (size_t)BQ * d),
          *kf = malloc(sizeof(float) * (size_t)BK * d);
    float *vf = malloc(sizeof(float) * (size_t)BK * d),
          *acc = malloc(sizeof(float) * (size_t)BQ * d);
    float sc[BQ * BK], m[BQ], l[BQ];
    if (!qf || !kf || !vf || !acc) {
#pragma omp atomic write
      fail = 1;
    } else {
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < ntask; task++) {
        const int64_t qb = nqb - 1 - task % nqb; /* longest first */
        const int h = (int)((task / nqb) % nq);
        const int64_t b = task / (nqb * nq);
        const int hk = h / grp;
        const int64_t q0 = qb * BQ;
        const int nr = (int)(S - q0 < BQ ? S - q0 : BQ);
        load_rows(qf, q, bf, b, S, nq, h, d, q0, nr);
        for (int r = 0; r < nr; r++) {
          m[r] = -INFINITY;
          l[r] = 0.f;
        }
        memset(acc, 0, sizeof(float) * (size_t)nr * d);
        const int64_t kend = full ? S : q0 + nr; /* keys < kend */
        for (int64_t k0 = 0; k0 < kend; k0 += BK) {
          const int nk = (int)(kend - k0 < BK ? kend - k0 : BK);
          load_rows(kf, k, bf, b, S, nkv, hk, d, k0, nk);
          load_rows(vf, v, bf, b, S, nkv, hk, d, k0, nk);
          for (int r = 0; r < nr; r++) {
            const int64_t qi = q0 + r;
            int jn = full ? nk : (int)(qi - k0 + 1); /* keys k0..qi (causal) */
            if (jn > nk)
              jn = nk;
            if (jn <= 0)
              continue;
            float mx = m[r];
            for (int j = 0; j < jn; j++) {
              float x =
                  dotf(qf + (int64_t)r * d, kf + (int64_t)j * d, d) * scale;
              sc[r * BK + j] = x;
              if (x > mx)
                mx = x;
            }
            const float alpha = expf(m[r] - mx); /* 0 when m = -inf */
            float rs = 0.f;
            float *ar = acc + (int64_t)r * d;
            for (int c = 0; c < d; c++)
              ar[c] *= alpha;
            for (int j = 0; j < jn; j++) {
              float p = expf(sc[r * BK + j] - mx);
              rs += p;
              const float *vr = vf + (int64_t)j * d;
              for (int c = 0; c < d; c++)
                ar[c] += p * vr[c];
            }
            l[r] = l[r] * alpha + rs;
            m[r] = mx;
          }
        }
        for (int r = 0; r < nr; r++) {
          const int64_t qi = q0 + r;
          const float inv = 1.f / l[r];
          const int64_t base = ((b * S + qi) * nq + h) * (int64_t)d;
          for (int c = 0; c < d; c++)
            st(o, bf, base + c, acc[(int64_t)r * d + c] * inv);
          lse[(b * nq + h) * S + qi] = m[r] + logf(l[r]);
        }
      }
    }
    free(qf);
    free(kf);
    free(vf);
    free(acc);
  }
  if (fail)
    return pl_set_error(PL_ENOMEM,
                        "attention cpu fwd: scratch tile allocation failed");
  return PL_OK;
}

/* One tile's gradients from its probabilities pt and dS (dst), [nr, BK]:
 * dQ_i += scale·dS K; dK_j += scale·dS^T Q; dV_j += P^T dO.  dq0 is the
 * tile's first query row (rows dq_stride apart), dk0 / dv0 its first key
 * row (kv_stride apart). */
static void bwd_accumulate(int nr, int nk, int d, float scale, const float *pt,
                           const float *dst, const float *qf, const float *dof,
                           const float *kf, float *dq0, int64_t dq_stride,
                           float *dk0, float *dv0, int64_t kv_stride) {
  for (int r = 0; r < nr; r++) {
    float *dqr = dq0 + r * dq_stride;
    for (int j = 0; j < nk; j++) {
      const float ds = dst[r * BK + j] * scale;
      if (ds == 0.f)
        continue;
      const float *kr = kf + (int64_t)j * d;
      for (int c = 0; c < d; c++)
        dqr[c] += ds * kr[c];
    }
  }
  for (int j = 0; j < nk; j++) {
    float *dkr = dk0 + j * kv_stride, *dvr = dv0 + j * kv_stride;
    for (int r = 0; r < nr; r++) {
      const float ds = dst[r * BK + j] * scale, p = pt[r * BK + j];
      const float *qr = qf + (int64_t)r * d, *dor = dof + (int64_t)r * d;
      if (ds != 0.f)
        for (int c = 0; c < d; c++)
          dkr[c] += ds * qr[c];
      if (p != 0.f)
        for (int c = 0; c < d; c++)
          dvr[c] += p * dor[c];
    }
  }
}

pl_status pl__cpu_attn_bwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, const void *o,
                           const void *dout, const float *lse, void *dq,
                           void *dk, void *dv, void *ws) {
  (void)s;
  PL_TRY(pl__cpu_attn_check(sh));
  const int64_t B = sh->batch, S = sh->seq;
  const int nq = sh->n_q, nkv = sh->n_kv, d = sh->head_dim, grp = nq / nkv;
  const int bf = sh->dtype == PL_BF16;
  const float scale = pl__attn_scale(sh);
  const int full = sh->mask == PL_ATTN_FULL;
  if (B == 0 || S == 0)
    return PL_OK;
  if (!ws)
    return pl_set_error(PL_EINVAL, "attention cpu bwd: workspace is NULL");
  /* workspace: dQacc [B,S,nq,d], dKacc, dVacc [B,S,nkv,d], D [B,nq,S] */
  float *dqa = (float *)ws;
  float *dka = dqa + B * S * nq * (int64_t)d;
  float *dva = dka + B * S * nkv * (int64_t)d;
  float *Dr = dva + B * S * nkv * (int64_t)d;
  const int64_t nqb = (S + BQ - 1) / BQ, ntask = B * nkv;
  int fail = 0;
#pragma omp parallel
  {
    float *qf = malloc(sizeof(float) * (size_t)BQ * d),
          *dof = malloc(sizeof(float) * (size_t)BQ * d);
    float *kf = malloc(sizeof(float) * (size_t)BK * d),
          *vf = malloc(sizeof(float) * (size_t)BK * d);
    float pt[BQ * BK], dst[BQ * BK];
    if (!qf || !dof || !kf || !vf) {
#pragma omp atomic write
      fail = 1;
    } else {
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < ntask; task++) {
        const int hk = (int)(task % nkv);
        const int64_t b = task / nkv;
        /* zero this task's accumulators (its kv head; its group's q heads) */
        for (int64_t i = 0; i < S; i++) {
          memset(dka + ((b * S + i) * nkv + hk) * (int64_t)d, 0,
                 sizeof(float) * (size_t)d);
          memset(dva + ((b * S + i) * nkv + hk) * (int64_t)d, 0,
                 sizeof(float) * (size_t)d);
          for (int h = hk * grp; h < (hk + 1) * grp; h++)
            memset(dqa + ((b * S + i) * nq + h) * (int64_t)d, 0,
                   sizeof(float) * (size_t)d);
        }
        for (int h = hk * grp; h < (hk + 1) * grp; h++) {
          float *Dh = Dr + (b * nq + h) * S;
          const float *L = lse + (b * nq + h) * S;
          for (int64_t i = 0; i < S; i++) { /* D = rowsum(dO∘O), O as stored */
            const int64_t base = ((b * S + i) * nq + h) * (int64_t)d;
            float acc = 0.f;
            for (int c = 0; c < d; c++)
              acc += ld(dout, bf, base + c) * ld(o, bf, base + c);
            Dh[i] = acc;
          }
          for (int64_t qb = 0; qb < nqb; qb++) {
            const int64_t q0 = qb * BQ;
            const int nr = (int)(S - q0 < BQ ? S - q0 : BQ);
            load_rows(qf, q, bf, b, S, nq, h, d, q0, nr);
            load_rows(dof, dout, bf, b, S, nq, h, d, q0, nr);
            const int64_t kend = full ? S : q0 + nr;
            for (int64_t k0 = 0; k0 < kend; k0 += BK) {
              const int nk = (int)(kend - k0 < BK ? kend - k0 : BK);
              load_rows(kf, k, bf, b, S, nkv, hk, d, k0, nk);
              load_rows(vf, v, bf, b, S, nkv, hk, d, k0, nk);
              for (int r = 0; r < nr; r++) {
                const int64_t qi = q0 + r;
                for (int j = 0; j < nk; j++) {
                  float p = 0.f, ds = 0.f;
                  if (full || k0 + j <= qi) {
                    float x =
                        dotf(qf + (int64_t)r * d, kf + (int64_t)j * d, d) *
                        scale;
                    p = expf(x - L[qi]);
                    float dp =
                        dotf(dof + (int64_t)r * d, vf + (int64_t)j * d, d);
                    ds = p * (dp - Dh[qi]);
                  }
                  pt[r * BK + j] = p;
                  dst[r * BK + j] = ds;
                }
              }
              bwd_accumulate(nr, nk, d, scale, pt, dst, qf, dof, kf,
                             dqa + ((b * S + q0) * nq + h) * (int64_t)d,
                             (int64_t)nq * d,
                             dka + ((b * S + k0) * nkv + hk) * (int64_t)d,
                             dva + ((b * S + k0) * nkv + hk) * (int64_t)d,
                             (int64_t)nkv * d);
            }
          }
        }
        for (int64_t i = 0; i < S; i++) {
          const int64_t kb = ((b * S + i) * nkv + hk) * (int64_t)d;
          for (int c = 0; c < d; c++) {
            st(dk, bf, kb + c, dka[kb + c]);
            st(dv, bf, kb + c, dva[kb + c]);
          }
          for (int h = hk * grp; h < (hk + 1) * grp; h++) {
            const int64_t qbse = ((b * S + i) * nq + h) * (int64_t)d;
            for (int c = 0; c < d; c++)
              st(dq, bf, qbse + c, dqa[qbse + c]);
          }
        }
      }
    }
    free(qf);
    free(dof);
    free(kf);
    free(vf);
  }
  if (fail)
    return pl_set_error(PL_ENOMEM,
                        "attention cpu bwd: scratch tile allocation failed");
  return PL_OK;
}

pl_status pl__cpu_attn_merge(pl_stream *s, float *o_acc, float *lse_acc,
                             const void *o_blk, const float *lse_blk,
                             int64_t rows, int n_q, int d, pl_dtype dt) {
  (void)s;
  if (dt != PL_F32 && dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "attention merge: dtype %s: f32 or bf16",
                        pl_dtype_name(dt));
  const int bf = dt == PL_BF16;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++)
    for (int h = 0; h < n_q; h++) {
      const float la = lse_acc[(int64_t)h * rows + r],
                  lb = lse_blk[(int64_t)h * rows + r];
      const float m = la > lb ? la : lb;
      if (m == -INFINITY)
        continue; /* neither side saw a key */
      const float ea = expf(la - m), eb = expf(lb - m), z = ea + eb;
      const float wa = ea / z, wb = eb / z;
      float *oa = o_acc + (r * n_q + h) * (int64_t)d;
      const int64_t ob = (r * n_q + h) * (int64_t)d;
      for (int c = 0; c < d; c++)
        oa[c] = oa[c] * wa + ld(o_blk, bf, ob + c) * wb;
      lse_acc[(int64_t)h * rows + r] = m + logf(z);
    }
  return PL_OK;
}
