"""docs/serving.md's examples and the engine-facing facts it states, as a user meets them: the
Embedding example run as written (a subprocess, only its port changed) and queried with the official
SDKs; the replay example's lines; an engine that ignores ``max_tokens``; the Messages defaults
(thinking on, ``max_tokens`` left out)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_support import EOS, MODEL, free_port, running, write_replay

import recipe
import recipe.serve
from recipe.serve.engines.base import EngineDelta

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

DOC = (Path(__file__).parent.parent / "docs" / "serving.md").read_text(encoding="utf-8")
TOK = recipe.load_tokenizer()


def _section(title: str) -> str:
    return DOC.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _section(section), re.S)


def test_the_embedding_example_runs_as_written(tmp_path):
    code = _blocks("Embedding", "python")[0]
    assert code.count("port=8000") == 1
    port = free_port()
    script = tmp_path / "embed.py"
    script.write_text(code.replace("port=8000", f"port={port}, log_level='error'"), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the example did not start"
            time.sleep(0.1)
        oai = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20)
        messages = [{"role": "user", "content": "Hi"}]
        c = oai.chat.completions.create(model=MODEL, messages=messages)  # thinking mode: the default
        assert c.choices[0].message.content == "Hello from my engine." and c.choices[0].finish_reason == "stop"
        assert c.choices[0].message.model_extra["reasoning_content"] == "A short thought."
        c = oai.chat.completions.create(model=MODEL, messages=messages, reasoning_effort="none", max_tokens=3)
        assert c.choices[0].finish_reason == "length" and c.usage.completion_tokens == 3
        assert c.choices[0].message.content == TOK.decode(TOK.encode_ordinary("Hello from my engine.")[:3])
        chunks = list(oai.chat.completions.create(model=MODEL, messages=messages, reasoning_effort="none", stream=True))
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "Hello from my engine."
        ant = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=20)
        m = ant.messages.create(model=MODEL, max_tokens=1024, messages=messages)
        assert [b.type for b in m.content] == ["thinking", "text"] and m.content[1].text == "Hello from my engine."
        assert m.stop_reason == "end_turn"
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_the_replay_examples_lines_finish_as_the_doc_says(tmp_path):
    lines = [json.loads(line) for line in _blocks("The replay engine", "json")[0].splitlines() if line.strip()]
    assert lines[2]["finish"] == "length"
    script = write_replay(tmp_path / "r.jsonl", [lines[2], {**lines[2], "ids": [19923, 3, 1]}])
    with running(recipe.serve.app(f"replay:{script}")) as s:
        got = []
        for _ in range(2):
            body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none"}
            choice = httpx.post(f"{s.url}/v1/chat/completions", json=body, timeout=20).json()["choices"][0]
            got.append((choice["message"]["content"], choice["finish_reason"]))
    assert got == [("Hello! How are", "length"), ("Hello!", "stop")]


async def _talkative(request: Any):  # yields 50 ids whatever max_tokens says, then finishes
    for _ in range(50):
        yield EngineDelta(TOK.encode_ordinary(" word"))
    yield EngineDelta(finish="stop")


def test_an_engine_past_max_tokens_is_not_cut():
    with running(recipe.serve.app(_talkative)) as s:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none", "max_tokens": 5}
        r = httpx.post(f"{s.url}/v1/chat/completions", json=body, timeout=20).json()
    assert r["choices"][0]["message"]["content"] == " word" * 50
    assert r["choices"][0]["finish_reason"] == "stop" and r["usage"]["completion_tokens"] == 50


def test_messages_defaults_thinking_on_and_max_tokens_left_out():
    seen: list[Any] = []

    async def engine(request: Any):
        seen.append(request)
        yield EngineDelta(TOK.encode_with_special_tokens("Hmm.</think>Hi." + EOS))

    with running(recipe.serve.app(engine)) as s:
        r = httpx.post(f"{s.url}/v1/messages", json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]},
                       timeout=20)
    assert r.status_code == 200
    assert [b["type"] for b in r.json()["content"]] == ["thinking", "text"]
    assert seen[0].max_tokens == 393216 == recipe.Options().thinking_max_tokens
    assert seen[0].token_ids[-1] == TOK.special_id("<think>")
