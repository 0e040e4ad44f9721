/* attention_cudnn.cpp — cuDNN's fused flash attention behind the engine's
 * attention calls (attention_cudnn.h).  cuDNN reaches its fused attention
 * kernels on Hopper through a graph (matmul, scale, mask, softmax with
 * stats, matmul, and the matching backward) that its runtime recognises and
 * fuses; NVIDIA's header-only cudnn-frontend builds that graph, which is why
 * this one file is C++ with the frontend and everything else stays C.  It
 * holds no device code: the host C++ compiler builds it (nvcc would compile
 * the frontend's headers twice, for the host and for the device pass).
 *
 * One graph per distinct (shape, mask, scale, direction) and device, built
 * with the first call that needs it (heuristics, then the plan) and cached in
 * the device's state (pl__cuda_dev.cudnn) until the device is destroyed: a
 * step calls the same few shapes over and over, and a plan takes tens to
 * hundreds of milliseconds to build.  Executions reuse the cached plan; the
 * device's cuDNN handle is bound to the caller's stream for each call under a
 * lock (several streams of one device share it). */
#include <stdio.h>
#include <string.h>

#include "backend/attention_kernels.h"
#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/internal_cuda.h"

#if PL_HAVE_CUDNN
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;

namespace {

/* Tensor uids of the graphs' variant packs. */
enum : int64_t { U_Q = 1, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV };

/* What makes two calls share a plan. */
typedef std::tuple<int64_t, int64_t, int, int, int, int, uint32_t, int> Key;

struct Entry {
  std::shared_ptr<fe::graph::Graph> graph; /* NULL: cuDNN refused the shape */
  int64_t workspace = 0;
  std::string why; /* cuDNN's message when refused                          */
};

struct State {
  cudnnHandle_t handle = nullptr;
  pthread_mutex_t lock;
  std::map<Key, Entry> plans;
  State() { pthread_mutex_init(&lock, NULL); }
  ~State() {
    plans.clear(); /* graphs first: they hold descriptors of the handle */
    if (handle)
      cudnnDestroy(handle);
    pthread_mutex_destroy(&lock);
  }
};

Key key_of(const pl_attn_shape *sh, int bwd) {
  const float scale = pl__attn_scale(sh);
  uint32_t sbits;
  memcpy(&sbits, &scale, sizeof sbits);
  return Key(sh->batch, sh->seq, sh->n_q, sh->n_kv, sh->head_dim, (int)sh->mask,
             sbits, bwd);
}

/* Token-major [B, S, h, d] seen as cuDNN's [B, h, S, d] through strides. */
std::shared_ptr<fe::graph::Tensor_attributes>
bshd(fe::graph::Graph &g, const char *name, int64_t uid, int64_t B, int64_t S,
     int64_t h, int64_t d) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({B, h, S, d})
                      .set_stride({S * h * d, d, h * d, 1}));
}

void set_bshd(const std::shared_ptr<fe::graph::Tensor_attributes> &t,
              int64_t uid, int64_t B, int64_t S, int64_t h, int64_t d) {
  t->set_output(true)
      .set_uid(uid)
      .set_dim({B, h, S, d})
      .set_stride({S * h * d, d, h * d, 1});
}

/* A graph of bf16 tensors computed in f32, with Q, K and V of sh. */
struct Qkv {
  std::shared_ptr<fe::graph::Graph> g;
  std::shared_ptr<fe::graph::Tensor_attributes> q, k, v;
};
Qkv qkv_graph(const pl_attn_shape *sh) {
  const int64_t B = sh->batch, S = sh->seq, hq = sh->n_q, hk = sh->n_kv,
                d = sh->head_dim;
  Qkv r;
  r.g = std::make_shared<fe::graph::Graph>();
  r.g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  r.q = bshd(*r.g, "Q", U_Q, B, S, hq, d);
  r.k = bshd(*r.g, "K", U_K, B, S, hk, d);
  r.v = bshd(*r.g, "V", U_V, B, S, hk, d);
  return r;
}

