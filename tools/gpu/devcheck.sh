#!/usr/bin/env bash
# One call on a GPU machine (a maintainer's tool, not part of the product):
# build the native libraries, run the CUDA tests and time the engine, each
# stage under a time limit so a hang costs one stage, not the call.
# Everything it prints also goes to $OUT. Run from anywhere:
#   bash tools/gpu/devcheck.sh
#
# Prepared on the build machine (x86-64, cgo) and carried:
#   .devbin/cuda.test, .devbin/cudacodec.test   go test -c -tags noblas ./engine/cuda (./engine/cudacodec)
#   .devbin/talkbox-portable.gz                 make cli-portable, gzipped (the carry limit is 64 MiB)
#   .devbin/variants/NAME/{src,include}/        optional other kernel sources to build and time (A/B)
#   .golden/                                    the golden files the CUDA tests read
#   .devbin/lib/                                optional shared libraries the binary needs and the host
#                                               lacks (`ldd bin/talkbox-portable`: libsoxr.so.0)
# Prepare them with:
#   mkdir -p .devbin && go test -c -tags noblas -o .devbin/cuda.test ./engine/cuda &&
#   go test -c -tags noblas -o .devbin/cudacodec.test ./engine/cudacodec &&
#   make cli-portable && gzip -c bin/talkbox-portable > .devbin/talkbox-portable.gz &&
#   cp -r ../shared/testdata/golden .golden
# Stages (STAGES, space-separated): build bench test prof flags variants e2e sweep ncu
#   TB_ARCHS (default 90) and TB_DEFS pass through to native/build.sh.
#   VARIANTS="name:-DTB_X=1 other:-DTB_Y=2" builds this tree with those
#   defines as more variants (defines joined by commas: name:-DA=1,-DB=2).
# $OUT keeps few files (the device tool returns at most 8): summary.txt,
# test_cuda.log, bench_new.json, bench_e2e.json and bench_all.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/devcheck}"
mkdir -p "$OUT" /tmp/devlogs
STAGES="${STAGES:-build bench test}"
export TB_ARCHS="${TB_ARCHS:-90}"
BENCH_ARGS="${BENCH_ARGS:---frames 10 --codec-frames 0}"
E2E_ARGS="${E2E_ARGS:---frames 10 --codec-frames 50 --e2e-frames 125 --e2e-runs 10 --streams 8}"
SYNTH=/tmp/s06
TB=/tmp/talkbox-portable
export TALKBOX_GOLDEN="$PWD/.golden"
log() { echo "== $(date +%T) $*" | tee -a "$OUT/summary.txt"; }
# The variants of this call (a warm machine still holds earlier calls' builds).
variants=()
for v in ${VARIANTS:-}; do variants+=("${v%%:*}"); done
if [[ " $STAGES " == *" variants "* ]]; then
  for v in .devbin/variants/*/; do [ -d "$v" ] && variants+=("$(basename "$v")"); done
fi
has() { [[ " $STAGES " == *" $1 "* ]]; }

# bench NAME LIBDIR ARGS...: one `talkbox bench` JSON with the library in LIBDIR.
bench() {
  local name=$1 dir=$2
  shift 2
  log "bench $name $*"
  TALKBOX_NATIVE=$dir timeout "${BENCH_TIMEOUT:-120}" $TB bench --model $SYNTH --backend cuda "$@" \
    > "/tmp/devlogs/bench_$name.json" 2> "/tmp/devlogs/bench_$name.err"
  log "bench $name exit $?"
  grep "^prof" "/tmp/devlogs/bench_$name.err" | head -n 40
  { echo "### $name $*"; cat "/tmp/devlogs/bench_$name.err" "/tmp/devlogs/bench_$name.json"; } >> "$OUT/bench_all.log"
  case $name in new | e2e) cp "/tmp/devlogs/bench_$name.json" "$OUT/" ;; esac
  python3 - "/tmp/devlogs/bench_$name.json" <<'EOF' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no JSON:", e); sys.exit()
keys = ["talker_step_ms", "predictor_step_ms", "frame_ms", "frame_greedy_ms", "prefill_ms", "rtf"]
print("  " + "  ".join(f"{k}={r[k]:.4g}" for k in keys if k in r))
if "e2e" in r:
    e = r["e2e"]
    print("  e2e " + "  ".join(f"{k}={e[k]:.4g}" for k in e if isinstance(e[k], (int, float))))
if "codec_gpu" in r:
    print("  codec_gpu median_push_ms=%.4g" % r["codec_gpu"]["median_push_ms"])
if "streams" in r:
    s = r["streams"]; print("  streams max_rtf=%.4g rtf=%s" % (s["max_rtf"], [round(x, 3) for x in s["rtf_per_stream"]]))
EOF
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv |
  tee -a "$OUT/summary.txt"
[ -d .devbin/lib ] && export LD_LIBRARY_PATH="$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -f .devbin/talkbox-portable.gz ]; then  # always: a warm machine keeps the last one
  gunzip -c .devbin/talkbox-portable.gz > $TB && chmod +x $TB
fi

if has build; then
  log "build (TB_ARCHS=$TB_ARCHS)"
  pids=()
  L=/tmp/devlogs
  bash native/build.sh > $L/build.log 2>&1 & pids+=($!)
  bash native/codec/build.sh > $L/build_codec.log 2>&1 & pids+=($!)
  if has prof; then
    TB_STACK_CHECK=0 TB_DEFS="-DTB_PROF=1" TB_OUT=/tmp/tbv/prof/libtalkbox_native.so bash native/build.sh > $L/build_prof.log 2>&1 & pids+=($!)
  fi
  for v in ${VARIANTS:-}; do
    name=${v%%:*}
    TB_STACK_CHECK=0 TB_DEFS="$(tr , ' ' <<<"${v#*:}")" TB_OUT="/tmp/tbv/$name/libtalkbox_native.so" bash native/build.sh \
      > "$L/build_$name.log" 2>&1 & pids+=($!)
  done
  if has variants; then
    for v in .devbin/variants/*/; do
      [ -d "$v" ] || continue
      name=$(basename "$v")
      # A variant is a whole source tree (src/, include/) built the same way.
      mkdir -p "/tmp/tbv/$name" && cp -r "$v"/* "/tmp/tbv/$name/"
      cp native/build.sh native/nvcc-targets.sh native/check-stack.sh "/tmp/tbv/$name/"
      TB_STACK_CHECK=0 TB_OUT="/tmp/tbv/$name/libtalkbox_native.so" bash "/tmp/tbv/$name/build.sh" > "$L/build_$name.log" 2>&1 & pids+=($!)
    done
  fi
  for p in "${pids[@]}"; do wait "$p" || log "a build failed (see build*.log)"; done
  tail -n 5 $L/build*.log | tee -a "$OUT/summary.txt"
  ls -la native/build/ /tmp/tbv/*/ 2>/dev/null | grep "\.so" | tee -a "$OUT/summary.txt"
