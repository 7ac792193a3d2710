#!/usr/bin/env python3
"""Embedding oracles for corvid's /v1/embeddings and `corvid embed`.

    python3 tests/oracle/make_embedding_oracle.py --out tests/fixtures/embeddings \
        [--minilm models/all-MiniLM-L6-v2]

Writes, under --out:
- bert_tiny/: a tiny random-weight BertModel (2 layers, hidden 32, a WordPiece
  vocabulary trained on corpus.txt) in sentence-transformers' layout (mean pooling,
  Normalize; config.json names matryoshka_dimensions), and oracle.json with
  sentence-transformers' embeddings of SENTENCES and transformers' last_hidden_state
  of the first one;
- llama_last_token.json: transformers' last_hidden_state at the last token,
  L2-normalised, of tests/fixtures/llama for SENTENCES (a decoder with --task embed);
- minilm.json (with --minilm, the folder scripts/fetch-model.sh --model minilm
  makes): sentence-transformers' embeddings of all-MiniLM-L6-v2 for SENTENCES.

Needs torch, transformers, sentence-transformers, tokenizers, safetensors (CPU, float32).
"""
import argparse
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A crow flew over the old stone bridge.",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "Embeddings map text to vectors; similar texts land close together.",
    "Café au lait, s'il vous plaît! Zürich, naïve, résumé.",
    "def add(a, b):\n    return a + b",
    "    leading spaces and\ttabs\tand\nnewlines   ",
    "Numbers: 3.14159, 2,718 and 1e-9; dates 2026-12-03.",
    "UNCASED MODELS LOWERCASE THEIR INPUT",
    "日本語のテキストも埋め込みます。",
    "x",
    ("Every morning the crow flew over the river, the market and the old stone bridge, looking for shiny "
     "things. The quick brown fox jumps over the lazy dog again and again, while the baker sells warm "
     "bread to the early risers and the fishermen mend their nets by the harbour wall."),
]


def round_list(values, digits=7):
    return [float(f"{v:.{digits}g}") for v in values]


def make_bert_tiny(out):
    import torch
    from safetensors.torch import save_file
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
    from tokenizers.models import WordPiece
    from transformers import BertConfig, BertModel, BertTokenizerFast

    d = out / "bert_tiny"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    tok = Tokenizer(WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    corpus = (HERE / "corpus.txt").read_text(encoding="utf-8").splitlines() + SENTENCES
    tok.train_from_iterator(corpus, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.save(str(d / "tokenizer.json"))
    fast = BertTokenizerFast(tokenizer_file=str(d / "tokenizer.json"), do_lower_case=True)
    fast.save_pretrained(str(d))

    torch.manual_seed(20261203)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128, type_vocab_size=2, layer_norm_eps=1e-12,
                        hidden_act="gelu")
    model = BertModel(config).eval()
    with torch.no_grad():  # larger than the init's 0.02, so that the layers matter
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("weight") else 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.2)
    model.save_pretrained(str(d), safe_serialization=True)
    cfg = json.loads((d / "config.json").read_text())
    cfg["matryoshka_dimensions"] = [8, 16, 32]
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (d / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], indent=2) + "\n")
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, indent=2) + "\n")
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}) + "\n")

    st = SentenceTransformer(str(d), device="cpu")
    emb = st.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=False, batch_size=4)
    enc = fast(SENTENCES[0], return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state[0]
    ids = [fast(s)["input_ids"] for s in SENTENCES]
    oracle = {"sentences": SENTENCES, "token_ids": ids,
              "embeddings": [round_list(e.tolist()) for e in emb],
              "hidden_first": [round_list(r.tolist()) for r in hidden],
              "note": "sentence-transformers (mean pooling, Normalize) and transformers BertModel, float32 CPU"}
    (d / "oracle.json").write_text(json.dumps(oracle) + "\n")
    for junk in ["vocab.txt"]:
        (d / junk).unlink(missing_ok=True)
    print("bert_tiny:", emb.shape)


def make_llama_last_token(out):
    import torch
    from transformers import AutoModel, AutoTokenizer

    src = ROOT / "tests" / "fixtures" / "llama"
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    model = AutoModel.from_pretrained(str(src), torch_dtype=torch.float32, attn_implementation="eager").eval()
    rows, ids_all = [], []
    for s in SENTENCES:
        ids = tokenizer(s, add_special_tokens=True)["input_ids"]
        with torch.no_grad():
            h = model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        rows.append(round_list(torch.nn.functional.normalize(h, dim=0).tolist()))
        ids_all.append(ids)
    (out / "llama_last_token.json").write_text(json.dumps({
        "sentences": SENTENCES, "token_ids": ids_all, "embeddings": rows,
        "note": "transformers LlamaModel last_hidden_state (after the final norm) at the last token, L2-normalised"})
        + "\n")
    print("llama last-token:", len(rows))


def make_minilm(out, folder):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")
    emb = st.encode(SENTENCES, convert_to_numpy=True, batch_size=4)
    ids = [st.tokenizer(s)["input_ids"] for s in SENTENCES]
    (out / "minilm.json").write_text(json.dumps({
        "sentences": SENTENCES, "token_ids": ids, "embeddings": [round_list(e.tolist()) for e in emb],
        "note": "sentence-transformers all-MiniLM-L6-v2 (mean pooling, Normalize), float32 CPU"}) + "\n")
    print("minilm:", emb.shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "embeddings"))
    ap.add_argument("--minilm", help="the all-MiniLM-L6-v2 folder (scripts/fetch-model.sh --model minilm)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    make_bert_tiny(out)
    make_llama_last_token(out)
    if args.minilm:
        make_minilm(out, Path(args.minilm))


if __name__ == "__main__":
    main()
