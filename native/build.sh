#!/usr/bin/env bash
# Builds native/build/libtalkbox_native.so with the user's nvcc for the GPU
# targets nvcc-targets.sh picks.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=nvcc-targets.sh
source "$here/nvcc-targets.sh" native
# TB_DEFS: extra nvcc flags (the kernel's -DTB_* switches); TB_OUT: output file.
out="${TB_OUT:-$here/build/libtalkbox_native.so}"
mkdir -p "$here/build" "$(dirname "$out")"
log="$out.ptxas.log"
# shellcheck disable=SC2086
"$NVCC" -O3 -std=c++17 --threads 0 -shared -Xcompiler -fPIC -Xptxas -v ${TB_DEFS:-} "${gencode[@]}" \
  -o "$out" "$here/src/engine.cu" -lcudart_static -ldl -lrt -lpthread \
  2> "$log" || { cat "$log" >&2; exit 1; }
grep -E "registers|spill" "$log" | grep -i decode -A1 | head -20 || true
grep -E "bytes stack frame|spill" "$log" | sort | uniq -c | head -10 || true
echo "native: built $out"