/* The forward graph: O and the LSE ("stats", f32 [B, n_q, S, 1]). */
std::shared_ptr<fe::graph::Graph> fwd_graph(const pl_attn_shape *sh) {
  const int64_t B = sh->batch, S = sh->seq, hq = sh->n_q, d = sh->head_dim;
  Qkv t = qkv_graph(sh);
  auto g = t.g;
  auto q = t.q, k = t.k, v = t.v;
  auto opt = fe::graph::SDPA_attributes()
                 .set_name("plateau_attn_fwd")
                 .set_generate_stats(true)
                 .set_attn_scale(pl__attn_scale(sh));
  if (sh->mask == PL_ATTN_CAUSAL)
    opt.set_causal_mask(true);
  auto [o, stats] = g->sdpa(q, k, v, opt);
  set_bshd(o, U_O, B, S, hq, d);
  stats->set_output(true)
      .set_uid(U_STATS)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({B, hq, S, 1})
      .set_stride({hq * S, S, 1, 1});
  return g;
}

/* The backward graph: dQ, dK, dV from Q, K, V, O, dO and the LSE. */
std::shared_ptr<fe::graph::Graph> bwd_graph(const pl_attn_shape *sh) {
  const int64_t B = sh->batch, S = sh->seq, hq = sh->n_q, hk = sh->n_kv,
                d = sh->head_dim;
  Qkv t = qkv_graph(sh);
  auto g = t.g;
  auto q = t.q, k = t.k, v = t.v;
  auto o = bshd(*g, "O", U_O, B, S, hq, d);
  auto dout = bshd(*g, "dO", U_DO, B, S, hq, d);
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("Stats")
                             .set_uid(U_STATS)
                             .set_dim({B, hq, S, 1})
                             .set_stride({hq * S, S, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
  auto opt = fe::graph::SDPA_backward_attributes()
                 .set_name("plateau_attn_bwd")
                 .set_attn_scale(pl__attn_scale(sh));
  if (sh->mask == PL_ATTN_CAUSAL)
    opt.set_causal_mask(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opt);
  set_bshd(dq, U_DQ, B, S, hq, d);
  set_bshd(dk, U_DK, B, S, hk, d);
  set_bshd(dv, U_DV, B, S, hk, d);
  return g;
}

/* The device's state, made with its first use (handle created on the
 * device's GPU). */
pl_status state_of(pl_dev *dev, State **out) {
  pl__cuda_dev *cd = PL_CUDA_IMPL(dev);
  if (!cd->cudnn) {
    PL_TRY(pl__cuda_use(dev));
    State *st = new (std::nothrow) State();
    if (!st)
      return pl_set_error(PL_ENOMEM, "cuDNN attention: out of host memory");
    cudnnStatus_t e = cudnnCreate(&st->handle);
    if (e != CUDNN_STATUS_SUCCESS) {
      delete st;
      return pl_set_error(PL_ERUNTIME,
                          "cuDNN attention: cudnnCreate on device %d: %s",
                          dev->ordinal, cudnnGetErrorString(e));
    }
    cd->cudnn = st;
  }
  *out = (State *)cd->cudnn;
  return PL_OK;
}

/* The cached entry for (sh, bwd), its graph built now if this is the first
 * call of the shape.  Called with the state's lock held. */
Entry &entry_of(State *st, const pl_attn_shape *sh, int bwd) {
  const Key key = key_of(sh, bwd);
  auto it = st->plans.find(key);
  if (it != st->plans.end())
    return it->second;
  Entry e;
  try {
    auto g = bwd ? bwd_graph(sh) : fwd_graph(sh);
    auto built = g->build(st->handle, {fe::HeurMode_t::A});
    if (built.is_good()) {
      auto sized = g->get_workspace_size(e.workspace);
      if (sized.is_good())
        e.graph = g;
      else
        e.why = sized.get_message();
    } else {
      e.why = built.get_message();
    }
  } catch (const std::exception &x) {
    e.why = x.what();
  } catch (...) {
    e.why = "unknown exception from cudnn-frontend";
  }
  (void)cudaGetLastError();
  return st->plans.emplace(key, std::move(e)).first->second;
}

pl_status refused(const pl_attn_shape *sh, int bwd, const std::string &why) {
  return pl_set_error(PL_EUNSUPPORTED,
                      "attention: cuDNN builds no %s plan for B=%lld S=%lld "
                      "n_q=%d n_kv=%d d=%d "
                      "(%s): %s",
                      bwd ? "backward" : "forward", (long long)sh->batch,
                      (long long)sh->seq, sh->n_q, sh->n_kv, sh->head_dim,
                      sh->mask == PL_ATTN_FULL ? "full" : "causal",
                      why.c_str());
}

/* Run the cached plan of (sh, bwd) on s with the variant pack. */
pl_status execute(pl_stream *s, const pl_attn_shape *sh, int bwd,
                  std::map<int64_t, void *> const &ptrs, void *ws,
                  size_t ws_bytes) {
  pl_dev *dev = pl_stream_dev(s);
  State *st = NULL;
  PL_TRY(state_of(dev, &st));
  PL_TRY(pl__cuda_use(dev));
  pthread_mutex_lock(&st->lock);
  Entry &e = entry_of(st, sh, bwd);
  pl_status rc = PL_OK;
  if (!e.graph) {
    rc = refused(sh, bwd, e.why);
  } else if ((int64_t)ws_bytes < e.workspace) {
    rc = pl_set_error(
        PL_EINVAL,
        "attention: cuDNN %s workspace %zu bytes, the plan needs %lld",
        bwd ? "backward" : "forward", ws_bytes, (long long)e.workspace);
  } else {
    cudnnStatus_t cs =
        cudnnSetStream(st->handle, (cudaStream_t)pl_stream_native(s));
    if (cs != CUDNN_STATUS_SUCCESS) {
      rc = pl_set_error(PL_ERUNTIME, "attention: cudnnSetStream: %s",
                        cudnnGetErrorString(cs));
    } else {
      std::unordered_map<int64_t, void *> pack(ptrs.begin(), ptrs.end());
      try {
        auto r = e.graph->execute(st->handle, pack, ws);
        if (!r.is_good())
          rc = pl_set_error(
              PL_ERUNTIME, "attention: cuDNN %s execution failed: %s",
              bwd ? "backward" : "forward", r.get_message().c_str());
      } catch (const std::exception &x) {
        rc = pl_set_error(PL_ERUNTIME, "attention: cuDNN %s execution: %s",
                          bwd ? "backward" : "forward", x.what());
      }
    }
  }
  pthread_mutex_unlock(&st->lock);
  if (rc == PL_OK) {
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess)
      rc = pl_set_error(PL_ERUNTIME, "attention: cuDNN %s launch: %s",
                        bwd ? "backward" : "forward", cudaGetErrorString(ce));
  }
  return rc;
}

} // namespace

