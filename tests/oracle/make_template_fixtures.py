#!/usr/bin/env python3
"""Render every conversation with every chat template through transformers' own code.

    python3 tests/oracle/make_template_fixtures.py [--out tests/fixtures/templates] [--only NAME,...]

Inputs: the templates and their special tokens in tests/data/chat-templates/ and the
conversations in template_conversations.py. Outputs: conversations.json (the inputs,
as the C++ test reads them) and one <template>.json per template with, per
conversation, either the rendered text ("text"; for big outputs only "length" and
"fnv1a64" of the UTF-8 bytes, to keep the fixtures small) or the error ("error":
{"kind", "message"}).

The reference is `PreTrainedTokenizerBase.apply_chat_template(..., tokenize=False)`
called on a stand-in tokenizer that has only a chat template and special tokens, so
every step is transformers' own: get_chat_template, dropping None-valued message keys,
the continue_final_message checks and trimming, the reasoning-field aliases, the
sandboxed jinja2 environment (trim_blocks, lstrip_blocks, loopcontrols, generation
tag, tojson with ensure_ascii=False, raise_exception, strftime_now). strftime_now is
pinned to PINNED_DATE so the fixtures are reproducible.

Error kinds: "raise" is the template's raise_exception(msg) (message must match);
"caller" is a ValueError transformers raises itself around the template (message
must match); "runtime" is anything else the template hits in Python (undefined
attribute, type error, ...): corvid must fail too, with its own message.

Needs transformers (5.x) and jinja2 >= 3.1.6.
"""
import argparse
import datetime as _dt
import json
import sys
import traceback
from pathlib import Path

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from template_conversations import CASES  # noqa: E402

TEMPLATES = ROOT / "tests" / "data" / "chat-templates"
PINNED_DATE = _dt.datetime(2026, 11, 30, 0, 0, 0)
# Outputs longer than this are stored as length + hash only (the fixture budget is a few MB).
MAX_STORED_CHARS = 20000


class _PinnedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return PINNED_DATE


ctu.datetime = _PinnedDatetime  # strftime_now reads chat_template_utils.datetime.now()


class TemplateOnlyTokenizer:
    """What apply_chat_template(tokenize=False) reads from a tokenizer, and nothing else."""

    def __init__(self, chat_template, special_tokens):
        self.chat_template = chat_template
        self.special_tokens_map = dict(special_tokens)

    get_chat_template = PreTrainedTokenizerBase.get_chat_template
    apply_chat_template = PreTrainedTokenizerBase.apply_chat_template


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def error_kind(exc):
    if type(exc) is jinja2.exceptions.TemplateError:
        return "raise"  # only raise_exception throws the base class itself
    if type(exc) is ValueError:
        frames = traceback.extract_tb(exc.__traceback__)
        last = frames[-1].filename if frames else ""
        if last.endswith(("tokenization_utils_base.py", "chat_template_utils.py")):
            return "caller"
    return "runtime"


def render(tok, case):
    return tok.apply_chat_template(
        json.loads(json.dumps(case["messages"])),  # a fresh copy: transformers edits messages in place
        tools=json.loads(json.dumps(case["tools"])) if "tools" in case else None,
        add_generation_prompt=case.get("add_generation_prompt", True),
        continue_final_message=case.get("continue_final_message", False),
        tokenize=False,
        **case.get("kwargs", {}),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "templates"))
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    (out / "conversations.json").write_text(json.dumps({"pinned_date": PINNED_DATE.strftime("%Y-%m-%d"), "cases": CASES},
                                                       ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    special = json.loads((TEMPLATES / "special_tokens.json").read_text(encoding="utf-8"))
    only = set(filter(None, args.only.split(",")))
    summary = {}
    for path in sorted(TEMPLATES.glob("*.jinja")):
        name = path.stem
        if only and name not in only:
            continue
        tok = TemplateOnlyTokenizer(path.read_text(encoding="utf-8"), special[name])
        results = {}
        counts = {"text": 0, "hashed": 0, "raise": 0, "caller": 0, "runtime": 0}
        for case in CASES:
            try:
                text = render(tok, case)
            except Exception as exc:  # noqa: BLE001 - every failure is recorded as data
                kind = error_kind(exc)
                counts[kind] += 1
                results[case["name"]] = {"error": {"kind": kind, "type": type(exc).__name__, "message": str(exc)}}
                continue
            if len(text) > MAX_STORED_CHARS:
                counts["hashed"] += 1
                data = text.encode("utf-8")
                results[case["name"]] = {"length": len(data), "fnv1a64": fnv1a64(data),
                                         "head": text[:300], "tail": text[-300:]}
            else:
                counts["text"] += 1
                results[case["name"]] = {"text": text}
        fixture = {"template": path.name, "special_tokens": special[name], "results": results}
        (out / f"{name}.json").write_text(json.dumps(fixture, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
        summary[name] = counts
        print(f"{name:55s} {counts}")
    (out / "versions.json").write_text(json.dumps({
        "transformers": transformers.__version__, "jinja2": jinja2.__version__,
        "python": sys.version.split()[0]}, indent=1) + "\n")


if __name__ == "__main__":
    main()
