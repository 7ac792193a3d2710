#!/usr/bin/env python3
"""A small real-speech test set for corvid's Whisper: synthetic speech of known sentences.

    python3 tests/oracle/make_speech_set.py [--out tests/data/speech]

Speaks each CLIPS sentence with espeak-ng (voice and rate per clip), converts it to 16 kHz mono
16-bit with sox, optionally mixes in seeded white noise at a given SNR (numpy), and writes it as
WAV (most), FLAC, Ogg Vorbis (sox) or Ogg Opus (opusenc). LONG_SENTENCES, spoken one by one
and joined with LONG_GAP seconds of silence, make long.opus (more than three minutes).
sentences.json records every file's reference text, how it was made, and its length.

Deterministic: espeak-ng and sox's rate conversion are (sox runs with -R, repeatable, and -D,
no dither), the noise comes from numpy.random.default_rng(seed), opusenc gets a fixed serial.
The sentences hold no digits or number words, so a transcript needs only a simple normaliser
(tests/oracle/make_speech_reference.py) before scoring.

Needs espeak-ng, sox (libsox-fmt-all for Vorbis), opus-tools (Debian: apt-get install -y
espeak-ng sox libsox-fmt-all opus-tools) and numpy. Tested with espeak-ng 1.51, SoX 14.4.2,
opus-tools 0.2 (libopus 1.3.1): another version may make different (equally valid) samples.
"""
import argparse
import json
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np

RATE = 16000

# (file, voice, espeak words per minute, SNR in dB or None for clean, sentence)
CLIPS = [
    ("c01_enus_s160.wav", "en-us", 160, None, "The small boat drifted slowly across the quiet lake."),
    ("c02_en_s140.wav", "en", 140, None, "Please close the window before the rain comes in."),
    ("c03_f3_s170.wav", "en+f3", 170, None, "She bought fresh bread and cheese at the market this morning."),
    ("c04_m3_s150.wav", "en+m3", 150, None, "The old clock in the hallway stopped working last winter. Nobody has found the time to repair it."),
    ("c05_enus_s190.wav", "en-us", 190, None, "A gentle breeze carried the smell of pine through the valley."),
    ("c06_enusf2_s130.wav", "en-us+f2", 130, None, "He forgot his umbrella on the train again, so he walked home in the rain."),
    ("c07_enus_s160_snr20.wav", "en-us", 160, 20, "The children laughed as the puppy chased its tail."),
    ("c08_f3_s150_snr20.wav", "en+f3", 150, 20, "We need to finish the report before the meeting starts."),
    ("c09_enus_s150_snr10.wav", "en-us", 150, 10, "Please remember to water the plants while we are away."),
    ("c10_f3_s140_snr10.wav", "en+f3", 140, 10, "My sister is learning to play the piano this year."),
    ("c11_en_s175.flac", "en", 175, None, "My brother likes to cook spicy food for his friends."),
    ("c12_enus_s150.ogg", "en-us", 150, None, "The museum has a large collection of ancient maps."),
    ("c13_f3_s160_snr20.opus", "en+f3", 160, 20, "Fresh snow covered the road and the cars moved carefully."),
]

LONG_FILE = "long.opus"
LONG_VOICE, LONG_SPEED, LONG_GAP = "en-us", 165, 0.6
LONG_SENTENCES = [
    "Early in the morning, Anna packed a small bag and left the house.",
    "The streets were still quiet, and the air smelled of rain.",
    "She walked to the station and bought a ticket to the coast.",
    "The train was almost empty, so she chose a seat by the window.",
    "Outside, green fields and little farms passed by in the pale light.",
    "A man across the aisle was reading a newspaper and drinking coffee.",
    "He smiled and asked her where she was going.",
    "She told him that she wanted to see the sea before the summer ended.",
    "He said that the town by the bay was lovely at this time of year.",
    "After a while, the train slowed down and stopped at a tiny village.",
    "A family with a dog climbed aboard and sat near the door.",
    "The dog looked at Anna with curious brown eyes.",
    "She reached out her hand, and the dog sniffed it politely.",
    "The children laughed and told her that his name was Biscuit.",
    "Soon the fields gave way to hills covered with dark trees.",
    "The sky cleared, and the sun began to warm the carriage.",
    "Anna opened her bag and took out an apple and a book.",
    "The book was about a sailor who sailed around the world.",
    "She read a few pages, but the view kept pulling her eyes away.",
    "At last she saw a thin silver line on the horizon.",
    "It was the sea, shining under the bright morning sky.",
    "The train arrived at the coast just before lunch.",
    "Anna stepped onto the platform and breathed the salty air.",
    "Gulls were calling loudly above the old stone pier.",
    "She followed a narrow street down towards the water.",
    "Small shops sold postcards, shells and bright kites.",
    "A baker was taking warm loaves out of his oven.",
    "She bought a roll filled with cheese and ate it on a bench.",
    "Fishing boats were resting in the bay, rocking gently on the waves.",
    "An old fisherman was mending a net with patient hands.",
    "Anna asked him whether the weather would stay fine.",
    "He looked at the clouds and said that a storm might come in the evening.",
    "She thanked him and walked along the beach towards the cliffs.",
    "The sand was soft and warm under her feet.",
    "Children were building castles and digging deep holes.",
    "A young couple was flying a red kite high above the water.",
    "Anna took off her shoes and let the cold waves wash over her toes.",
    "She climbed a path to the top of the cliffs and sat down on the grass.",
    "From there she could see the whole bay and the town behind it.",
    "The wind was stronger now, and the clouds were gathering in the west.",
    "She remembered the warning of the fisherman and decided to go back.",
    "On the way down she found a smooth white stone and put it in her pocket.",
    "The first drops of rain began to fall as she reached the pier.",
    "She hurried into a small restaurant and ordered a cup of hot tea.",
    "Through the window she watched the boats bobbing in the dark water.",
    "The storm passed quickly, and a rainbow appeared over the sea.",
    "In the late afternoon she walked slowly back to the station.",
    "On the train home she held the white stone in her hand.",
    "She felt tired but very happy after her long day by the sea.",
    "When she got home, she put the stone on her desk to remind her of the trip.",
]


