#!/usr/bin/env bash
# dev/attention/compare_sass.sh — proves that moving or reorganizing the
# attention kernels left their machine code alone.  Compiles the attention
# kernels of a base revision (engine/backend/cuda/attention*.cu there) and of
# the work tree (engine/backend/cuda/attention*.cu and dev/attention/*.cu) to
# cubins with the Makefile's nvcc flags (build/gen/nvcc_flags; sm_90a unless
# ARCH says otherwise), then compares every kernel of the base build with the
# kernel of the same name in the new one (RENAMED below maps the kernels whose
# name changed): its machine code (the bytes of its .text section), registers,
# barriers, stack, spills and shared memory (ptxas -v).  nvcc alone suffices;
# with nvdisasm (on PATH or NVDISASM=...) a kernel that differs gets its SASS
# diff written next to the table.
#
# Usage (from the repository root):
#     dev/attention/compare_sass.sh [BASE_REV]
# BASE_REV defaults to the parent of the commit that created
# attention_common.cuh (the last revision with one attention.cu).  Prints a
# line per base kernel — same, DIFFERENT, or gone (in neither the engine nor
# dev) — and a line per new kernel that the base did not have; exits 1 when
# a kernel differs or is gone.  Writes its work to $OUT (a temporary folder
# by default).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
BASE=${1:-$(git log --diff-filter=A --format=%H -- engine/backend/cuda/attention_common.cuh | tail -1)^}
ARCH=${ARCH:-90a}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
OUT=${OUT:-$(mktemp -d)}
NVDISASM=${NVDISASM:-$(command -v nvdisasm || true)}
[[ -x $NVCC ]] || { echo "compare_sass.sh: nvcc not found"; exit 2; }
FLAGS="-std=c++17 -O3 -lineinfo -Xcompiler -fPIC,-Wall -Iengine/include -Iengine -DPL_HAVE_CUDA=1
  -I$(dirname "$(dirname "$NVCC")")/include --expt-relaxed-constexpr $(mpicc --showme:compile 2>/dev/null || true)"
if [[ -f build/gen/nvcc_flags ]]; then # the Makefile's flags, arch replaced by ARCH
  FLAGS=$(cut -d' ' -f2- build/gen/nvcc_flags | sed 's/-arch=sm_[0-9a-z]*//')
  FLAGS="$FLAGS $(mpicc --showme:compile 2>/dev/null || true)"
fi
mkdir -p "$OUT/base/tree" "$OUT/new"
git archive "$BASE" engine | tar -x -C "$OUT/base/tree"

compile() { # dir src out-prefix
  (cd "$1" && "$NVCC" $FLAGS -arch=sm_$ARCH -Xptxas -v -cubin -o "$3.cubin" "$2" 2>"$3.ptxas") ||
    { cat "$3.ptxas"; echo "compare_sass.sh: $2 does not compile"; exit 2; }
}
for f in "$OUT"/base/tree/engine/backend/cuda/attention*.cu; do
  compile "$OUT/base/tree" "engine/backend/cuda/$(basename "$f")" "$OUT/base/$(basename "$f" .cu)"
