#!/usr/bin/env python3
"""faster-whisper's transcripts of tests/data/speech, the reference for corvid's Whisper.

    python3 -m venv /tmp/fw && /tmp/fw/bin/pip install faster-whisper jiwer
    scripts/fetch-model.sh --model whisper-tiny.en && scripts/fetch-model.sh --model whisper-base
    /tmp/fw/bin/python tests/oracle/make_speech_reference.py [--models models] [--data tests/data/speech]
    /tmp/fw/bin/python tests/oracle/make_speech_reference.py --no-rtf   # skip the timing runs

Writes <data>/reference.json:
- "prompt", per model: the decoder prompt faster-whisper builds for language en, task
  transcribe, with and without timestamps; its special token ids; the suppress_tokens it passes
  to CTranslate2 (suppress_tokens=[-1] expanded by faster_whisper's get_suppressed_tokens) beside
  config.json's suppress_ids / suppress_ids_begin; the other decoding defaults.
- "results", per model, per short clip, per SETTINGS entry: the transcript, its WER, every
  segment (start, end, text, tokens, avg_logprob, no_speech_prob, compression_ratio) and every
  30 s window's raw decoder call (the prompt and the generated ids, timestamps included).
- "aggregate": per model and setting, the corpus WER over the short clips (all word errors
  over all reference words) and the mean of the per-clip WERs.
- "long": per model, long.opus transcribed greedily with timestamps and
  condition_on_previous_text=True (faster-whisper's long-form way): segments, windows, WER.
- "rtf": processing seconds / audio seconds over long.opus (greedy, no timestamps), per model and
  compute type (int8, float32), cpu_threads=2, after one warm-up run, with the machine.

WER: both texts go through normalise() (lowercase; every character outside [a-z0-9' ] becomes a
space; runs of spaces collapse; ends stripped), then the word-level Levenshtein distance
(substitutions, deletions, insertions all cost 1) over the reference's word count.
"""
import argparse
import datetime
import json
import os
import platform
import re
import time
from pathlib import Path

import ctranslate2
import faster_whisper
from faster_whisper import WhisperModel
from faster_whisper.audio import decode_audio
from faster_whisper.tokenizer import Tokenizer
from faster_whisper.transcribe import get_suppressed_tokens

ROOT = Path(__file__).resolve().parents[2]
MODELS = ["whisper-tiny.en", "whisper-base"]
CPU_THREADS = 2

COMMON = dict(temperature=0.0, condition_on_previous_text=False, vad_filter=False, language="en")
SETTINGS = {
    "greedy_notimestamps": dict(beam_size=1, without_timestamps=True, **COMMON),
    "greedy_timestamps": dict(beam_size=1, without_timestamps=False, **COMMON),
    "beam5": dict(beam_size=5, without_timestamps=True, **COMMON),
}
LONG_SETTING = dict(beam_size=1, temperature=0.0, condition_on_previous_text=True,
                    without_timestamps=False, vad_filter=False, language="en")


def normalise(text):
    text = re.sub(r"[^a-z0-9' ]", " ", text.lower())
    return re.sub(r" +", " ", text).strip()


def word_errors(ref, hyp):
    """Word-level Levenshtein distance between normalise(ref) and normalise(hyp)."""
    r, h = normalise(ref).split(), normalise(hyp).split()
    prev = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        cur = [i] + [0] * len(h)
        for j, hw in enumerate(h, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (rw != hw))
        prev = cur
    return prev[-1], len(r)


class Recorder:
    """Wraps model.generate_with_fallback to keep every window's prompt and generated ids."""

    def __init__(self, model):
        self.windows = []
        inner = model.generate_with_fallback

        def wrapped(encoder_output, prompt, tokenizer, options):
            out = inner(encoder_output, prompt, tokenizer, options)
            result, avg_logprob, temperature, compression_ratio = out
            self.windows.append({"prompt": list(prompt), "tokens": list(result.sequences_ids[0]),
                                 "avg_logprob": avg_logprob, "no_speech_prob": result.no_speech_prob,
                                 "temperature": temperature, "compression_ratio": compression_ratio})
            return out

        model.generate_with_fallback = wrapped


def run(model, rec, path, ref, setting):
    rec.windows = []
    segments, info = model.transcribe(str(path), **setting)
    segs = [{"start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
             "avg_logprob": s.avg_logprob, "no_speech_prob": s.no_speech_prob,
             "compression_ratio": s.compression_ratio, "temperature": s.temperature}
            for s in segments]
    text = "".join(s["text"] for s in segs).strip()
    errs, n = word_errors(ref, text)
    return {"text": text, "normalised": normalise(text), "wer": errs / n, "word_errors": errs,
            "ref_words": n, "segments": segs, "windows": rec.windows,
            "duration": info.duration}


