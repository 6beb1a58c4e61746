"""Times the official qwen-tts package on the CPU (PyTorch, float32) generating
a fixed number of frames from a checkpoint folder, and prints one JSON object.

Run by tools/sidebyside/run.sh inside a throwaway venv; not used by the tests.
The talker is forced to exactly --frames frames the way the golden cases were
made (eos_token_id set to a suppressed id, so generation never stops early;
max_new_tokens = frames + 1 because the last group-0 token gets no frame).
"""
import argparse
import json
import time

import torch
from qwen_tts import Qwen3TTSModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--runs", type=int, default=2, help="the first is a warm-up when > 1")
    ap.add_argument("--text", default="Talkbox reads this sentence aloud to measure how fast the first audio arrives.")
    ap.add_argument("--voice", default="")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model = Qwen3TTSModel.from_pretrained(args.model, device_map="cpu", dtype=torch.float32, attn_implementation="sdpa")
    load_s = time.perf_counter() - t0
    voice = args.voice
    if not voice:
        speakers = model.get_supported_speakers() or []
        voice = sorted(speakers)[0] if speakers else None
    cfg = model.model.config.talker_config
    suppressed_eos = cfg.vocab_size - 1  # inside the suppressed control range
    walls = []
    audio_s = 0.0
    for r in range(args.runs):
        t = time.perf_counter()
        wavs, sr = model.generate_custom_voice(
            text=args.text, speaker=voice, language="english",
            do_sample=False, subtalker_dosample=False, repetition_penalty=1.0,
            max_new_tokens=args.frames + 1, eos_token_id=suppressed_eos)
        wall = time.perf_counter() - t
        audio_s = len(wavs[0]) / sr
        if args.runs > 1 and r == 0:
            continue
        walls.append(wall)
    walls.sort()
    wall = walls[len(walls) // 2]
    print(json.dumps({
        "impl": "qwen-tts (official, PyTorch CPU float32, sdpa)",
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "frames": args.frames, "load_ms": round(load_s * 1000, 1),
        "wall_ms": round(wall * 1000, 1), "frame_ms": round(wall * 1000 / args.frames, 1),
        "audio_seconds": round(audio_s, 3), "rtf": round(wall / audio_s, 3) if audio_s else None,
        "ttfc_ms": round(wall * 1000, 1),  # no streaming: the first audio is the whole utterance
    }))


if __name__ == "__main__":
    main()
