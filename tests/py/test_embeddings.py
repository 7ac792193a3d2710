"""corvid serve --task embed: /v1/embeddings against the official openai client.

all-MiniLM-L6-v2's real weights (scripts/fetch-model.sh --model minilm; ./test.sh fetches them) against
sentence-transformers' embeddings, a tiny Matryoshka BERT for `dimensions`, and a decoder's last-token
embeddings against transformers (tests/oracle/make_embedding_oracle.py made every oracle)."""
import base64
import json
import math
import signal
import struct
import subprocess
import threading

import httpx
import openai
import pytest

from conftest import ROOT, corvid_bin, start_server

EMBEDDINGS = ROOT / "tests" / "fixtures" / "embeddings"
MINILM = ROOT / "models" / "all-MiniLM-L6-v2"
BERT_TINY = EMBEDDINGS / "bert_tiny"
LLAMA = ROOT / "tests" / "fixtures" / "llama"
KEY = "embed-key"


class EmbedServer:
    def __init__(self, model, *flags):
        self.proc, self.url, self.banner = start_server(
            ["-m", model, "--port", "0", "-t", "2", "--api-key", KEY, "--served-model-name", "emb", *flags], timeout=60)
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key=KEY, max_retries=0, timeout=60)

    def post(self, path, body):
        return httpx.post(self.url + path, json=body, headers={"Authorization": "Bearer " + KEY}, timeout=60)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=20)
        assert self.proc.returncode == 0, self.proc.stderr.read()


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def oracle(name):
    return json.loads((EMBEDDINGS / name).read_text())


@pytest.fixture(scope="module")
def minilm():
    if not (MINILM / "model.safetensors").exists():
        pytest.skip("all-MiniLM-L6-v2 not fetched (scripts/fetch-model.sh --model minilm)")
    s = EmbedServer(MINILM)  # --task auto: an encoder serves embeddings
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tiny():
    s = EmbedServer(BERT_TINY, "--task", "embed")
    yield s
    s.stop()


def test_minilm_equals_sentence_transformers(minilm):
    want = oracle("minilm.json")
    assert "384 dimensions, mean pooling, normalized, inputs up to 256 tokens" in minilm.banner
    # The SDK asks for base64 unless told otherwise, and decodes it; floats explicitly too.
    for fmt in [openai.NOT_GIVEN, "float"]:
        r = minilm.client.embeddings.create(model="emb", input=want["sentences"], encoding_format=fmt)
        assert [d.index for d in r.data] == list(range(len(want["sentences"])))
        for got, expected in zip(r.data, want["embeddings"]):
            assert len(got.embedding) == 384
            assert cosine(got.embedding, expected) >= 0.9999
            assert max(abs(x - y) for x, y in zip(got.embedding, expected)) <= 1e-4
        assert r.usage.prompt_tokens == sum(len(t) for t in want["token_ids"]) == r.usage.total_tokens
        assert r.model == "emb"


def test_minilm_inputs_as_token_ids_and_one_string(minilm):
    want = oracle("minilm.json")
    one = minilm.client.embeddings.create(model="emb", input=want["token_ids"][2])
    assert len(one.data) == 1 and cosine(one.data[0].embedding, want["embeddings"][2]) >= 0.9999
    many = minilm.client.embeddings.create(model="emb", input=want["token_ids"][:3])
    assert [cosine(d.embedding, e) >= 0.9999 for d, e in zip(many.data, want["embeddings"][:3])] == [True] * 3
    text = minilm.client.embeddings.create(model="emb", input=want["sentences"][0])
    assert cosine(text.data[0].embedding, want["embeddings"][0]) >= 0.9999


def test_base64_is_little_endian_float32(minilm):
    r = minilm.post("/v1/embeddings", {"model": "emb", "input": "hello", "encoding_format": "base64"})
    raw = base64.b64decode(r.json()["data"][0]["embedding"])
    floats = struct.unpack("<384f", raw)
    plain = minilm.post("/v1/embeddings", {"model": "emb", "input": "hello"}).json()["data"][0]["embedding"]
    assert list(floats) == pytest.approx(plain, abs=0)


def test_concurrent_requests_batch_to_the_same_vectors(minilm):
    want = oracle("minilm.json")
    alone = [minilm.client.embeddings.create(model="emb", input=s, encoding_format="float").data[0].embedding
             for s in want["sentences"]]
    got = [None] * len(alone)

    def worker(i):
        got[i] = minilm.client.embeddings.create(model="emb", input=want["sentences"][i],
                                                 encoding_format="float").data[0].embedding

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(alone))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == alone  # CPU: the same bits whatever an input is batched with