def prompt_info(model):
    tok = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language="en")
    cfg = json.loads((Path(model.model_path) / "config.json").read_text()) if hasattr(model, "model_path") else None
    with_ts = model.get_prompt(tok, [], without_timestamps=False)
    without_ts = model.get_prompt(tok, [], without_timestamps=True)
    suppress = list(get_suppressed_tokens(tok, [-1]))
    info = {
        "is_multilingual": model.model.is_multilingual,
        "sot_sequence": list(tok.sot_sequence),
        "prompt_with_timestamps": with_ts,
        "prompt_without_timestamps": without_ts,
        "prompt_pieces": [model.hf_tokenizer.id_to_token(t) for t in without_ts],
        "special": {"sot": tok.sot, "eot": tok.eot, "sot_prev": tok.sot_prev, "sot_lm": tok.sot_lm,
                    "no_timestamps": tok.no_timestamps, "timestamp_begin": tok.timestamp_begin,
                    "no_speech": tok.no_speech, "transcribe": tok.transcribe, "translate": tok.translate,
                    "en": model.hf_tokenizer.token_to_id("<|en|>")},
        "suppress_tokens": suppress,
        "non_speech_tokens": list(tok.non_speech_tokens),
        "decoding_defaults": {"suppress_blank": True, "max_initial_timestamp": 1.0,
                              "max_initial_timestamp_index": int(round(1.0 / model.time_precision)),
                              "time_precision": model.time_precision, "input_stride": model.input_stride,
                              "max_length": model.max_length, "patience": 1.0, "length_penalty": 1.0,
                              "repetition_penalty": 1.0, "no_repeat_ngram_size": 0,
                              "compression_ratio_threshold": 2.4, "log_prob_threshold": -1.0,
                              "no_speech_threshold": 0.6, "prompt_reset_on_temperature": 0.5,
                              "n_mels": model.model.n_mels},
    }
    if cfg is not None:
        info["config_suppress_ids"] = cfg["suppress_ids"]
        info["config_suppress_ids_begin"] = cfg["suppress_ids_begin"]
        info["suppress_tokens_vs_config"] = {
            "only_in_faster_whisper": sorted(set(suppress) - set(cfg["suppress_ids"])),
            "only_in_config": sorted(set(cfg["suppress_ids"]) - set(suppress))}
    return info


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def dumps(obj):
    """JSON with indent 1 but lists of numbers on one line (token ids stay readable)."""
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    return re.sub(r"\[\s+([-0-9.e, \n]+?)\s+\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=str(ROOT / "models"))
    ap.add_argument("--data", default=str(ROOT / "tests" / "data" / "speech"))
    ap.add_argument("--no-rtf", action="store_true")
    args = ap.parse_args()
    data = Path(args.data)
    manifest = json.loads((data / "sentences.json").read_text())
    long_file = manifest["long"]["file"]
    clips = [f for f in manifest["text"] if f != long_file]
    out = {"faster_whisper": faster_whisper.__version__, "ctranslate2": ctranslate2.__version__,
           "compute_type": "float32", "cpu_threads": CPU_THREADS, "settings": SETTINGS,
           "long_setting": LONG_SETTING,
           "normaliser": "lowercase; every char not in [a-z0-9' ] -> space; collapse spaces; strip",
           "audio": {}, "prompt": {}, "results": {}, "aggregate": {}, "long": {}}
    for f in manifest["text"]:
        samples = decode_audio(str(data / f), sampling_rate=16000)
        out["audio"][f] = {"samples_16k": int(len(samples)), "seconds": len(samples) / 16000}
    for name in MODELS:
        path = Path(args.models) / name
        model = WhisperModel(str(path), device="cpu", compute_type="float32", cpu_threads=CPU_THREADS)
        model.model_path = str(path)
        rec = Recorder(model)
        out["prompt"][name] = prompt_info(model)
        res = out["results"][name] = {}
        for f in clips:
            res[f] = {k: run(model, rec, data / f, manifest["text"][f], s) for k, s in SETTINGS.items()}
            print(name, f, {k: round(v["wer"], 3) for k, v in res[f].items()}, res[f]["greedy_notimestamps"]["text"])
        out["aggregate"][name] = {
            k: {"corpus_wer": sum(res[f][k]["word_errors"] for f in clips) / sum(res[f][k]["ref_words"] for f in clips),
                "mean_clip_wer": sum(res[f][k]["wer"] for f in clips) / len(clips)}
            for k in SETTINGS}
        print(name, "aggregate", out["aggregate"][name])
        out["long"][name] = run(model, rec, data / long_file, manifest["text"][long_file], LONG_SETTING)
        print(name, long_file, "wer", round(out["long"][name]["wer"], 4))
        del model
    if not args.no_rtf:
        seconds = out["audio"][long_file]["seconds"]
        setting = SETTINGS["greedy_notimestamps"]
        rtf = {"file": long_file, "audio_seconds": seconds, "setting": "greedy_notimestamps",
               "cpu_threads": CPU_THREADS, "nproc": os.cpu_count(), "cpu": cpu_model(),
               "date": datetime.date.today().isoformat(), "note": "one warm-up run, then one timed run "
               "(decoding the file, features, encoder and decoder: transcribe() drained)", "runs": {}}
        for name in MODELS:
            for ct in ("int8", "float32"):
                model = WhisperModel(str(Path(args.models) / name), device="cpu", compute_type=ct,
                                     cpu_threads=CPU_THREADS)
                for timed in (False, True):
                    t0 = time.perf_counter()
                    segments, _ = model.transcribe(str(data / long_file), **setting)
                    text = "".join(s.text for s in segments)
                    dt = time.perf_counter() - t0
                errs, n = word_errors(manifest["text"][long_file], text)
                rtf["runs"][f"{name}/{ct}"] = {"seconds": dt, "rtf": dt / seconds, "wer": errs / n}
                print(name, ct, "rtf", round(dt / seconds, 4))
                del model
        out["rtf"] = rtf
    elif (data / "reference.json").exists():
        old = json.loads((data / "reference.json").read_text())
        if "rtf" in old:
            out["rtf"] = old["rtf"]
    (data / "reference.json").write_text(dumps(out) + "\n")


if __name__ == "__main__":
    main()