fi

if [ ! -f $SYNTH/config.json ]; then
  log "synthetic 0.6B checkpoint"
  timeout 120 $TB synth --size 0.6b --out $SYNTH --tokenizer-from .golden/checkpoints/qwen3-tts-tiny-customvoice \
    > /tmp/devlogs/synth.log 2>&1 || log "synth failed"
fi

# First a short bench: a hang shows here, in two minutes, not in the tests.
if has bench; then bench new "$PWD/native/build" $BENCH_ARGS; fi

if has test; then
  log "engine/cuda tests (golden, real shapes)"
  TALKBOX_CUDA_SYNTH=$SYNTH timeout 240 .devbin/cuda.test -test.v -test.timeout 230s > "$OUT/test_cuda.log" 2>&1
  log "cuda.test exit $?"
  grep -E "^ *(--- |PASS|FAIL|ok)|cos|diff|max|divergence" "$OUT/test_cuda.log" | tail -n 70
  if [ -x .devbin/cudacodec.test ]; then
    timeout 120 .devbin/cudacodec.test -test.v -test.timeout 110s > /tmp/devlogs/test_codec.log 2>&1
    log "cudacodec.test exit $?"
    grep -E "^(--- |PASS|FAIL|ok)" /tmp/devlogs/test_codec.log | tail -n 20 | tee -a "$OUT/summary.txt"
  fi
fi

if has prof; then bench prof /tmp/tbv/prof $BENCH_ARGS; fi
# FLAGSETS="name:--flag=v,--other=w ...": the default build benched with
# other create-time parameters (`talkbox bench --fused-max-len N`,
# `--prefill passes`: tb_params in native/include/talkbox_native.h).
if has flags; then
  for v in ${FLAGSETS:-}; do
    # shellcheck disable=SC2046
    bench "flags_${v%%:*}" "$PWD/native/build" $BENCH_ARGS $(tr , ' ' <<<"${v#*:}")
  done
fi
for name in ${variants[@]+"${variants[@]}"}; do bench "$name" "/tmp/tbv/$name" $BENCH_ARGS; done
if has e2e; then BENCH_TIMEOUT=300 bench e2e "$PWD/native/build" $E2E_ARGS; fi
# Talker context sweep: decode_kernel<true> (attention fused with O) against
# <false> at growing prompts (each bench's frames run from there 120 positions
# on); picks FUSED_MAX_LEN in native/src/engine.cu.
if has sweep; then
  log "context sweep (--fused-max-len -1 = five phases, 100000 = fused)"
  # SWEEP_LIBS: library folders to sweep (default: this tree's build).
  for lib in ${SWEEP_LIBS:-$PWD/native/build}; do
    for rows in ${SWEEP_ROWS:-40 128 256 512 1024}; do
      for ml in -1 100000; do
        TALKBOX_NATIVE=$lib timeout 120 $TB bench --model $SYNTH --backend cuda --fused-max-len $ml \
          --frames 10 --codec-frames 0 --prompt-rows "$rows" 2>/dev/null |
          python3 -c "import json,sys; r=json.load(sys.stdin); print('$(basename "$(dirname "$lib")")/$(basename "$lib") rows=$rows fused_max_len=$ml talker=%.4f predictor=%.4f frame=%.4f greedy=%.4f prefill=%.3f' % (r['talker_step_ms'], r['predictor_step_ms'], r['frame_ms'], r['frame_greedy_ms'], r['prefill_ms']))" |
          tee -a "$OUT/summary.txt"
      done
    done
  done
fi
# Nsight Compute on one decode launch: stall reasons and throughput. The bench's
# decode launches come 40 of a kind (warm-up included): talker steps 0-39,
# predictor steps 40-79, frames 80-119 (NCU_SKIP=100: a frame), greedy frames
# after. NCU_ARGS adds metrics (--metrics ...), NCU_LIB another library,
# NCU_TIMEOUT the stage's limit in seconds.
if has ncu; then
  log "ncu"
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  TALKBOX_NATIVE=${NCU_LIB:-$PWD/native/build} timeout "${NCU_TIMEOUT:-400}" "$NCU" --clock-control none -k regex:decode_kernel \
    --launch-skip "${NCU_SKIP:-60}" --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section LaunchStats ${NCU_ARGS:-} \
    $TB bench --model $SYNTH --backend cuda --frames 2 --codec-frames 0 > "$OUT/ncu.txt" 2>&1
  log "ncu exit $?"
fi
log "done"
