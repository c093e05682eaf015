"""``CompletionStream.push_sse`` (delta frames from per-stream templates) gives exactly the bytes of
``sse(push(…))`` (payload dicts, then orjson), push by push, for the three APIs.

Two streams with the same ids, seed and timestamps are fed the same random output in the same random
chunking, one through each path; every push's bytes must be equal (the fast path also updates the
encoder's state: item texts, block lengths, sequence numbers, so later frames and the final object
must agree too).
"""

from __future__ import annotations

import random
import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from output_parity_support import ids_of, split_at

from recipe.api.encoder import HOLE, frame_template
from recipe.output.driver import CompletionStream
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer

TOOLS = ("get_weather", "run")


def _chat(effort: str, tools: bool, **kw) -> dict:
    b = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Go (json)."}], "reasoning_effort": effort,
         "stream": True, **kw}
    if tools:
        b["tools"] = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in TOOLS]
    return b


def _responses(effort: str, tools: bool, **kw) -> dict:
    b = {"model": "deepseek-v4-pro", "input": "Go (json).", "reasoning": {"effort": effort}, "stream": True, **kw}
    if tools:
        b["tools"] = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in TOOLS]
    return b


def _messages(effort: str, tools: bool, **kw) -> dict:
    b = {"model": "deepseek-v4-pro", "max_tokens": 4000, "messages": [{"role": "user", "content": "Go."}],
         "thinking": {"type": "disabled" if effort == "none" else "enabled"}, "stream": True, **kw}
    if tools:
        b["tools"] = [{"name": n, "input_schema": {"type": "object"}} for n in TOOLS]
    return b


#: (api, request body): thinking or not, tools, stop sequences, JSON mode, log probabilities,
#: usage on every chunk, V4.1.
REQUESTS = [
    ("chat", _chat("high", True)),
    ("chat", _chat("none", True)),
    ("chat", _chat("none", False, stop=["STOP"])),
    ("chat", _chat("none", False, response_format={"type": "json_object"})),
    ("chat", _chat("high", False, logprobs=True)),
    ("chat", _chat("high", True, stream_options={"include_usage": True})),
    ("chat", {**_chat("high", True), "model": "deepseek-v4.1-flash"}),
    ("responses", _responses("high", True)),
    ("responses", _responses("none", True)),
    ("responses", _responses("none", False, text={"format": {"type": "json_object"}})),
    ("messages", _messages("high", True)),
    ("messages", _messages("none", True)),
    ("messages", _messages("none", False, stop_sequences=["STOP"])),
]

_CALL = ('<｜DSML｜invoke name="{name}">\n<｜DSML｜parameter name="city" string="true">Zürich, "CH" 東京\n'
         '</｜DSML｜parameter>\n<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n')
PIECES = [
    "Let me think about this. ", "\n\n", "中文 🤖 ünïcödé ", "a < b and c > d ", "</think>", "\n", "The answer: ",
    '{"a": [1, 2]} ', "\\ \" \t tab ", "STOP", "<｜DSML｜tool_calls>\n", _CALL.format(name="get_weather"),
    _CALL.format(name="run"), _CALL.format(name="other"), "</｜DSML｜tool_calls>", "<｜DSML｜ stray ", "<｜User｜>",
    _CALL.format(name="run").replace("｜DSML｜invoke", "｜DSML｜ invoke").replace("｜DSML｜parameter", "｜DSML｜ parameter"),
    "\u2028 line sep ", "\x01\x7f ctl ", "<｜end▁of▁sentence｜>",
]


def _output(rnd: random.Random) -> list[int]:
    ids = ids_of("".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 14))))
    if rnd.random() < 0.3:  # a multi-byte character split over byte tokens (emoji → byte-fallback ids)
        tok = load_tokenizer()
        emoji = [i for i in tok.encode_ordinary("🤖") if tok.token_bytes(i).decode("utf-8", "ignore") == ""]
        at = rnd.randint(0, len(ids))
        ids[at:at] = emoji or tok.encode_ordinary("🤖")
    return ids


