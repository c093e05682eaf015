"""The README's Python snippet runs as written, in a fresh interpreter, and prints what its comments say."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert blocks, "README has a Python snippet"
    return blocks[0]


def test_readme_python_snippet_runs_as_written(tmp_path):
    script = tmp_path / "snippet.py"
    script.write_text(_snippet(), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    first = out.splitlines()[0]
    ids = json.loads(first)
    assert ids[0] == 0 and ids[-4:] == [128803, 23166, 128804, 128821]  # the comment's ids
    assert "<｜User｜>Hi<｜Assistant｜><think>" in out
    frames = [line[6:] for line in out.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "Hello! How can I help?"
    assert "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks) == "The user greets me."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "{'role': 'assistant', 'content': 'Hello! How can I help?', 'reasoning_content': 'The user greets me.'}" in out
    assert "'param': 'model'" in out and "'type': 'invalid_request_error'" in out
