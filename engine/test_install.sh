#!/usr/bin/env bash
# test_install.sh — `make install PREFIX=...` gives a usable engine: a user
# program built only with `pkg-config --cflags --libs plateau` against the
# installed tree creates a CPU device, runs a tracked allocation and a GEMM,
# and reads the peak back; a second one runs an operator from its installed
# header (Ring-DTP, the vocabulary head, on one rank) and checks its loss
# against the cross-entropy it computes itself.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make --no-print-directory -s install BUILD="$BUILD" PREFIX="$tmp/prefix" >/dev/null
grep -q "^prefix=$tmp/prefix$" "$tmp/prefix/lib/pkgconfig/plateau.pc" || { echo "FAIL: .pc prefix"; exit 1; }
cat >"$tmp/app.c" <<'C'
#include <plateau/plateau.h>
#include <stdio.h>
int main(void) {
  pl_dev *dev;
  if (pl_dev_create(PL_BACKEND_CPU, 0, &dev) != PL_OK) return 1;
  float *a, *c;
  if (pl_alloc(dev, PL_ARENA_DEVICE, 4 * 4 * sizeof(float), "weights", (void **)&a) ||
      pl_alloc(dev, PL_ARENA_DEVICE, 4 * 4 * sizeof(float), "acts", (void **)&c)) return 2;
  for (int i = 0; i < 16; i++) a[i] = (i % 5 == 0) ? 1.0f : 0.0f; /* identity */
  if (pl_gemm(pl_dev_stream(dev), false, false, 4, 4, 4, 2.0f, a, 4, a, 4, 0.0f, c, 4, PL_F32, PL_F32)) return 3;
  pl_mem_stats st;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  printf("c00=%g c01=%g peak=%zu\n", c[0], c[1], st.peak);
  int ok = c[0] == 2.0f && c[1] == 0.0f && st.peak == 128;
  pl_free(dev, a), pl_free(dev, c);
  pl_dev_destroy(dev);
  return ok ? 0 : 4;
}
C
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/app" "$tmp/app.c" $(pkg-config --cflags --libs plateau)
out=$("$tmp/app")
echo "$out"
[ "$out" = "c00=2 c01=0 peak=128" ] || { echo "FAIL: installed engine computed: $out"; exit 1; }
cat >"$tmp/op.c" <<'C'
#include <math.h>
#include <plateau/plateau.h>
#include <plateau/ops/ring_dtp.h>
#include <stdio.h>
int main(int argc, char **argv) {
  enum { N = 8, H = 4, V = 16 };
  if (pl_init(&argc, &argv) != PL_OK) return 1;
  pl_dev *dev;
  pl_comm *c;
  if (pl_dev_create(PL_BACKEND_CPU, 0, &dev) || pl_comm_world(dev, &c)) return 2;
  float *x, *w, *loss, *dx, *dw;
  int32_t *t;
  if (pl_alloc(dev, PL_ARENA_DEVICE, N * H * 4, "inputs", (void **)&x) ||
      pl_alloc(dev, PL_ARENA_DEVICE, H * V * 4, "weights", (void **)&w) ||
      pl_alloc(dev, PL_ARENA_DEVICE, N * 4, "inputs", (void **)&t) ||
      pl_alloc(dev, PL_ARENA_DEVICE, 4, "loss", (void **)&loss) ||
      pl_alloc(dev, PL_ARENA_DEVICE, N * H * 4, "grads", (void **)&dx) ||
      pl_alloc(dev, PL_ARENA_DEVICE, H * V * 4, "grads", (void **)&dw)) return 3;
  for (int i = 0; i < N * H; i++) x[i] = sinf(0.7f * i);
  for (int i = 0; i < H * V; i++) w[i] = cosf(0.3f * i) / 2;
  for (int i = 0; i < N; i++) t[i] = (5 * i + 3) % V;
  pl_dtp_opts o;
  pl_dtp_opts_default(&o);
  pl_dtp *d;
  pl_stream *s = pl_dev_stream(dev);
  if (pl_dtp_create(c, PL_F32, N, H, V, &o, &d) || pl_dtp_forward(d, s, x, t, w, loss) ||
      pl_dtp_backward(d, s, x, t, w, NULL, dx, dw) || pl_stream_sync(s)) {
    fprintf(stderr, "%s\n", pl_last_error());
    return 4;
  }
  double want = 0; /* mean over the tokens of logsumexp(x W) - (x W)[t] */
  for (int i = 0; i < N; i++) {
    double y[V], m = -1e300, z = 0;
    for (int v = 0; v < V; v++) {
      y[v] = 0;
      for (int k = 0; k < H; k++) y[v] += (double)x[i * H + k] * w[k * V + v];
      m = y[v] > m ? y[v] : m;
    }
    for (int v = 0; v < V; v++) z += exp(y[v] - m);
    want += (m + log(z) - y[t[i]]) / N;
  }
  printf("loss=%.6f want=%.6f\n", loss[0], want);
  int ok = fabs(loss[0] - want) < 1e-5 * fabs(want);
  pl_dtp_destroy(d);
  void *ps[] = {x, w, t, loss, dx, dw};
  for (int i = 0; i < 6; i++) pl_free(dev, ps[i]);
  pl_comm_destroy(c);
  pl_dev_destroy(dev);
  pl_finalize();
  return ok ? 0 : 5;
}
C
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/op" "$tmp/op.c" $(pkg-config --cflags --libs plateau) -lm
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$tmp/op" || { echo "FAIL: the installed Ring-DTP head"; exit 1; }
for h in ops/moe.h ops/ring_dtp.h ops/sco.h ops/stream_adamw.h model/attention.h model/layer.h train/step.h plan/plan.h; do
  [ -f "$tmp/prefix/include/plateau/$h" ] || { echo "FAIL: $h not installed"; exit 1; }
done
"$tmp/prefix/bin/plateau" --help >/dev/null
echo "test_install.sh: 3 passed, 0 failed"
