"""A Responses stream from the server: deltas go out as ``push_sse`` frames, yet every byte is what
the payload path gives (``sse(push())`` with ``previous_response_id`` and ``store`` set on the
lifecycle objects), in any chunking, to the end or to an engine failure mid-stream (the
``response.failed`` event's sequence number and finished output items), and the stored turn is the
completed response.
"""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

import orjson
import pytest
from output_parity_support import ids_of, split_at

from recipe.output.driver import CompletionStream
from recipe.pipeline import prepare
from recipe.serve.config import Timeouts
from recipe.serve.engines.base import EngineDelta, EngineError
from recipe.serve.errors import from_engine_error, stream_error
from recipe.serve.generation import Job, run
from recipe.serve.metrics import Metrics
from recipe.store.conversations import MemoryStore

TOOLS = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in ("get_weather", "run")]
_CALL = ('<｜DSML｜invoke name="{name}">\n<｜DSML｜parameter name="city" string="true">Zürich, "CH" 東京\n'
         '</｜DSML｜parameter>\n</｜DSML｜invoke>\n')
OUTPUTS = [
    "Let me think.\n\nAbout it.</think>The answer: 中文 🤖 \"quoted\" \t tab.<｜end▁of▁sentence｜>",
    "Hmm.</think>First.\n\n<｜DSML｜tool_calls>\n" + _CALL.format(name="get_weather") + _CALL.format(name="run")
    + "</｜DSML｜tool_calls><｜end▁of▁sentence｜>",
    "No end of thinking, a lone \ud800 surrogate? no: plain text \u2028 sep",
    "Short.</think>Then text without an end",
]
#: what differs from one run to the next: timestamps, random call ids
_VARYING = re.compile(rb'"(created_at|completed_at)":\d+|call_\d\d_[A-Za-z0-9]{24}')


class _Engine:
    """Plays ``chunks``, then finishes (``finish``) or fails (``fail``: an EngineError)."""

    def __init__(self, chunks: list[list[int]], finish: str | None, fail: bool) -> None:
        self.chunks, self.finish, self.fail = chunks, finish, fail

    def generate(self, request: Any) -> Any:
        return self._play()

    async def _play(self) -> Any:
        for n, c in enumerate(self.chunks):
            last = n == len(self.chunks) - 1
            yield EngineDelta(tuple(c), None, self.finish if last and not self.fail else None, 10 if n == 0 else None,
                              0 if n == 0 else None)
        if self.fail:
            raise EngineError("failed", "CUDA out of memory")

    async def aclose(self) -> None:
        pass


def _served(body: dict, chunks: list[list[int]], finish: str | None, fail: bool, store: MemoryStore) -> bytes:
    prep = prepare(orjson.dumps(body), "responses")
    job = Job("responses", prep, body, _Engine(chunks, finish, fail), "r0", "resp_t", None, 0, store, Metrics(),
              Timeouts(), 0.0, [])
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(run(job, None, send))
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    return b"".join(m.get("body", b"") for m in sent[1:])


def _expected(body: dict, chunks: list[list[int]], finish: str | None, fail: bool) -> tuple[bytes, dict | None]:
    """The payload path: every push's payloads, lifecycle objects patched, then framed."""
    prep = prepare(orjson.dumps(body), "responses")
    cs = CompletionStream(prep, prompt_tokens=len(prep.token_ids), cached_tokens=0, response_id="resp_t")
    seq, base, output, final = 0, None, [], None

    def frame(payloads: list[dict]) -> bytes:
        nonlocal seq, base, final
        for p in payloads:
            if p["type"] in ("response.created", "response.in_progress", "response.completed", "response.incomplete"):
                p["response"]["previous_response_id"] = body.get("previous_response_id")
                p["response"]["store"] = body.get("store") is not False
                base = base or p["response"]
                if p["type"] in ("response.completed", "response.incomplete"):
                    final = p["response"]
            elif p["type"] == "response.output_item.done":
                output.append(p["item"])
        if payloads:
            seq = payloads[-1]["sequence_number"] + 1
        return cs.sse(payloads)

    out = cs.start()
    data = b""
    for c in chunks:
        data += frame(out + cs.push(c))
        out = []
        if cs.finished:
            return data, final
    if fail:  # the open items closed as incomplete (the finish's payloads but its response.incomplete), then the failure
        data += frame([p for p in cs.finish("error") if p["type"] != "response.incomplete"])
        final = None
        err = from_engine_error(EngineError("failed", "CUDA out of memory"))
        return data + stream_error("responses", err, {"seq": seq, "response": base, "output": output}), None
    return data + frame(cs.finish(finish or "stop")), final


@pytest.mark.parametrize("seed", range(24))
def test_streamed_frames_equal_the_payload_path(seed):
    rnd = random.Random(seed)
    text = OUTPUTS[seed % len(OUTPUTS)]
    ids = ids_of(text)
    how = rnd.choice(["one", "random", "all"])
    chunks = [[i] for i in ids] if how == "one" else [ids] if how == "all" else split_at(
        ids, [rnd.randint(0, len(ids)) for _ in range(rnd.randint(1, len(ids)))])
    fail = seed % 3 == 0
    finish = None if fail else "length"
    body = {"model": "deepseek-v4-pro", "input": "Go.", "reasoning": {"effort": "high"}, "stream": True, "tools": TOOLS,
            "previous_response_id": None if seed % 2 else "resp_prev"}
    store = MemoryStore()
    if body["previous_response_id"] is None:
        del body["previous_response_id"]
    got = _served(body, chunks, finish, fail, store)
    want, final = _expected(body, chunks, finish, fail)
    assert _VARYING.sub(b"T", got) == _VARYING.sub(b"T", want)
    seqs = [orjson.loads(f.split(b"data: ", 1)[1])["sequence_number"] for f in got.split(b"\n\n") if f]
    assert seqs == list(range(len(seqs)))
    if final is not None:  # the stored turn is the streamed final response
        done = orjson.loads(got.rstrip(b"\n").rsplit(b"data: ", 1)[1])
        rec = store.load("resp_t")
        assert done["type"] in ("response.completed", "response.incomplete") and rec is not None and list(rec.output_items) == done["response"]["output"]
        assert done["response"]["store"] is True
        assert done["response"]["previous_response_id"] == body.get("previous_response_id") == rec.previous_response_id
    if fail and final is None:  # (an output ending with EOS completes before the engine fails)
        failed = orjson.loads(got.rstrip(b"\n").rsplit(b"data: ", 1)[1])
        assert failed["type"] == "response.failed" and failed["response"]["status"] == "failed"
        assert b"response.output_item.done" not in got or failed["response"]["output"]
        # nothing streamed is missing from the failed response: every item that was added is in its
        # output (closed as incomplete if it was open), with the text its deltas spelled
        events = [orjson.loads(f.split(b"data: ", 1)[1]) for f in got.split(b"\n\n") if f]
        added = [e["item"]["id"] for e in events if e["type"] == "response.output_item.added"]
        assert [it["id"] for it in failed["response"]["output"]] == added
        for it in failed["response"]["output"]:
            if it["type"] == "message":
                streamed = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta" and e["item_id"] == it["id"])
                assert "".join(c["text"] for c in it["content"]) == streamed
