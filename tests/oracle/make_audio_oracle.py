#!/usr/bin/env python3
"""Real speech for corvid's audio tests and transformers' Whisper features of it.

    python3 tests/oracle/make_audio_oracle.py --out tests/data/audio

Speaks SENTENCE with espeak-ng (Debian), converts it to 16 kHz mono 16-bit with sox, writes
it as WAV, FLAC, Ogg Vorbis and MP3 (soundfile's libsndfile), and computes
WhisperFeatureExtractor's log-mel features of the WAV's samples at 80 and 128 mel bins:
- log_mel_n{80,128}.f32: the first FRAMES frames of the float64 (numpy) path, [n_mels, FRAMES]
  float32 little-endian; log_mel_n80_torch.f32 the same of the float32 (torch) path;
- mel_filters_n80.f64: the 80-bin filter bank, [80, 201] float64;
- log_mel_oracle.json: per size, the frames stored, the first frame after the speech
  (pad_from), that padding's column (every later frame is the same), the mean of all
  3000 frames; and the tool versions.

Needs espeak-ng, sox, and Python's numpy, soundfile, transformers.
"""
import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
from transformers import WhisperFeatureExtractor

SENTENCE = "The quick brown fox jumps over the lazy dog. Whisper turns speech into text."
FRAMES = 160


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "data" / "audio"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "espeak.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "160", "-w", str(raw), SENTENCE], check=True)
        subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(out / "speech_16k.wav")], check=True)
    samples, rate = sf.read(out / "speech_16k.wav", dtype="float32")
    assert rate == 16000
    sf.write(out / "speech_16k.flac", samples, rate, subtype="PCM_16")
    sf.write(out / "speech_16k.ogg", samples, rate, format="OGG", subtype="VORBIS")
    sf.write(out / "speech_16k.mp3", samples, rate, format="MP3", subtype="MPEG_LAYER_III")
    meta = {"sentence": SENTENCE, "seconds": len(samples) / rate,
            "versions": {"transformers": __import__("transformers").__version__, "numpy": np.__version__,
                         "libsndfile": sf.__libsndfile_version__}}
    padded = np.pad(samples, (0, 480000 - len(samples)))[None]
    for n_mels in (80, 128):
        fe = WhisperFeatureExtractor(feature_size=n_mels)
        # Two references that differ from each other: the numpy path computes in float64, the
        # torch path (what __call__ takes when torch is installed, and openai-whisper's way)
        # in float32.
        feats = fe._np_extract_fbank_features(padded, "cpu")[0]  # [n_mels, 3000]
        assert feats.shape == (n_mels, 3000)
        np.ascontiguousarray(feats[:, :FRAMES], dtype="<f4").tofile(out / f"log_mel_n{n_mels}.f32")
        torch_feats = fe._torch_extract_fbank_features(padded, "cpu")[0]
        if n_mels == 80:
            np.ascontiguousarray(torch_feats[:, :FRAMES], dtype="<f4").tofile(out / "log_mel_n80_torch.f32")
        pad_from = int(np.ceil((len(samples) + 200) / 160)) + 2  # frames wholly past the speech (and its reflection)
        meta[f"n{n_mels}"] = {"n_mels": n_mels, "frames": FRAMES, "pad_from": pad_from,
                              "pad_column": [float(v) for v in feats[:, pad_from]],
                              "mean": float(feats.astype(np.float64).mean()),
                              "numpy_vs_torch": float(np.abs(feats - torch_feats).max())}
        assert np.allclose(feats[:, pad_from:], feats[:, pad_from:pad_from + 1])
        if n_mels == 80:
            np.ascontiguousarray(fe.mel_filters.T, dtype="<f8").tofile(out / "mel_filters_n80.f64")  # [80, 201]
    (out / "log_mel_oracle.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(meta["seconds"], "s of speech")


if __name__ == "__main__":
    main()
