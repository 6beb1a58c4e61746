#!/usr/bin/env bash
# Builds native/build/libtalkbox_native.so with the user's nvcc for the GPU
# targets nvcc-targets.sh picks.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=nvcc-targets.sh
source "$here/nvcc-targets.sh" native 90a
# shellcheck source=check-stack.sh
source "$here/check-stack.sh"
# TB_DEFS: extra nvcc flags (-DTB_PROF=1 for per-phase profiles); TB_OUT: output file.
out="${TB_OUT:-$here/build/libtalkbox_native.so}"
mkdir -p "$here/build" "$(dirname "$out")"
log="$out.ptxas.log"
# shellcheck disable=SC2086
"$NVCC" -O3 -std=c++17 --threads 0 -shared -Xcompiler -fPIC -Xptxas -v ${TB_DEFS:-} "${gencode[@]}" \
  -o "$out" "$here/src/engine.cu" -lcudart_static -ldl -lrt -lpthread \
  2> "$log" || { cat "$log" >&2; exit 1; }
grep -E "bytes stack frame|spill" "$log" | sort | uniq -c | head -10 || true
echo "native: built $out"
check_stack "$log" "$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')"
