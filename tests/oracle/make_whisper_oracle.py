#!/usr/bin/env python3
"""A tiny random-weight Whisper and transformers' outputs of it, for corvid's Whisper tests.

    python3 tests/oracle/make_whisper_oracle.py [--out tests/data/whisper/tiny-random] [--seed 0]

Builds a WhisperForConditionalGeneration (CONFIG below, float32) from torch.manual_seed(SEED),
then redraws every parameter from a torch.Generator seeded with SEED, in sorted name order:
Linear / Conv1d / Embedding weights and all biases ~ 0.1*N(0,1), LayerNorm weight ~ 1 + 0.1*N,
LayerNorm bias ~ 0.1*N, except model.decoder.embed_positions ~ 1.0*N (see DECODER_POS_STD).
The one exception is model.encoder.embed_positions: transformers keeps
it as a frozen sinusoidal table (sinusoids() in modeling_whisper.py), and it is left as
transformers sets it. proj_out stays tied to model.decoder.embed_tokens (tie_word_embeddings).
The k_proj layers have no bias, as in every Whisper.

Writes, all raw little-endian (float32 .f32 / int32 .i32), row-major:
- model.safetensors, config.json, generation_config.json: save_pretrained of the model;
- input_features.f32 [80, 3000]: WhisperFeatureExtractor(feature_size=80) of
  tests/data/audio/speech_16k.wav (read with soundfile);
- encoder_out.f32 [1500, 64]: the encoder's last_hidden_state on it;
- decoder_logits.f32 [8, 512]: the logits of one teacher-forced, uncached decoder forward of
  TOKENS over encoder_out;
- greedy_tokens.i32 [40]: 40 steps of plain argmax from [decoder_start_token_id], one token a
  step with use_cache=True (no logits processors, no suppression, no stop at eos);
- input_features_short.f32 [80, 3000], encoder_out_short.f32 [1500, 64]: the same of the
  WAV's first 2.0 s (the feature extractor zero-pads it to 30 s);
- oracle.json: shapes, tokens, seed, versions, mean / max-abs of every float output, the
  smallest top1 - top2 logit gap of the greedy steps.

If that gap is below MIN_GAP the script stops with an error: rerun it with another --seed.

Needs Python's torch, transformers, safetensors, soundfile, numpy.
"""
import argparse
import inspect
import json
from pathlib import Path

import numpy as np
import safetensors
import soundfile as sf
import torch
import transformers
from safetensors import safe_open
from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

ROOT = Path(__file__).resolve().parents[2]
WAV = ROOT / "tests" / "data" / "audio" / "speech_16k.wav"
CONFIG = dict(
    vocab_size=512, d_model=64, encoder_layers=2, decoder_layers=2,
    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
    num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
    activation_function="gelu", scale_embedding=False,
    decoder_start_token_id=500, pad_token_id=501, eos_token_id=502, bos_token_id=502,
    dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
    encoder_layerdrop=0.0, decoder_layerdrop=0.0,
    # WhisperConfig's default is [220, 50256], ids past this vocabulary; nothing is suppressed here.
    begin_suppress_tokens=None,
)
TOKENS = [500, 17, 42, 99, 3, 250, 7, 480]
GREEDY_STEPS = 40
SHORT_SECONDS = 2.0
MIN_GAP = 1e-3
STD = 0.1
# The decoder's learned position table is drawn wider: at STD the token embedding, which proj_out
# shares, dominates the residual stream and greedy decoding repeats one token for ever, which
# would not tell a working KV cache (positions advancing) from a broken one.
DECODER_POS_STD = 1.0


def build(seed):
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(WhisperConfig(**CONFIG)).float().eval()
    gen = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())  # tied parameters appear once (proj_out is not listed)
    layernorms = {n for n, m in model.named_modules() if isinstance(m, torch.nn.LayerNorm)}
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            if name == "model.encoder.embed_positions.weight":
                continue  # the frozen sinusoidal table, as transformers made it
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            owner, _, kind = name.rpartition(".")
            if owner in layernorms and kind == "weight":
                p.copy_(1.0 + STD * noise)
            elif name == "model.decoder.embed_positions.weight":
                p.copy_(DECODER_POS_STD * noise)
            else:
                p.copy_(STD * noise)
    assert model.proj_out.weight is model.model.decoder.embed_tokens.weight, "proj_out is not tied"
    for i in range(CONFIG["encoder_layers"]):
        assert model.model.encoder.layers[i].self_attn.k_proj.bias is None
    return model


def features(fe, samples):
    out = fe(samples, sampling_rate=16000, return_tensors="np")["input_features"]
    assert out.shape == (1, 80, 3000) and out.dtype == np.float32, (out.shape, out.dtype)
    return out


def save(path, array, dtype):
    a = np.ascontiguousarray(array, dtype=dtype)
    a.tofile(path)
    return list(a.shape)


def stats(a):
    a = np.asarray(a, dtype=np.float64)
    return {"mean": float(a.mean()), "max_abs": float(np.abs(a).max())}


