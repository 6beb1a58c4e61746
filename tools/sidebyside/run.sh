#!/usr/bin/env bash
# Side-by-side CPU benchmark on one synthetic checkpoint, one run after the
# other on the same machine: Talkbox f32 (the reference), Talkbox int8, and
# the official qwen-tts package on PyTorch CPU, all generating FRAMES frames.
# Prints three JSON lines (plus a thread-scaling pair for Talkbox int8).
# Talkbox's end-to-end figures are medians of 5 runs after a warm-up (one run
# on a shared VM swings by 15% or more).
#
#   tools/sidebyside/run.sh [SYNTH_DIR] [FRAMES]
#
# The official package goes into a throwaway venv ($VENV, default
# /tmp/talkbox-qwen-tts-venv) with CPU-only PyTorch; nothing here is used by
# the tests. Needs bin/talkbox (make build) and network access for pip once.
set -euo pipefail
cd "$(dirname "$0")/../.."
SYNTH=${1:-/tmp/synth06}
FRAMES=${2:-12}
VENV=${VENV:-/tmp/talkbox-qwen-tts-venv}
TOK=../shared/testdata/golden/checkpoints/qwen3-tts-tiny-customvoice
[ -x bin/talkbox ] || make build
[ -f "$SYNTH/model.safetensors" ] || bin/talkbox synth --size 0.6b --out "$SYNTH" --tokenizer-from "$TOK"

for p in f32 int8; do
	bin/talkbox bench --model "$SYNTH" --backend cpu --precision "$p" --frames 6 --runs 2 \
		--codec-frames 4 --e2e-frames "$FRAMES" --e2e-runs 5
done
for t in 1 2; do
	bin/talkbox bench --model "$SYNTH" --backend cpu --precision int8 --threads "$t" --frames 6 --runs 2 \
		--codec-frames 4 --e2e-frames "$FRAMES" --e2e-runs 5
done

if [ ! -x "$VENV/bin/python" ]; then
	python3 -m venv "$VENV"
	# PyTorch's CPU-only wheels when download.pytorch.org is reachable, else
	# PyPI's (CUDA libraries included, ~3 GB). torch 2.11 matches the newest
	# torchaudio (2.11), which qwen-tts imports: with a newer torch, importing
	# torchaudio fails its CUDA version check.
	"$VENV/bin/pip" install -q --index-url https://download.pytorch.org/whl/cpu torch==2.11.0 torchaudio==2.11.0 ||
		"$VENV/bin/pip" install -q torch==2.11.0 torchaudio==2.11.0
	"$VENV/bin/pip" install -q qwen-tts==0.1.1
fi
"$VENV/bin/python" tools/sidebyside/official_bench.py --model "$SYNTH" --frames "$FRAMES"
