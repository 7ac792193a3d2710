import json
import os
import re
import struct
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
STORIES = ROOT / "tests" / "data" / "stories260K.gguf"


def corvid_bin():
    return os.environ.get("CORVID_BIN", str(ROOT / "build" / "corvid"))


def run_corvid(*args, input=None, timeout=600):
    """Runs the corvid binary; returns CompletedProcess with text output."""
    return subprocess.run([corvid_bin(), *map(str, args)], input=input, capture_output=True,
                          text=True, timeout=timeout)


def start_server(args, timeout):
    """Starts `corvid serve ARGS` on a free port; returns (process, base URL, the banner up to
    its "listening on" line). Fails the test when the server does not say where it listens."""
    proc = subprocess.Popen([corvid_bin(), "serve", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    url, banner = None, ""
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        banner += line
        m = re.search(r"listening on (http://\S+)/v1", line)
        if m:
            url = m.group(1)
            break
    assert url, "the server did not start: " + proc.stderr.read()
    return proc, url, banner


def write_safetensors(path, tensors, header_override=None, truncate_to=None):
    """Writes a safetensors file by hand: tensors = {name: (dtype, shape, bytes)}."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if header_override:
        header.update(header_override)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    blob = struct.pack("<Q", len(raw)) + raw + b"".join(blobs)
    if truncate_to is not None:
        blob = blob[:truncate_to]
    Path(path).write_bytes(blob)


@pytest.fixture
def smollm2():
    if not SMOLLM2.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch-model.sh)")
    return SMOLLM2
