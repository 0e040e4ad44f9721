#!/usr/bin/env bash
# test_install.sh — `make install PREFIX=...` gives a usable engine: a user
# program built only with `pkg-config --cflags --libs plateau` against the
# installed tree creates a CPU device, runs a tracked allocation and a GEMM,
# and reads the peak back.
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
"$tmp/prefix/bin/plateau" --help >/dev/null
echo "test_install.sh: 1 passed, 0 failed"
