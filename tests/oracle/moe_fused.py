#!/usr/bin/env python3
"""The qwen3_moe fixture with its experts stored as transformers 5 holds them in memory:
mlp.experts.gate_up_proj [E, 2I, H] (each expert's gate rows, then its up rows) and
mlp.experts.down_proj [E, H, I], instead of the per-expert tensors save_pretrained
writes. Same weights, so the same oracle; transformers reloads the file and must give
the same logits (checked here).

    python3 tests/oracle/moe_fused.py   # tests/fixtures/qwen3_moe -> tests/fixtures/qwen3_moe_fused
"""
import json
import re
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def main():
    src, dst = FIXTURES / "qwen3_moe", FIXTURES / "qwen3_moe_fused"
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, dst / f.name)
    w = load_file(str(src / "model.safetensors"))
    out, experts = {}, {}
    for name, t in w.items():
        m = re.match(r"(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$", name)
        if m:
            experts.setdefault(m.group(1), {})[(int(m.group(2)), m.group(3))] = t
        else:
            out[name] = t
    for prefix, parts in experts.items():
        n = 1 + max(e for e, _ in parts)
        out[prefix + ".gate_up_proj"] = torch.stack([torch.cat([parts[(e, "gate")], parts[(e, "up")]], 0)
                                                     for e in range(n)]).contiguous()
        out[prefix + ".down_proj"] = torch.stack([parts[(e, "down")] for e in range(n)]).contiguous()
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    oracle = json.loads((dst / "oracle.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(str(dst), attn_implementation="eager", dtype=torch.float32).eval()
    worst = 0.0
    with torch.no_grad():
        for p, ref in zip(oracle["prompts"], oracle["logits"]):
            worst = max(worst, (model(torch.tensor([p])).logits[0] - torch.tensor(ref)).abs().max().item())
    assert worst < 1e-4, worst  # float32 summation order only
    oracle["fixture"] = "qwen3_moe_fused"
    oracle["covers"] = ("qwen3_moe's weights with the experts as transformers 5 fuses them: experts.gate_up_proj "
                        "[E, 2I, H] and experts.down_proj [E, H, I] (made by tests/oracle/moe_fused.py; "
                        f"transformers reloads it within {worst:.1e} of the per-expert file)")
    (dst / "oracle.json").write_text(json.dumps(oracle))
    print(f"qwen3_moe_fused: {len(out)} tensors, reload max |diff| {worst:.2e}")


if __name__ == "__main__":
    main()