done
for f in engine/backend/cuda/attention*.cu dev/attention/*.cu; do
  [[ -f $f ]] && compile . "$f" "$OUT/new/$(basename "$f" .cu)"
done

python3 - "$OUT" "${NVDISASM:-}" <<'PY'
import glob, hashlib, os, re, struct, subprocess, sys
out, nvdisasm = sys.argv[1], sys.argv[2]
# Kernels renamed when the variants left the engine for dev/attention: the
# engine's wgmma forward is the former V path 6 (ovtma), its dK/dV kernel
# <DQ> the former <FQ = 2 bulk | 0 none, SY = 2 tma>; the dev programs hold
# the other V paths and dK/dV variants under dev_ names (PROBE = 0 appended).
RENAME_RULES = [
    (r'^_Z21attn_fwd_wgmma_kernelILi6EEv(.*)$', r'_Z21attn_fwd_wgmma_kernelILb0EEv\1'),
    (r'^_Z21attn_fwd_wgmma_kernelILi(\d)EEv(.*)$', r'_Z20dev_fwd_wgmma_kernelILi\1EEv\2'),
    (r'^_Z26attn_fwd_wgmma_pipe_kernel(.*)$', r'_Z25dev_fwd_wgmma_pipe_kernel\1'),
    (r'^_Z26attn_bwd_dkdv_wgmma_kernelILi2ELi2EEv(.*)$', r'_Z26attn_bwd_dkdv_wgmma_kernelILb1ELb0EEv\1'),
    (r'^_Z26attn_bwd_dkdv_wgmma_kernelILi0ELi2EEv(.*)$', r'_Z26attn_bwd_dkdv_wgmma_kernelILb0ELb0EEv\1'),
    (r'^_Z26attn_bwd_dkdv_wgmma_kernelILi(\d)ELi(\d)EEv(.*)$',
     r'_Z19dev_bwd_dkdv_kernelILi\1ELi\2ELi0EEv\3'),
    # the mma kernels gained a last template argument FULL (the non-causal
    # mask); FULL = false is the former causal kernel
    (r'^_Z19attn_fwd_mma_kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)EEv(.*)$',
     r'_Z19attn_fwd_mma_kernelILi\1ELi\2ELi\3ELi\4ELb0EEv\5'),
    (r'^_Z19attn_bwd_mma_kernelILi(\d+)ELi(\d+)EEv(.*)$',
     r'_Z19attn_bwd_mma_kernelILi\1ELi\2ELb0EEv\3'),
    # the wgmma forward and dK/dV kernel gained a template argument FULL
    # (the full mask); FULL = false is the former causal kernel
    (r'^_Z21attn_fwd_wgmma_kernel(10AttnParams.*)$', r'_Z21attn_fwd_wgmma_kernelILb0EEv\1'),
    (r'^_Z26attn_bwd_dkdv_wgmma_kernelILb(\d)EEv(.*)$',
     r'_Z26attn_bwd_dkdv_wgmma_kernelILb\1ELb0EEv\2'),
]
def renamed(k):
    for pat, rep in RENAME_RULES:
        if re.match(pat, k): return re.sub(pat, rep, k)
    return k

def kernels(cubin):
    """name -> (sha256 of .text bytes, .text size) for every kernel of an ELF cubin"""
    d = open(cubin, 'rb').read()
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
    sh = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    so = sh[shstrndx][4]
    res = {}
    for s in sh:
        name = d[so + s[0]:d.index(b'\0', so + s[0])].decode()
        if name.startswith('.text.'):
            res[name[6:]] = (hashlib.sha256(d[s[4]:s[4] + s[5]]).hexdigest(), s[5])
    return res

def ptxas(log):
    """name -> 'regs N bar N smem N stack N spill N/N' from ptxas -v"""
    res, cur = {}, None
    for line in open(log, errors='replace'):
        m = re.search(r"Function properties for (\S+)", line)
        if m: cur = m.group(1); res[cur] = {}
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur: res[cur].update(stack=m.group(1), spill=m.group(2) + '/' + m.group(3))
        m = re.search(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?", line)
        if m and cur: res[cur].update(regs=m.group(1), bar=m.group(2) or '0', smem=m.group(3) or '0')
    return {k: ' '.join('%s %s' % (a, v.get(a, '?')) for a in ('regs', 'bar', 'smem', 'stack', 'spill'))
            for k, v in res.items()}

def build(side):
    ks = {}
    for c in sorted(glob.glob(os.path.join(out, side, '*.cubin'))):
        info = ptxas(c[:-6] + '.ptxas')
        for k, (h, n) in kernels(c).items():
            ks.setdefault(k, (h, n, info.get(k, '?'), os.path.basename(c)[:-6], c))
    return ks

def sass(cubin, name):
    if not nvdisasm: return None
    txt = subprocess.run([nvdisasm, '-c', cubin], capture_output=True, text=True).stdout
    m = re.search(r'\.section\s+\.text\.' + re.escape(name) + r',.*?(?=\n\s*\.section\s|\Z)', txt, re.S)
    if not m: return None
    return re.sub(r'/\*[0-9a-f]{4,}\*/', '', m.group(0).replace(name, 'KERNEL'))

base, new = build('base'), build('new')
bad, seen = 0, set()
print('%-10s %-62s %-22s %8s  %s' % ('result', 'kernel (base name)', 'new file', 'bytes', 'ptxas'))
for k in sorted(base):
    nk = renamed(k)
    h, n, info, _, bc = base[k]
    if nk not in new:
        print('%-10s %-62s %-22s %8d  %s' % ('gone', k, '-', n, info)); bad += 1; continue
    seen.add(nk)
    nh, nn, ninfo, nf, nc = new[nk]
    ok = nh == h and ninfo == info
    print('%-10s %-62s %-22s %8d  %s%s' % ('same' if ok else 'DIFFERENT', k, nf, nn, ninfo,
                                           '' if nk == k else '  (now ' + nk + ')'))
    if not ok:
        bad += 1
        if info != ninfo: print('           base ptxas: ' + info)
        a, b = sass(bc, k), sass(nc, nk)
        if a is not None and b is not None:
            import difflib
            p = os.path.join(out, nk + '.sass.diff')
            open(p, 'w').writelines(difflib.unified_diff(a.splitlines(1), b.splitlines(1), 'base', 'new'))
            print('           SASS diff: ' + p)
for k in sorted(set(new) - seen):
    print('%-10s %-62s %-22s %8d  %s' % ('new', k, new[k][3], new[k][1], new[k][2]))
print('# %d base kernels, %d differ or are gone; work in %s' % (len(base), bad, out))
sys.exit(1 if bad else 0)
PY