def error_of(server, body, status=400):
    r = server.post("/v1/embeddings", body)
    assert r.status_code == status, r.text
    return r.json()["error"]


def test_refusals_name_the_field(minilm):
    assert error_of(minilm, {"model": "emb", "input": "x", "truncate_prompt_tokens": 8})["message"].find(
        "truncate_prompt_tokens") >= 0
    assert error_of(minilm, {"model": "emb", "input": ""})["param"] == "input"
    assert error_of(minilm, {"model": "emb", "input": []})["param"] == "input"
    assert error_of(minilm, {"model": "emb", "input": [[]]})["param"] == "input"
    assert error_of(minilm, {"model": "emb", "input": [1, 99999999]})["param"] == "input"
    assert error_of(minilm, {"model": "emb", "input": [{"text": "x"}]})["param"] == "input"
    assert error_of(minilm, {"model": "emb"})["param"] == "input"
    assert error_of(minilm, {"model": "emb", "input": "x", "encoding_format": "int8"})["param"] == "encoding_format"
    # MiniLM was not trained to be shortened, so a shorter vector would be a worse one.
    assert error_of(minilm, {"model": "emb", "input": "x", "dimensions": 128})["param"] == "dimensions"
    assert error_of(minilm, {"model": "emb", "input": "x", "dimensions": 385})["param"] == "dimensions"
    assert len(minilm.post("/v1/embeddings", {"model": "emb", "input": "x", "dimensions": 384}).json()["data"][0][
        "embedding"]) == 384
    too_long = " ".join(["word"] * 300)  # more than sentence_bert_config.json's max_seq_length (256)
    assert "256" in error_of(minilm, {"model": "emb", "input": too_long})["message"]
    assert error_of(minilm, {"model": "other", "input": "x"}, 404)["code"] == "model_not_found"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=minilm.url + "/v1", api_key="wrong", max_retries=0).embeddings.create(
            model="emb", input="x")
    # An embeddings server does not generate.
    r = minilm.post("/v1/chat/completions", {"model": "emb", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400 and "--task embed" in r.json()["error"]["message"]
    assert minilm.client.models.list().data[0].id == "emb"
    # Nothing above hurt the server.
    assert len(minilm.client.embeddings.create(model="emb", input="still here").data[0].embedding) == 384


def test_matryoshka_dimensions(tiny):
    want = oracle("bert_tiny/oracle.json")
    full = tiny.client.embeddings.create(model="emb", input=want["sentences"][:4], encoding_format="float")
    for d, e in zip(full.data, want["embeddings"][:4]):
        assert cosine(d.embedding, e) >= 0.99999
    cut = tiny.client.embeddings.create(model="emb", input=want["sentences"][:4], dimensions=16,
                                        encoding_format="float")
    for short, long in zip(cut.data, full.data):
        assert len(short.embedding) == 16
        assert sum(x * x for x in short.embedding) == pytest.approx(1.0, abs=1e-6)
        norm = math.sqrt(sum(x * x for x in long.embedding[:16]))
        assert short.embedding == pytest.approx([x / norm for x in long.embedding[:16]], abs=1e-6)
    # Only the sizes the model lists (config.json matryoshka_dimensions: 8, 16, 32).
    assert "8, 16, 32" in error_of(tiny, {"model": "emb", "input": "x", "dimensions": 10})["message"]


def test_decoder_last_token_embeddings():
    want = oracle("llama_last_token.json")
    s = EmbedServer(LLAMA, "--task", "embed")
    try:
        assert "last-token pooling, normalized" in s.banner
        r = s.client.embeddings.create(model="emb", input=want["sentences"], encoding_format="float")
        for d, e in zip(r.data, want["embeddings"]):
            assert cosine(d.embedding, e) >= 0.99999
            assert max(abs(x - y) for x, y in zip(d.embedding, e)) <= 1e-4
        assert r.usage.prompt_tokens == sum(len(t) for t in want["token_ids"])
    finally:
        s.stop()


def test_encoder_cannot_generate():
    r = subprocess.run([corvid_bin(), "serve", "-m", str(BERT_TINY), "--task", "generate", "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "is an encoder" in r.stderr
    r = subprocess.run([corvid_bin(), "generate", "-m", str(BERT_TINY), "-p", "hi"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "an encoder gives embeddings" in r.stderr


def test_cli_embed():
    want = oracle("bert_tiny/oracle.json")
    r = subprocess.run([corvid_bin(), "embed", "-m", str(BERT_TINY), want["sentences"][0], want["sentences"][1]],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    vectors = json.loads(r.stdout)
    assert len(vectors) == 2
    for got, e in zip(vectors, want["embeddings"][:2]):
        assert cosine(got, e) >= 0.99999
