"""What the *_gguf.py scripts share: a tiny fixture's byte-level BPE tokenizer as GGUF
metadata (tokenizer "gpt2"), and writing the file with the fixture's oracle beside it."""
import json
import shutil


def add_fixture_tokenizer(w, src):
    """The fixture's tokenizer.json and generation_config.json ids, as llama.cpp's gpt2 keys."""
    tok = json.loads((src / "tokenizer.json").read_text())
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    added = {a["id"] for a in tok.get("added_tokens", [])}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([3 if i in added else 1 for i in range(len(vocab))])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
    gen = json.loads((src / "generation_config.json").read_text())
    w.add_bos_token_id(gen["bos_token_id"])
    w.add_eos_token_id(gen["eos_token_id"])
    w.add_add_bos_token(False)


def finish(w, src, out, readme):
    """Writes the GGUF, copies src's oracle.json (same weights) and writes out/README.md."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shutil.copy(src / "oracle.json", out / "oracle.json")
    (out / "README.md").write_text(readme)
    print("wrote", out / "model.gguf")
