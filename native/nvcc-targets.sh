# Sourced by native/build.sh and native/codec/build.sh: finds nvcc and sets
# NVCC and the gencode array for every target among sm_80, sm_86, sm_89, sm_90
# and sm_120 that the toolkit knows (`nvcc --list-gpu-arch`; TB_ARCHS picks
# others), plus PTX of the newest so later GPUs can JIT it. $1 names the
# caller in messages; a second argument "90a" builds sm_90 as sm_90a (Hopper's
# wgmma; the image runs on sm_90 devices alone) where the toolkit knows it.
who="$1"
hopper="${2:-}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ ! -x "$NVCC" ]; then
  echo "$who: nvcc not found (set NVCC or put the CUDA toolkit on PATH)" >&2
  exit 1
fi
known="$("$NVCC" --list-gpu-arch 2>/dev/null || true)"
# sm_90a (not in --list-gpu-arch's list) came with CUDA 12.
major="$("$NVCC" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
gencode=()
last=""
for sm in ${TB_ARCHS:-80 86 89 90 120}; do
  if [ "$sm" = 90 ] && [ "$hopper" = 90a ] && [ "${major:-0}" -ge 12 ] && grep -qx "compute_90" <<<"$known"; then
    gencode+=("-gencode=arch=compute_90a,code=sm_90a")
    last=$sm
  elif grep -qx "compute_${sm}" <<<"$known"; then
    gencode+=("-gencode=arch=compute_${sm},code=sm_${sm}")
    last=$sm
  fi
done
if [ -z "$last" ]; then
  echo "$who: $NVCC supports none of ${TB_ARCHS:-sm_80/86/89/90/120}" >&2
  exit 1
fi
gencode+=("-gencode=arch=compute_${last},code=compute_${last}")
echo "$who: $("$NVCC" --version | tail -1); targets: ${gencode[*]}"
