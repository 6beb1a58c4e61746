#!/usr/bin/env bash
# Builds native/build/libtalkbox_codec.so (the GPU codec decoder that
# engine/cudacodec loads at run time) with the user's nvcc for the GPU
# targets nvcc-targets.sh picks. TBC_OUT names another output directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${TBC_OUT:-$here/../build}"
# shellcheck source=../nvcc-targets.sh
source "$here/../nvcc-targets.sh" native-codec 90a
mkdir -p "$out"
"$NVCC" -O3 -std=c++17 --threads 0 -shared -Xcompiler -fPIC -Xptxas -v "${gencode[@]}" \
  -o "$out/libtalkbox_codec.so" "$here/codec.cu" -lcudart_static -ldl -lrt -lpthread \
  2> "$out/codec_ptxas.log" || { cat "$out/codec_ptxas.log" >&2; exit 1; }
grep -E "bytes stack frame|spill" "$out/codec_ptxas.log" | sort | uniq -c | head -10 || true
echo "native-codec: built $out/libtalkbox_codec.so"
