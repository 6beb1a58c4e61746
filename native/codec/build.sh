#!/usr/bin/env bash
# Builds native/build/libtalkbox_codec.so (the GPU codec decoder that
# engine/cudacodec loads at run time) with the user's nvcc for every target
# among sm_80, sm_86, sm_89, sm_90 and sm_120 that the toolkit knows, plus
# PTX of the newest for later GPUs. TB_ARCHS picks targets; TBC_OUT another
# output directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${TBC_OUT:-$here/../build}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ ! -x "$NVCC" ]; then
  echo "native-codec: nvcc not found (set NVCC or put the CUDA toolkit on PATH)" >&2
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
  echo "native-codec: $NVCC supports none of sm_80/86/89/90/120" >&2
  exit 1
fi
gencode+=("-gencode=arch=compute_${last},code=compute_${last}")
mkdir -p "$out"
echo "native-codec: $("$NVCC" --version | tail -1); targets: ${gencode[*]}"
"$NVCC" -O3 -std=c++17 --threads 0 -shared -Xcompiler -fPIC -Xptxas -v "${gencode[@]}" \
  -o "$out/libtalkbox_codec.so" "$here/codec.cu" -lcudart_static -ldl -lrt -lpthread \
  2> "$out/codec_ptxas.log" || { cat "$out/codec_ptxas.log" >&2; exit 1; }
grep -E "bytes stack frame|spill" "$out/codec_ptxas.log" | sort | uniq -c | head -10 || true
echo "native-codec: built $out/libtalkbox_codec.so"
