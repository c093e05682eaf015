"""Helpers for the Messages output tests: recorded rows, a checking fold of Messages stream events
(the anthropic SDK's ``accumulate_event`` rules, api-wire-formats §4.4, plus the order rules of §4.3
and §7), SSE parsing, and deepseek-recipe (test oracle) runs of the same output."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import output_parity_support as shared
from output_parity_support import call_id, recorded_rows, structural_copy

from recipe.output.driver import response
from recipe.pipeline import prepare

USER = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS = [
    {"name": "get_w", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}},
    {"name": "get_time", "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}},
]


def messages_rows() -> list[dict[str, Any]]:
    """The Messages rows of deepseek-recipe 0.2.0's recorded completions."""
    return recorded_rows("messages")


def body(thinking: bool = False, **kw: Any) -> dict[str, Any]:
    """A Messages request (thinking off unless asked)."""
    b: dict[str, Any] = {"model": "deepseek-v4-pro", "max_tokens": 4096, "messages": USER,
                         "thinking": {"type": "enabled" if thinking else "disabled"}}
    if thinking:
        b["output_config"] = {"effort": "low"}
    b.update(kw)
    return b


def recording_kwargs(row: dict[str, Any] | None = None, seed: int = 11) -> dict[str, Any]:
    """CompletionStream arguments matching the recordings (id, model echo, prompt 20 / cached 5)."""
    pu = row["prompt_usage"] if row else {"prompt_tokens": 20, "prompt_cache_hit_tokens": 5}
    return dict(prompt_tokens=pu["prompt_tokens"], cached_tokens=pu["prompt_cache_hit_tokens"],
                response_id="msg_test", model="m", seed=seed)


def stream_payloads(req: dict[str, Any], chunks: Sequence[Any], finish: str, **kw: Any) -> list[dict[str, Any]]:
    """Our events (``start`` first) for ``chunks`` (lists of completion ids, or decoded strings of 1
    token each) pushed in order, then finish."""
    return shared.stream_payloads(prepare(req, "messages"), chunks, finish, start=True, **kw)


def our_response(req: dict[str, Any], ids: Sequence[int], finish: str, **kw: Any) -> dict[str, Any]:
    return response(prepare(req, "messages"), ids, finish=finish, **kw)


_STRUCTURAL = {"id": call_id}


def structural(obj: Any) -> Any:
    """Copy of ``obj`` with tool-use ids checked against the ``call_NN_…`` pattern and replaced by ``CALL``."""
    return structural_copy(obj, _STRUCTURAL)


_DELTA_FOR = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "thinking",
              "input_json_delta": "tool_use"}


def fold(payloads: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Check the event order rules and fold the events into a ``message`` (the SDK's rules).

    Checked: ``message_start`` first with an empty message; blocks started with dense indexes in
    order, each delta of the open block's kind, a thinking block's ``signature_delta`` right before
    its stop, every block stopped before the next starts; exactly one ``ping``, right after the first
    ``content_block_start`` (or never, when there is no block); one ``message_delta`` after the last
    stop; ``message_stop`` last. ``tool_use.input`` is the JSON of the concatenated fragments (must
    be an object); ``recipe`` of the ``message_delta`` is kept (the SDK drops it).
    """
    assert payloads and payloads[0]["type"] == "message_start", payloads[:1]
    msg = copy.deepcopy(payloads[0]["message"])
    assert msg["content"] == [] and msg["stop_reason"] is None and msg["stop_sequence"] is None
    assert msg["usage"]["output_tokens"] == 0
    bufs: dict[int, str] = {}
    open_block: int | None = None
    last_signature = False
    pings = []
    deltas = 0
    for k, p in enumerate(payloads[1:], 1):
        t = p["type"]
        assert deltas == 0 or t == "message_stop", f"{t} after message_delta"
        if t == "ping":
            pings.append(k)
        elif t == "content_block_start":
            assert open_block is None, "block started before the previous stopped"
            assert p["index"] == len(msg["content"]), "block indexes must be dense and in order"
            block = copy.deepcopy(p["content_block"])
            assert block in ({"type": "text", "text": ""}, {"type": "thinking", "thinking": "", "signature": ""}) or (
                block["type"] == "tool_use" and block["input"] == {} and set(block) == {"type", "id", "name", "input"})
            msg["content"].append(block)
            open_block = p["index"]
            last_signature = False
        elif t == "content_block_delta":
            i = p["index"]
            assert i == open_block, "delta for a block that is not open"
            block = msg["content"][i]
            d = p["delta"]
            assert _DELTA_FOR[d["type"]] == block["type"], (d, block)
            assert not last_signature, "signature_delta must be the thinking block's last delta"
            if d["type"] == "text_delta":
                block["text"] += d["text"]
            elif d["type"] == "thinking_delta":
                block["thinking"] += d["thinking"]
            elif d["type"] == "signature_delta":
                block["signature"] = d["signature"]
                last_signature = True
            else:
                bufs[i] = bufs.get(i, "") + d["partial_json"]
        elif t == "content_block_stop":
            assert p["index"] == open_block
            block = msg["content"][open_block]
            if block["type"] == "thinking":
                assert last_signature, "thinking block closed without signature_delta"
            if block["type"] == "tool_use" and open_block in bufs:
                block["input"] = json.loads(bufs[open_block])
                assert isinstance(block["input"], dict)
            open_block = None
        elif t == "message_delta":
            assert open_block is None, "message_delta with a block still open"
            deltas += 1
            msg["stop_reason"] = p["delta"]["stop_reason"]
            msg["stop_sequence"] = p["delta"]["stop_sequence"]
            msg["usage"].update(p["usage"])
            if "recipe" in p:
                msg["recipe"] = p["recipe"]
        elif t == "message_stop":
            assert k == len(payloads) - 1, "message_stop must be last"
        else:
            raise AssertionError(f"unknown event {t}")
    assert deltas == 1 and payloads[-1]["type"] == "message_stop"
    first_start = next((k for k, p in enumerate(payloads) if p["type"] == "content_block_start"), None)
    assert pings == ([] if first_start is None else [first_start + 1]), (pings, first_start)
    assert msg["stop_reason"] is not None
    return msg


def parse_sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """``event: NAME`` / ``data: JSON`` frames → [(name, payload)]; every frame must have both."""
    out = []
    assert data.endswith(b"\n\n")
    for frame in data[:-2].split(b"\n\n"):
        lines = frame.split(b"\n")
        assert len(lines) == 2 and lines[0].startswith(b"event: ") and lines[1].startswith(b"data: "), frame
        out.append((lines[0][7:].decode(), json.loads(lines[1][6:])))
    return out


# ---------------------------------------------------------------- deepseek-recipe oracle


def oracle_run(req: dict[str, Any], chunks: Sequence[Any], finish: str = "stop", prompt: int = 20, cached: int = 5,
               signature: str | None = None) -> tuple[list[dict], dict]:
    """deepseek-recipe's events (``to_json`` of each) and accumulated message for the same output.
    ``chunks``: lists of ids (token mode) or strings (text mode, 1 token each)."""
    decorate = None if signature is None else (lambda _req: lambda gen: gen.with_signature(signature))
    return shared.oracle_run("messages", req, chunks, finish, response_id="msg_test", prompt=prompt, cached=cached,
                             decorate=decorate, accumulator="MessagesResponse")
