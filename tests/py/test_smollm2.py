"""The default model, SmolLM2-135M-Instruct (Q4_1 GGUF), through the CLI."""
import re

from conftest import run_corvid


def test_answers_a_question_sensibly(smollm2):
    r = run_corvid("generate", "-m", smollm2, "-p", "What is the capital of France? Answer in one sentence.", "-n", 40)
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert re.search(r"prompt: \d+ tokens, [\d.]+ tok/s \| decode: \d+ tokens, [\d.]+ tok/s", r.stderr)


def test_seed_reproduces_sampling(smollm2):
    args = ["generate", "-m", smollm2, "-p", "Tell me a story.", "-n", 24, "--temperature", 0.9,
            "--top-p", 0.95, "--seed", 1234, "--ids"]
    a, b = run_corvid(*args), run_corvid(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    c = run_corvid(*args[:-2], "--seed", 99, "--ids")
    assert c.stdout != a.stdout


def test_chat_answers_and_keeps_context(smollm2):
    r = run_corvid("chat", "-m", smollm2, "-n", 48,
                   input="What is the capital of France? Answer in one sentence.\nAnd what is its population?\n\n")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert r.stderr.count("decode:") == 2


def test_exact_matmul_reproduces_transformers_greedy(smollm2):
    # --matmul exact computes what transformers computes on the dequantized GGUF:
    # the oracle's 64-token greedy continuation must come back token for token.
    import json
    from conftest import ROOT
    oracle = json.loads((ROOT / "tests" / "fixtures" / "smollm2" / "oracle.json").read_text())
    text, want = oracle["prompt_texts"][0], oracle["greedy"][0]
    r = run_corvid("generate", "-m", smollm2, "-p", text, "--raw", "-n", len(want), "--ids", "--ignore-eos",
                   "--matmul", "exact", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == want


def test_generate_uses_the_models_own_chat_template(smollm2, tmp_path):
    # The prompt `generate` builds must be exactly what `corvid template` renders (the
    # transformers rendering, with SmolLM2's default system prompt): feeding that text raw
    # gives the same greedy tokens.
    import json
    question = "Name three colors."
    (tmp_path / "m.json").write_text(json.dumps([{"role": "user", "content": question}]))
    t = run_corvid("template", "-m", smollm2, "--messages", tmp_path / "m.json")
    assert t.returncode == 0, t.stderr
    assert t.stdout.startswith("<|im_start|>system\n") and t.stdout.endswith("<|im_start|>assistant\n")
    templated = run_corvid("generate", "-m", smollm2, "-p", question, "-n", 12, "--ids", "--device", "cpu")
    raw = run_corvid("generate", "-m", smollm2, "-p", t.stdout, "--raw", "-n", 12, "--ids", "--device", "cpu")
    assert templated.returncode == 0 and raw.returncode == 0, templated.stderr + raw.stderr
    assert templated.stdout == raw.stdout
    # Without a system message in the request, the template's default one is used, so a
    # different --system changes the prompt (and, here, the continuation's first tokens).
    other = run_corvid("generate", "-m", smollm2, "-p", question, "--system", "Answer in French.", "-n", 12,
                       "--ids", "--device", "cpu")
    assert other.returncode == 0, other.stderr
    assert other.stdout != templated.stdout


def test_kwargs_must_be_a_json_object(smollm2):
    r = run_corvid("generate", "-m", smollm2, "-p", "hi", "-n", 2, "--kwargs", "[1]")
    assert r.returncode != 0
    assert "--kwargs must be a JSON object" in r.stderr
