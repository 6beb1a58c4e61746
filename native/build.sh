#!/usr/bin/env bash
# Builds native/build/libtalkbox_native.so with the user's nvcc for every
# target among sm_80, sm_86, sm_89, sm_90 and sm_120 that the toolkit knows
# (asked with `nvcc --list-gpu-arch`), plus PTX of the newest for later GPUs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ ! -x "$NVCC" ]; then
  echo "native: nvcc not found (set NVCC or put the CUDA toolkit on PATH)" >&2
  exit 1
fi
known="$("$NVCC" --list-gpu-arch 2>/dev/null || true)"
gencode=()
last=""
for sm in ${TB_ARCHS:-80 86 89 90 120}; do
  if grep -qx "compute_${sm}" <<<"$known"; then
    gencode+=("-gencode=arch=compute_${sm},code=sm_${sm}")
    last=$sm
  fi
done
if [ -z "$last" ]; then
  echo "native: $NVCC supports none of sm_80/86/89/90/120" >&2
  exit 1
fi
gencode+=("-gencode=arch=compute_${last},code=compute_${last}")
# TB_DEFS: extra nvcc flags (the kernel's -DTB_* switches); TB_OUT: output file.
out="${TB_OUT:-$here/build/libtalkbox_native.so}"
mkdir -p "$here/build" "$(dirname "$out")"
echo "native: $("$NVCC" --version | tail -1); targets: ${gencode[*]}"
log="$out.ptxas.log"
# shellcheck disable=SC2086
"$NVCC" -O3 -std=c++17 --threads 0 -shared -Xcompiler -fPIC -Xptxas -v ${TB_DEFS:-} "${gencode[@]}" \
  -o "$out" "$here/src/engine.cu" -lcudart_static -ldl -lrt -lpthread \
  2> "$log" || { cat "$log" >&2; exit 1; }
grep -E "registers|spill" "$log" | grep -i decode -A1 | head -20 || true
grep -E "bytes stack frame|spill" "$log" | sort | uniq -c | head -10 || true
echo "native: built $out"
