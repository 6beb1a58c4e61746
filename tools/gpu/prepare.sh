#!/usr/bin/env bash
# Sourced by serveload.sh and soak.sh, in the repository root with OUT, TB
# (where the portable binary goes), SYNTH and TB_ARCHS set: defines log,
# puts the carried .devbin/lib on the library path, unpacks
# .devbin/talkbox-portable.gz to $TB, builds the native libraries unless a
# warm machine already has them, and writes the synthetic 0.6B checkpoint
# unless it is there. Exits the calling script on any failure.
log() { echo "== $(date +%T) $*" | tee -a "$OUT/summary.txt"; }

[ -d .devbin/lib ] && export LD_LIBRARY_PATH="$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gunzip -c .devbin/talkbox-portable.gz > "$TB" && chmod +x "$TB" || { log "no .devbin/talkbox-portable.gz"; exit 1; }
if [ ! -f native/build/libtalkbox_native.so ] || [ ! -f native/build/libtalkbox_codec.so ]; then
  log "build (TB_ARCHS=$TB_ARCHS)"
  bash native/build.sh > /tmp/devlogs/build.log 2>&1 & b1=$!
  bash native/codec/build.sh > /tmp/devlogs/build_codec.log 2>&1 & b2=$!
  wait $b1 && wait $b2 || { log "build failed"; tail -n 20 /tmp/devlogs/build*.log; exit 1; }
fi
export TALKBOX_NATIVE="$PWD/native/build"
if [ ! -f "$SYNTH/config.json" ]; then
  log "synthetic 0.6B checkpoint"
  timeout 120 "$TB" synth --size 0.6b --out "$SYNTH" --tokenizer-from .golden/checkpoints/qwen3-tts-tiny-customvoice \
    > /tmp/devlogs/synth.log 2>&1 || { log "synth failed"; tail /tmp/devlogs/synth.log; exit 1; }
fi
