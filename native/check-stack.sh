#!/usr/bin/env bash
# Sourced by native/build.sh after a build: fails when the decode kernels'
# local memory grows. A spill inside the frame loop costs every step (the
# predictor bench's second copy of a step once gave decode_kernel<false> a
# 480-byte spill and the frame 3% of its time), so a change that grows the
# stack frame or the spill bytes must say so by raising the limits below.
# They are the committed kernels' figures from `ptxas -v` for sm_90, per
# CUDA release (other releases allocate differently; they are reported, not
# checked: add a release's line from its first build of unchanged kernels).
# 11.8: Debian's nvidia-cuda-toolkit. (nvcc 11.8's front end with ptxas 12.6
# gives 72 92 188 and 40 44 104.) TB_STACK_CHECK=0 skips the check
# (experimental -D builds).
#   release kernel: stack-frame spill-stores spill-loads (bytes)
stack_limits="
11.8 decode_kernel<true>: 72 88 148
11.8 decode_kernel<false>: 16 20 24
"
# check_stack LOG RELEASE: LOG is the build's ptxas -v output.
check_stack() {
  local log=$1 release=$2 fn="" arch="" props="" failed=0 seen=0
  [ "${TB_STACK_CHECK:-1}" = 0 ] && { echo "native: stack check skipped (TB_STACK_CHECK=0)"; return 0; }
  while IFS= read -r line; do
    case $line in
      *"Compiling entry function '"*)
        fn=${line#*Compiling entry function \'}; arch=${fn#*\' for \'}; fn=${fn%%\'*}; arch=${arch%%\'*} ;;
      *"Function properties for "*) props=${line##*Function properties for } ;;
      *"bytes stack frame"*)
        # Only a properties block that follows its own entry line counts
        # (parallel ptxas runs may interleave their lines).
        [ "$props" = "$fn" ] && { [ "$arch" = sm_90 ] || [ "$arch" = sm_90a ]; } || continue
        local kind
        case $fn in *decode_kernelILb1E*) kind="decode_kernel<true>" ;; *decode_kernelILb0E*) kind="decode_kernel<false>" ;; *) continue ;; esac
        local -a v
        read -r -a v <<<"$line"
        local got="${v[0]} ${v[4]} ${v[8]}" want
        seen=$((seen + 1))
        want=$(grep -F "$release $kind:" <<<"$stack_limits" | sed 's/.*: //' || true)
        if [ -z "$want" ]; then
          echo "native: $kind sm_90: stack/spill-stores/spill-loads $got bytes (no limits for CUDA $release; not checked)"
          continue
        fi
        local -a g w
        read -r -a g <<<"$got"
        read -r -a w <<<"$want"
        if [ "${g[0]}" -gt "${w[0]}" ] || [ "${g[1]}" -gt "${w[1]}" ] || [ "${g[2]}" -gt "${w[2]}" ]; then
          echo "native: $kind sm_90: stack/spill-stores/spill-loads $got bytes, more than the $want of native/check-stack.sh (CUDA $release)" >&2
          failed=1
        else
          echo "native: $kind sm_90: stack/spill-stores/spill-loads $got bytes (limits $want)"
        fi ;;
    esac
  done <"$log"
  [ "$seen" -gt 0 ] || echo "native: stack check: no sm_90 decode kernels in $log (not checked)"
  return $failed
}
