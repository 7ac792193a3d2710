#!/usr/bin/env python3
"""faster-whisper's word timestamps on tests/data/speech, the reference for corvid's word timing.

    python3 -m venv /tmp/fw && /tmp/fw/bin/pip install faster-whisper==1.2.1
    scripts/fetch-model.sh --model whisper-tiny.en   # and --model whisper-base for its entries
    /tmp/fw/bin/python tests/oracle/make_word_reference.py [--models models] [--data tests/data/speech]

Writes <data>/words_reference.json: per model found under --models, per setting (greedy and
beam 5, both with timestamp tokens), per short clip, faster-whisper's segments with
word_timestamps=True (language en, condition_on_previous_text=False, no VAD, temperature 0):
start, end, text, tokens and words (word as decoded, start, end, probability).
"""
import argparse
import json
from pathlib import Path

import faster_whisper
from faster_whisper import WhisperModel

ROOT = Path(__file__).resolve().parents[2]
MODELS = ["whisper-tiny.en", "whisper-base"]
COMMON = dict(temperature=0.0, condition_on_previous_text=False, vad_filter=False, language="en",
              without_timestamps=False, word_timestamps=True)
SETTINGS = {"greedy": dict(beam_size=1, **COMMON), "beam5": dict(beam_size=5, **COMMON)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=str(ROOT / "models"))
    ap.add_argument("--data", default=str(ROOT / "tests/data/speech"))
    args = ap.parse_args()
    data = Path(args.data)
    clips = sorted(p.name for p in data.iterdir() if p.name.startswith("c") and p.suffix != ".json")
    out = {"faster_whisper": faster_whisper.__version__, "settings": SETTINGS, "results": {}}
    for name in MODELS:
        path = Path(args.models) / name
        if not path.is_dir():
            print(f"skipping {name}: {path} is missing")
            continue
        model = WhisperModel(str(path), device="cpu", compute_type="float32", cpu_threads=2)
        per_setting = {}
        for sname, setting in SETTINGS.items():
            per_clip = {}
            for clip in clips:
                segments, _ = model.transcribe(str(data / clip), **setting)
                per_clip[clip] = [{"start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                                   "words": [[w.word, w.start, w.end, w.probability] for w in s.words]}
                                  for s in segments]
            per_setting[sname] = per_clip
            print(name, sname, "done")
        out["results"][name] = per_setting
    (data / "words_reference.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
