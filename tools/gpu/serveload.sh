#!/usr/bin/env bash
# One call on a GPU machine (the device tool): `talkbox serve` on the
# synthetic 0.6B checkpoint with the CUDA backend, and `talkbox loadtest` at
# 1, 8, 16 and 64 concurrent streams (issue 27). Each loadtest prints one
# JSON object into $OUT/loadtest_N.json; $OUT/summary.txt has the table.
#
# Prepared here and carried (as for tools/gpu/devcheck.sh):
#   .devbin/talkbox-portable.gz   make cli-portable && gzip -c bin/talkbox-portable > .devbin/talkbox-portable.gz
#   .golden/                      the golden folder (its tiny checkpoint lends the synthetic one a tokenizer)
#   .devbin/lib/                  optional shared libraries the binary needs and the host lacks
#                                 (`ldd bin/talkbox-portable`: libsoxr.so.0 since engine/audioin)
# Knobs: STREAMS ("1 8 16 64"), FRAMES (125 = 10 s of audio an utterance,
# as bench --e2e-frames), PER_STREAM (requests per stream, 2), MAX_STREAMS (64).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/serveload}"
mkdir -p "$OUT" /tmp/devlogs
export TB_ARCHS="${TB_ARCHS:-90}"
STREAMS="${STREAMS:-1 8 16 64}"
FRAMES="${FRAMES:-125}"
PER_STREAM="${PER_STREAM:-2}"
MAX_STREAMS="${MAX_STREAMS:-64}"
SYNTH=/tmp/s06
TB=/tmp/talkbox-portable
PORT=18000

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"
# shellcheck source=prepare.sh
source tools/gpu/prepare.sh

log "serve --backend cuda --max-streams $MAX_STREAMS"
$TB serve --model $SYNTH --backend cuda --listen 127.0.0.1:$PORT --max-streams "$MAX_STREAMS" --queue 64 \
  > "$OUT/serve.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT
for _ in $(seq 120); do  # up to a minute for the weights and the warm-up
  (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
  kill -0 $srv 2>/dev/null || { log "serve exited"; cat "$OUT/serve.log"; exit 1; }
  sleep 0.5
done
head -n 3 "$OUT/serve.log" | tee -a "$OUT/summary.txt"

for n in $STREAMS; do
  log "loadtest --streams $n --requests $((n * PER_STREAM)) --frames $FRAMES"
  timeout 300 $TB loadtest --url http://127.0.0.1:$PORT --streams "$n" --requests $((n * PER_STREAM)) \
    --frames "$FRAMES" --timeout 290s > "$OUT/loadtest_$n.json" 2>> "$OUT/summary.txt"
  python3 - "$OUT/loadtest_$n.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no JSON:", e); sys.exit()
print(f"  streams={r['streams']} ok={r['ok']} errors={r['errors']} rejected={r['rejected']} "
      f"ttfc_ms p50={r['ttfc_ms']['p50']} p95={r['ttfc_ms']['p95']} rtf p50={r['rtf']['p50']} p95={r['rtf']['p95']} "
      f"audio_s_per_s={r['audio_seconds_per_second']}")
PY
done
log "done"