_COMPLETED_AT = re.compile(rb'"completed_at":\d+')


def _run(api: str, body: dict, chunks: list[list[int]], fast: bool, lps: bool) -> list[bytes]:
    cs = CompletionStream(prepare(body, api), seed=3, created=7, prompt_tokens=10, response_id={"chat": "chatcmpl-t", "responses": "resp_t",
                                                                            "messages": "msg_t"}[api])
    out = [cs.sse(cs.start())]
    for c in chunks:
        lp = [(-0.5, [(i, -0.5)]) for i in c] if lps else None
        out.append(cs.push_sse(c, lp) if fast else cs.sse(cs.push(c, lp)))
    out.append(cs.sse(cs.finish("length")))
    # completed_at is created + whole seconds of the stream's life: not part of what is compared
    return [_COMPLETED_AT.sub(b'"completed_at":0', b) for b in out]


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(range(len(REQUESTS))), st.sampled_from(["one", "random", "all"]))
def test_push_sse_equals_sse_of_push(seed, k, how):
    api, body = REQUESTS[k]
    rnd = random.Random(seed)
    ids = _output(rnd)
    if how == "one":
        chunks = [[i] for i in ids]
    elif how == "all":
        chunks = [ids]
    else:
        chunks = split_at(ids, [rnd.randint(0, len(ids)) for _ in range(rnd.randint(0, len(ids)))])
    lps = bool(body.get("logprobs")) and rnd.random() < 0.7
    assert _run(api, body, chunks, True, lps) == _run(api, body, chunks, False, lps)


@pytest.mark.parametrize("api,body", [("chat", _chat("high", True)), ("responses", _responses("high", True)),
                                      ("messages", _messages("high", True))])
def test_the_template_path_really_runs(api, body, monkeypatch):
    """One id per push in reasoning, content and a call's arguments: the encoder builds payload dicts
    only where something opens or closes, every other push is a template frame."""
    text = "Thinking a while about it.</think>The answer is here, in words.\n\n<｜DSML｜tool_calls>\n" + _CALL.format(
        name="run") + "</｜DSML｜tool_calls>"
    ids = ids_of(text)
    cs = CompletionStream(prepare(body, api), seed=1, created=1)
    cls = type(cs.encoder)
    general = cls.on_events
    built = []
    monkeypatch.setattr(cls, "on_events", lambda self, events, logprobs=None: built.append(events) or general(self, events, logprobs))
    cs.sse(cs.start())
    frames = [cs.push_sse((i,)) for i in ids]
    sent = sum(1 for f in frames if f)
    assert sent > 25 and len(built) <= 8, (sent, built)


@pytest.mark.parametrize("api,body,rid", [("chat", _chat("high", True), "chatcmpl-t"), ("responses", _responses("high", True), "resp_t"),
                                          ("messages", _messages("high", True), "msg_t")])
def test_ambiguous_template_falls_back(api, body, rid):
    """A model name containing the template's placeholder: no template, the payload path, same bytes."""
    ids = ids_of("Hmm.</think>Yes." + "<｜DSML｜tool_calls>\n" + _CALL.format(name="run") + "</｜DSML｜tool_calls>")

    def run(fast: bool) -> bytes:
        cs = CompletionStream(prepare(body, api), seed=1, created=1, model=HOLE, response_id=rid)
        out = cs.sse(cs.start())
        for i in ids:
            out += cs.push_sse((i,)) if fast else cs.sse(cs.push((i,)))
        return _COMPLETED_AT.sub(b'"completed_at":0', out + cs.sse(cs.finish()))

    fast = run(True)
    assert fast == run(False)
    assert HOLE.encode() in fast and b"Yes" in fast


def test_frame_template_split():
    frame = b"data: " + orjson.dumps({"a": HOLE, "b": [1, HOLE], "c": "x"}) + b"\n\n"
    assert frame_template(frame, 2) == (b'data: {"a":', b',"b":[1,', b'],"c":"x"}\n\n')
    assert frame_template(frame, 1) is None
