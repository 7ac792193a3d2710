#!/usr/bin/env python3
"""transformers' Whisper on the GPU at a public checkpoint's shape (random weights), timed
as `corvid bench --dummy-shape` times corvid: the encoder on one 30-s window, and decoder
steps of B hypotheses through the KV cache (eager transformers, SDPA attention; what a
transformers user runs, not a tuned engine). faster-whisper / CTranslate2 would be the
stronger peer; it cannot be installed on the GPU machine.

    python3 bench/whisper_torch_peer.py --shape large-v3 --dtype float16 --beams 1 5
"""
import argparse
import time

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

SHAPES = {  # d_model, encoder/decoder layers, heads, mels, vocab
    "tiny": (384, 4, 4, 6, 80, 51864), "base": (512, 6, 6, 8, 80, 51865), "small": (768, 12, 12, 12, 80, 51865),
    "medium": (1024, 24, 24, 16, 80, 51865), "large-v3": (1280, 32, 32, 20, 128, 51866),
    "large-v3-turbo": (1280, 32, 4, 20, 128, 51866),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="large-v3", choices=SHAPES)
    ap.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    d, enc_layers, dec_layers, heads, mels, vocab = SHAPES[a.shape]
    cfg = WhisperConfig(d_model=d, encoder_layers=enc_layers, decoder_layers=dec_layers, encoder_attention_heads=heads,
                        decoder_attention_heads=heads, encoder_ffn_dim=4 * d, decoder_ffn_dim=4 * d, num_mel_bins=mels,
                        vocab_size=vocab, attn_implementation="sdpa")
    dtype = getattr(torch, a.dtype)
    model = WhisperForConditionalGeneration(cfg).to("cuda", dtype).eval()
    feats = torch.randn(1, mels, 3000, device="cuda", dtype=dtype) * 0.5
    sync = torch.cuda.synchronize
    with torch.inference_mode():
        enc_ms = []
        for r in range(a.reps + 1):
            sync(); t0 = time.perf_counter()
            enc = model.model.encoder(feats).last_hidden_state
            sync()
            if r: enc_ms.append((time.perf_counter() - t0) * 1e3)
        enc_t = sum(enc_ms) / len(enc_ms)
        print(f"torch {a.shape} {a.dtype}: encode {enc_t:.2f} ms per 30-s window")
        for beams in a.beams:
            step_ms = []
            for r in range(a.reps + 1):
                hidden = enc.expand(beams, -1, -1)
                ids = torch.full((beams, 4), 50258, device="cuda", dtype=torch.long)
                out = model(encoder_outputs=(hidden,), decoder_input_ids=ids, use_cache=True)
                past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
                sync(); t0 = time.perf_counter()
                for _ in range(a.steps):
                    out = model(encoder_outputs=(hidden,), decoder_input_ids=tok, past_key_values=past, use_cache=True)
                    past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
                sync()
                if r: step_ms.append((time.perf_counter() - t0) * 1e3 / a.steps)
            step = sum(step_ms) / len(step_ms)
            print(f"torch {a.shape} {a.dtype}: decode {step:.3f} ms per step of {beams} hypotheses "
                  f"({1000 * beams / step:.0f} tokens/s); rtf {(enc_t + 100 * step) / 30000:.4f}")


if __name__ == "__main__":
    main()
