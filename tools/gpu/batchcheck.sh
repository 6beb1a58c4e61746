#!/usr/bin/env bash
# One call on a GPU machine (the device tool) for the batched decode (issue
# 28): build, the CUDA tests (engine/cuda with the batched suite,
# engine/cudacodec with the pooled streams, and engine's concurrent-utterance
# test), then the batch tables of `talkbox bench --batch` (the LM, and the
# codec decoding B streams a launch) on synthetic 0.6B and 1.7B checkpoints
# and the end-to-end
# `--streams N` runs on 0.6B. JSON into $OUT: batch06.json, batch17.json,
# streamsN.json; $OUT/summary.txt has one line a figure.
#
# Prepared here and carried (as for tools/gpu/devcheck.sh):
#   .devbin/cuda.test.gz, .devbin/cudacodec.test.gz, .devbin/engine.test.gz
#       go test -c -tags noblas,noopus,nosonic -ldflags=-s\ -w ./engine/cuda (./engine/cudacodec, ./engine), gzipped
#   .devbin/talkbox-portable.gz, .devbin/lib/, .golden/ (devcheck.sh says how)
# Knobs: STREAMS ("16 64"), BATCH ("1,2,4,8,16,24,32,48,64"), SKIP_TESTS=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/batchcheck}"
mkdir -p "$OUT" /tmp/devlogs
export TB_ARCHS="${TB_ARCHS:-90}"
STREAMS="${STREAMS:-16 64}"
BATCH="${BATCH:-1,2,4,8,16,24,32,48,64}"
SYNTH=/tmp/s06
TB=/tmp/talkbox-portable
export TALKBOX_GOLDEN="$PWD/.golden"
for t in cuda cudacodec engine; do
  [ -f ".devbin/$t.test.gz" ] && gunzip -c ".devbin/$t.test.gz" > ".devbin/$t.test" && chmod +x ".devbin/$t.test"
done
# shellcheck source=prepare.sh
source tools/gpu/prepare.sh

if [ -z "${SKIP_TESTS:-}" ]; then
  log "engine/cuda tests"
  # With the synthetic checkpoint: the real-shape tests too (40 streams against alone).
  TALKBOX_CUDA_SYNTH="$SYNTH" timeout 240 .devbin/cuda.test -test.v -test.timeout 230s > /tmp/devlogs/test_cuda.log 2>&1
  log "cuda.test exit $?"
  grep -E "^(--- FAIL|FAIL|ok|PASS)|largest difference from alone|parted from alone" /tmp/devlogs/test_cuda.log | tee -a "$OUT/summary.txt"
  grep -E "^--- PASS: TestBatch" /tmp/devlogs/test_cuda.log | tee -a "$OUT/summary.txt"
  awk '/=== RUN   TestBatchSuite/,/=== RUN   TestBatchStreamsIndependent/' /tmp/devlogs/test_cuda.log |
    grep -E "lm.go|FAIL" | head -n 40 > "$OUT/batch_suite.txt"
  if [ -x .devbin/cudacodec.test ]; then
    (cd engine/cudacodec && timeout 240 ../../.devbin/cudacodec.test -test.v -test.timeout 230s > /tmp/devlogs/test_cudacodec.log 2>&1)
    log "cudacodec.test exit $?"
    grep -E "^(--- |ok|FAIL)|against alone" /tmp/devlogs/test_cudacodec.log | tee -a "$OUT/summary.txt"
  fi
  timeout 120 .devbin/engine.test -test.run 'TestConcurrentUtterancesOnGPU|TestSynthesizeMatchesGolden' -test.v \
    > /tmp/devlogs/test_engine.log 2>&1
  log "engine.test exit $?"
  grep -E "^(--- |ok|FAIL)" /tmp/devlogs/test_engine.log | tee -a "$OUT/summary.txt"
fi

# batch NAME CHECKPOINT: the --batch table (LM only) of one checkpoint.
batch() {
  log "bench --batch $BATCH on $2"
  timeout 300 "$TB" bench --model "$2" --backend cuda --frames 10 --codec-frames 30 --batch "$BATCH" \
    > "$OUT/$1.json" 2> "/tmp/devlogs/$1.err"
  log "exit $?"
  python3 - "$OUT/$1.json" <<'EOF' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no JSON:", e); sys.exit()
print("  single stream: frame %.3f ms, rtf %.4f" % (r["frame_ms"], r["rtf"]))
for b in r.get("batch", []):
    print("  B=%-2d step %.3f ms  rtf/stream %.4f  audio %.0f s/s  weights %.0f GB/s  ttfc p95 %.1f ms" %
          (b["streams"], b["step_ms"], b["rtf_per_stream"], b["audio_s_per_s"], b["weight_gb_per_s"], b["ttfc_lm_p95_ms"]))
for c in r.get("codec_batch", []):
    print("  codec B=%-2d x %d frames: launch %.3f ms  %.3f ms a stream-frame  audio %.0f s/s" %
          (c["streams"], c["frames_per_push"], c["median_push_ms"], c["median_ms_per_frame"], c["audio_s_per_s"]))
EOF
}
batch batch06 $SYNTH
if [ ! -f /tmp/s17/config.json ]; then
  timeout 120 "$TB" synth --size 1.7b --out /tmp/s17 --tokenizer-from .golden/checkpoints/qwen3-tts-tiny-customvoice \
    > /tmp/devlogs/synth17.log 2>&1 || log "1.7B synth failed"
fi
batch batch17 /tmp/s17

for n in $STREAMS; do
  log "bench --streams $n (end to end, 125 frames each)"
  timeout 240 "$TB" bench --model $SYNTH --backend cuda --frames 10 --codec-frames 0 --e2e-frames 125 --e2e-runs 2 \
    --streams "$n" > "$OUT/streams$n.json" 2> "/tmp/devlogs/streams$n.err"
  log "exit $?"
  python3 - "$OUT/streams$n.json" <<'EOF' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no JSON:", e); sys.exit()
e, s = r["e2e"], r["streams"]
rtf = sorted(s["rtf_per_stream"])
print("  alone: rtf %.4f ttfc p50 %.2f ms | %d at once: rtf median %.4f max %.4f, ttfc p95 %.1f ms" %
      (e["rtf"], e["ttfc_p50_ms"], s["streams"], rtf[len(rtf) // 2], s["max_rtf"], s["ttfc_p95_ms"]))
EOF
done
log "done"