@torch.no_grad()
def greedy(model, enc_out, steps):
    """One token a step through the KV cache; returns ids, per-step top1-top2 gaps, logits."""
    ids, gaps, rows = [], [], []
    tok = CONFIG["decoder_start_token_id"]
    past = None
    for _ in range(steps):
        out = model(encoder_outputs=(enc_out,), decoder_input_ids=torch.tensor([[tok]]),
                    cache=past, use_cache=True)
        past = out.cache
        logits = out.logits[0, -1]
        top2 = torch.topk(logits, 2).values
        gaps.append(float(top2[0] - top2[1]))
        tok = int(torch.argmax(logits))
        ids.append(tok)
        rows.append(logits.numpy().copy())
    return ids, gaps, np.stack(rows)


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "whisper" / "tiny-random"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # one thread: the same sums on any machine

    model = build(args.seed)
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        model.save_pretrained(out, safe_serialization=True)
    else:  # transformers 5 writes safetensors only and dropped the argument
        model.save_pretrained(out)
    (out / "model.safetensors").chmod(0o644)  # written 0600 through a temporary file

    samples, rate = sf.read(WAV, dtype="float32")
    assert rate == 16000 and samples.ndim == 1
    fe = WhisperFeatureExtractor(feature_size=80)
    feats = features(fe, samples)
    feats_short = features(fe, samples[: int(SHORT_SECONDS * rate)])

    enc = model.model.encoder(torch.from_numpy(feats)).last_hidden_state  # [1, 1500, 64]
    enc_short = model.model.encoder(torch.from_numpy(feats_short)).last_hidden_state
    logits = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([TOKENS]),
                   use_cache=False).logits[0]  # [8, 512]
    ids, gaps, step_logits = greedy(model, enc, GREEDY_STEPS)
    min_gap = min(gaps)
    print("greedy:", ids)
    print(f"min top1-top2 gap over {GREEDY_STEPS} steps: {min_gap:.6g} (step {gaps.index(min_gap)})")
    if min_gap < MIN_GAP:
        raise SystemExit(f"seed {args.seed}: argmax gap {min_gap} < {MIN_GAP}; rerun with another --seed")

    # Checks: the cached steps agree with one uncached forward of the same sequence, and the
    # saved files load back to the same numbers.
    full = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([[CONFIG["decoder_start_token_id"]] + ids[:-1]]),
                 use_cache=False).logits[0].numpy()
    cache_vs_full = float(np.abs(full - step_logits).max())
    assert (full.argmax(-1) == np.array(ids)).all() and cache_vs_full < 1e-4, cache_vs_full
    reloaded = WhisperForConditionalGeneration.from_pretrained(out, dtype=torch.float32).eval()
    enc2 = reloaded.model.encoder(torch.from_numpy(feats)).last_hidden_state
    logits2 = reloaded(encoder_outputs=(enc2,), decoder_input_ids=torch.tensor([TOKENS]), use_cache=False).logits[0]
    assert torch.equal(enc, enc2) and torch.equal(logits, logits2), "reloaded model differs"

    shapes = {
        "input_features.f32": save(out / "input_features.f32", feats[0], "<f4"),
        "encoder_out.f32": save(out / "encoder_out.f32", enc[0].numpy(), "<f4"),
        "decoder_logits.f32": save(out / "decoder_logits.f32", logits.numpy(), "<f4"),
        "greedy_tokens.i32": save(out / "greedy_tokens.i32", ids, "<i4"),
        "input_features_short.f32": save(out / "input_features_short.f32", feats_short[0], "<f4"),
        "encoder_out_short.f32": save(out / "encoder_out_short.f32", enc_short[0].numpy(), "<f4"),
    }
    floats = {"input_features.f32": feats, "encoder_out.f32": enc.numpy(), "decoder_logits.f32": logits.numpy(),
              "input_features_short.f32": feats_short, "encoder_out_short.f32": enc_short.numpy()}
    with safe_open(out / "model.safetensors", "pt") as f:
        tensors = {k: list(f.get_slice(k).get_shape()) for k in sorted(f.keys())}
    meta = {
        "seed": args.seed,
        "init": {"std": STD, "decoder_embed_positions_std": DECODER_POS_STD, "layernorm_weight": "1 + std*N(0,1)", "other": "std*N(0,1)",
                 "kept": ["model.encoder.embed_positions.weight (sinusoids)"], "generator": "torch.Generator, sorted names"},
        "config": CONFIG,
        "wav": str(WAV.relative_to(ROOT)), "wav_samples": int(len(samples)),
        "short_samples": int(SHORT_SECONDS * rate),
        "attn_implementation": model.config._attn_implementation,
        "features_path": "torch" if transformers.is_torch_available() else "numpy",
        "shapes": shapes,
        "dtypes": {k: ("int32" if k.endswith(".i32") else "float32") for k in shapes},
        "decoder_tokens": TOKENS,
        "greedy": {"start": [CONFIG["decoder_start_token_id"]], "steps": GREEDY_STEPS, "tokens": ids,
                   "min_top1_top2_gap": min_gap, "gaps": gaps, "cache_vs_uncached_max_abs": cache_vs_full},
        "stats": {k: stats(v) for k, v in floats.items()},
        "safetensors": tensors,
        "proj_out_tied": "proj_out.weight" not in tensors,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "safetensors": safetensors.__version__, "numpy": np.__version__,
                     "soundfile": sf.__version__, "libsndfile": sf.__libsndfile_version__},
    }
    (out / "oracle.json").write_text(json.dumps(meta, indent=1) + "\n")
    for k, v in meta["stats"].items():
        print(f"{k}: mean {v['mean']:.6g} max_abs {v['max_abs']:.6g}")


if __name__ == "__main__":
    main()