extern "C" pl_status pl__cudnn_attn_check(const pl_attn_shape *sh) {
  if (sh->dtype != PL_BF16)
    return pl_set_error(PL_EUNSUPPORTED,
                        "attention: dtype %s: cuDNN's path takes bf16 only",
                        pl_dtype_name(sh->dtype));
  if (sh->head_dim != 64 && sh->head_dim != 128)
    return pl_set_error(PL_EUNSUPPORTED,
                        "attention: d=%d: cuDNN's path takes 64 or 128",
                        sh->head_dim);
  return PL_OK;
}

extern "C" pl_status pl__cudnn_attn_ready(pl_stream *s, const pl_attn_shape *sh,
                                          int bwd) {
  PL_TRY(pl__cudnn_attn_check(sh));
  pl_dev *dev = pl_stream_dev(s);
  State *st = NULL;
  PL_TRY(state_of(dev, &st));
  PL_TRY(pl__cuda_use(dev));
  pthread_mutex_lock(&st->lock);
  Entry &e = entry_of(st, sh, bwd);
  pl_status rc = e.graph ? PL_OK : refused(sh, bwd, e.why);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

extern "C" size_t pl__cudnn_attn_need(pl_stream *s, const pl_attn_shape *sh,
                                      int bwd) {
  if (pl__cudnn_attn_ready(s, sh, bwd) != PL_OK) {
    pl_clear_error();
    return 0;
  }
  State *st = (State *)PL_CUDA_IMPL(pl_stream_dev(s))->cudnn;
  pthread_mutex_lock(&st->lock);
  const int64_t w = entry_of(st, sh, bwd).workspace;
  pthread_mutex_unlock(&st->lock);
  return (size_t)w;
}

extern "C" pl_status pl__cudnn_attn_fwd(pl_stream *s, const pl_attn_shape *sh,
                                        const void *q, const void *k,
                                        const void *v, void *o, float *lse) {
  PL_TRY(pl__cudnn_attn_ready(s, sh, 0));
  pl_dev *dev = pl_stream_dev(s);
  State *st = (State *)PL_CUDA_IMPL(dev)->cudnn;
  pthread_mutex_lock(&st->lock);
  const int64_t need = entry_of(st, sh, 0).workspace;
  pthread_mutex_unlock(&st->lock);
  void *ws = NULL;
  if (need > 0)
    PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)need, "attention", s,
                          &ws));
  std::map<int64_t, void *> ptrs = {{U_Q, (void *)q},
                                    {U_K, (void *)k},
                                    {U_V, (void *)v},
                                    {U_O, o},
                                    {U_STATS, (void *)lse}};
  pl_status rc = execute(s, sh, 0, ptrs, ws, (size_t)need);
  if (ws)
    pl_free_async(dev, ws, s);
  return rc;
}