def speak(text, voice, speed, tmp, name):
    """espeak-ng's speech of `text` as 16 kHz mono int16 samples."""
    raw = Path(tmp) / f"{name}.espeak.wav"
    conv = Path(tmp) / f"{name}.16k.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(raw), text], check=True)
    subprocess.run(["sox", "-R", "-D", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(conv)], check=True)
    return read_wav(conv)


def read_wav(path):
    with wave.open(str(path), "rb") as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").copy()


def write_wav(path, samples):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.astype("<i2").tobytes())


def add_noise(samples, snr_db, seed):
    """White Gaussian noise at `snr_db` below the clip's mean power (the whole clip, silences
    included), from a seeded generator; the sum is rounded and clipped to int16."""
    x = samples.astype(np.float64)
    p_signal = np.mean(x * x)
    noise = np.random.default_rng(seed).standard_normal(len(x)) * np.sqrt(p_signal / 10 ** (snr_db / 10))
    return np.clip(np.round(x + noise), -32768, 32767).astype(np.int16)


def encode(samples, out, tmp):
    """`samples` into `out`, in the container its suffix names."""
    suffix = out.suffix
    if suffix == ".wav":
        write_wav(out, samples)
        return
    src = Path(tmp) / (out.stem + ".src.wav")
    write_wav(src, samples)
    if suffix == ".flac":
        subprocess.run(["sox", "-R", "-D", str(src), "-C", "8", str(out)], check=True)
    elif suffix == ".ogg":  # Vorbis, quality 3, at 16 kHz
        subprocess.run(["sox", "-R", "-D", str(src), "-C", "3", str(out)], check=True)
    elif suffix == ".opus":  # Opus (its decoders give 48 kHz), 16 kbit/s VBR, speech tuning
        subprocess.run(["opusenc", "--quiet", "--serial", "1234", "--bitrate", "16", "--speech",
                        "--comp", "10", str(src), str(out)], check=True)
    else:
        raise ValueError(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "data" / "speech"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"text": {}, "clips": {}, "long": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, voice, speed, snr, text) in enumerate(CLIPS):
            samples = speak(text, voice, speed, tmp, Path(name).stem)
            if snr is not None:
                samples = add_noise(samples, snr, seed=1000 + i)
            encode(samples, out / name, tmp)
            manifest["text"][name] = text
            manifest["clips"][name] = {"voice": voice, "speed_wpm": speed, "snr_db": snr,
                                       "samples": len(samples), "seconds": round(len(samples) / RATE, 4),
                                       "format": Path(name).suffix[1:]}
        gap = np.zeros(int(LONG_GAP * RATE), dtype=np.int16)
        pieces, starts = [], []
        pos = 0
        for j, text in enumerate(LONG_SENTENCES):
            s = speak(text, LONG_VOICE, LONG_SPEED, tmp, f"long{j:02d}")
            starts.append(round(pos / RATE, 4))
            pieces += [s, gap]
            pos += len(s) + len(gap)
        samples = np.concatenate(pieces)
        encode(samples, out / LONG_FILE, tmp)
        manifest["text"][LONG_FILE] = " ".join(LONG_SENTENCES)
        manifest["long"] = {"file": LONG_FILE, "voice": LONG_VOICE, "speed_wpm": LONG_SPEED,
                            "gap_seconds": LONG_GAP, "samples": len(samples),
                            "seconds": round(len(samples) / RATE, 4),
                            "sentences": LONG_SENTENCES, "sentence_starts": starts}
    versions = {}
    for tool, cmd in (("espeak-ng", ["espeak-ng", "--version"]), ("sox", ["sox", "--version"]),
                      ("opusenc", ["opusenc", "--version"])):
        versions[tool] = subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0].split("  Data at")[0]
    manifest["versions"] = versions
    (out / "sentences.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(CLIPS)} clips and {LONG_FILE} ({manifest['long']['seconds']:.1f} s) in {out}")


if __name__ == "__main__":
    main()
