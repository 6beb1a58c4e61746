# Sourced by native/build.sh and native/codec/build.sh: finds nvcc and sets
# NVCC and the gencode array for every target among sm_80, sm_86, sm_89, sm_90
# and sm_120 that the toolkit knows (`nvcc --list-gpu-arch`; TB_ARCHS picks
# others), plus PTX of the newest so later GPUs can JIT it. $1 names the
# caller in messages.
who="$1"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ ! -x "$NVCC" ]; then
  echo "$who: nvcc not found (set NVCC or put the CUDA toolkit on PATH)" >&2
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
  echo "$who: $NVCC supports none of ${TB_ARCHS:-sm_80/86/89/90/120}" >&2
  exit 1
fi
gencode+=("-gencode=arch=compute_${last},code=compute_${last}")
echo "$who: $("$NVCC" --version | tail -1); targets: ${gencode[*]}"