extern "C" pl_status pl__cudnn_attn_bwd(pl_stream *s, const pl_attn_shape *sh,
                                        const void *q, const void *k,
                                        const void *v, const void *o,
                                        const void *dout, const float *lse,
                                        void *dq, void *dk, void *dv, void *ws,
                                        size_t ws_bytes) {
  std::map<int64_t, void *> ptrs = {
      {U_Q, (void *)q}, {U_K, (void *)k},     {U_V, (void *)v},
      {U_O, (void *)o}, {U_DO, (void *)dout}, {U_STATS, (void *)lse},
      {U_DQ, dq},       {U_DK, dk},           {U_DV, dv}};
  return execute(s, sh, 1, ptrs, ws, ws_bytes);
}

extern "C" void pl__cudnn_release(void *state) {
  delete (State *)state;
}

extern "C" const char *pl__cudnn_version(void) {
  static char buf[32];
  const size_t v = cudnnGetVersion(); /* major·10000 + minor·100 + patch */
  if (v == 0)
    return "-";
  snprintf(buf, sizeof buf, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100,
           v % 100);
  return buf;
}

#else /* no cuDNN in this build */

extern "C" pl_status pl__cudnn_attn_check(const pl_attn_shape *sh) {
  (void)sh;
  return pl_set_error(
      PL_EUNSUPPORTED,
      "attention: this build has no cuDNN (rebuild with CUDNN=1 and cuDNN 9 "
      "and the cudnn-frontend headers present)");
}
extern "C" pl_status pl__cudnn_attn_ready(pl_stream *s, const pl_attn_shape *sh,
                                          int bwd) {
  (void)s, (void)bwd;
  return pl__cudnn_attn_check(sh);
}
extern "C" size_t pl__cudnn_attn_need(pl_stream *s, const pl_attn_shape *sh,
                                      int bwd) {
  (void)s, (void)sh, (void)bwd;
  return 0;
}
extern "C" pl_status pl__cudnn_attn_fwd(pl_stream *s, const pl_attn_shape *sh,
                                        const void *q, const void *k,
                                        const void *v, void *o, float *lse) {
  (void)s, (void)q, (void)k, (void)v, (void)o, (void)lse;
  return pl__cudnn_attn_check(sh);
}
extern "C" pl_status pl__cudnn_attn_bwd(pl_stream *s, const pl_attn_shape *sh,
                                        const void *q, const void *k,
                                        const void *v, const void *o,
                                        const void *dout, const float *lse,
                                        void *dq, void *dk, void *dv, void *ws,
                                        size_t ws_bytes) {
  (void)s, (void)q, (void)k, (void)v, (void)o, (void)dout, (void)lse, (void)dq,
      (void)dk;
  (void)dv, (void)ws, (void)ws_bytes;
  return pl__cudnn_attn_check(sh);
}
extern "C" void pl__cudnn_release(void *state) {
  (void)state;
}
extern "C" const char *pl__cudnn_version(void) {
  return "-";
}

#endif
