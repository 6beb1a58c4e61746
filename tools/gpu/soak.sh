#!/usr/bin/env bash
# One call on a GPU machine (the device tool): the soak of issue 29 on the
# synthetic 0.6B checkpoint with the CUDA backend: 1,000 utterances through
# one engine with random texts, voices, cancels and Stops racing the next
# Speak; $OUT/soak.json has RSS, goroutines and GPU memory at start and end.
#
# Prepared here and carried (as for tools/gpu/serveload.sh):
#   .devbin/soak.gz               go build -tags nogui,noblas,noopus -o bin/soak ./tools/soak && gzip -c bin/soak > .devbin/soak.gz
#   .devbin/talkbox-portable.gz   make cli-portable && gzip -c bin/talkbox-portable > .devbin/talkbox-portable.gz
#   .golden/                      the golden folder (its tiny checkpoint lends the synthetic one a tokenizer)
#   .devbin/lib/                  optional shared libraries the binaries need and the host lacks
# Knobs: N (1000 utterances), MAX_FRAMES (12 frames at most an utterance).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/soak}"
mkdir -p "$OUT" /tmp/devlogs
export TB_ARCHS="${TB_ARCHS:-90}"
N="${N:-1000}"
MAX_FRAMES="${MAX_FRAMES:-12}"
SYNTH=/tmp/s06
TB=/tmp/talkbox-portable
SOAK=/tmp/soak

nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee -a "$OUT/summary.txt"
# shellcheck source=prepare.sh
source tools/gpu/prepare.sh
gunzip -c .devbin/soak.gz > $SOAK && chmod +x $SOAK || { log "no .devbin/soak.gz"; exit 1; }
log "soak --backend cuda --n $N --max-frames $MAX_FRAMES"
timeout 540 $SOAK --model $SYNTH --backend cuda --n "$N" --max-frames "$MAX_FRAMES" > "$OUT/soak.json" 2> "$OUT/soak.log"
rc=$?
cat "$OUT/soak.json" | tee -a "$OUT/summary.txt"
tail -n 5 "$OUT/soak.log" >> "$OUT/summary.txt"
log "soak exit $rc"
exit $rc
