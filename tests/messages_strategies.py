"""Hypothesis strategies for Anthropic Messages requests (mostly valid, sometimes breaking one rule)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from strategies import ident, json_value, text

def rare(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws (hypothesis favours boundary integers, so not ``== 0``)."""
    return st.integers(0, n - 1).map(lambda k: k == n // 2)


cache_control = st.sampled_from([None, {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}])


def _with_cache(block: dict[str, Any], cc: Any) -> dict[str, Any]:
    if cc is not None:
        block["cache_control"] = cc
    return block


text_block = st.builds(lambda t, cc: _with_cache({"type": "text", "text": t}, cc), text, cache_control)
image_block = st.sampled_from([
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
    {"type": "image", "source": {"type": "file", "file_id": "file_01"}},
])
document_block = st.sampled_from([
    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain"}},
    {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
])
thinking_block = st.builds(
    lambda t, sig: {"type": "thinking", "thinking": t, **({"signature": sig} if sig is not None else {})},
    text, st.one_of(st.none(), st.just("EqQBCkYIARgC")),
)
tool_result_content = st.one_of(
    st.none(),
    text,
    st.lists(st.one_of(text_block, image_block, document_block), max_size=3),
)
user_content = st.one_of(text, st.lists(st.one_of(text_block, text_block, image_block, document_block), min_size=1, max_size=3))
tool_input = st.one_of(
    st.dictionaries(st.text(max_size=6), json_value, max_size=4),
    st.dictionaries(st.text(max_size=6), json_value, max_size=4),
    json_value,
)


def _tool_result(tool_use_id: str, content: Any, is_error: bool | None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id}
    if content is not None:
        block["content"] = content
    if is_error is not None:
        block["is_error"] = is_error
    return block


@st.composite
def tool_round(draw, tool_names: list[str]) -> list[dict[str, Any]]:
    """An assistant turn with 1–3 (parallel) tool_use blocks and the user turn answering them;
    now and then one pairing rule is broken."""
    n = draw(st.integers(1, 3))
    ids = draw(st.lists(st.one_of(ident, st.just("toolu_01A"), st.just("call_10"), st.just("call_2")), min_size=n, max_size=n, unique=True))
    blocks: list[dict[str, Any]] = []
    if draw(st.booleans()):
        blocks.append(draw(thinking_block))
    if draw(st.booleans()):
        blocks.append(draw(text_block))
    for i in ids:
        blocks.append({"type": "tool_use", "id": i, "name": draw(st.sampled_from(tool_names or ["f"])), "input": draw(tool_input)})
    if draw(st.integers(0, 3)) == 0:
        blocks.append(draw(thinking_block))
    results = [_tool_result(i, draw(tool_result_content), draw(st.sampled_from([None, True, False]))) for i in draw(st.permutations(ids))]
    if tool_names and draw(rare(4)):
        reference = {"type": "tool_reference", "tool_name": draw(st.sampled_from(tool_names))}
        results[0]["content"] = [draw(text_block), reference]
    if draw(st.booleans()):
        results.append(draw(st.one_of(text_block, image_block)))
    breakage = draw(st.integers(0, 40).map(lambda k: (k * 7) % 41))  # 0–6 (a broken rule) about 1 in 6
    if breakage == 0:
        results.pop(0)  # a missing result (or a leading text when extras were appended)
    elif breakage == 1:
        results.insert(0, draw(text_block))  # text before the results
    elif breakage == 2:
        results.append(_tool_result(draw(ident), "x", None))  # a result for an unknown id
    elif breakage == 3:
        results.append(_tool_result(ids[0], "again", None))  # a second result for one id
    elif breakage == 4:
        blocks.append({"type": "tool_use", "id": ids[0], "name": "f", "input": {}})  # duplicate id
    elif breakage == 5:
        blocks.append(draw(text_block))  # text after a tool_use
    turns = [{"role": "assistant", "content": blocks}]
    if breakage != 6:  # 6: no answering user turn at all
        turns.append({"role": "user", "content": results if results else []})
    return turns


@st.composite
def tools(draw) -> list[dict[str, Any]]:
    names = draw(st.lists(ident, max_size=3, unique=True))
    out: list[dict[str, Any]] = []
    for name in names:
        tool: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            tool["description"] = draw(text)
        props = draw(st.dictionaries(ident, st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "number", "description": "n"}]), max_size=3))
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if props and draw(st.booleans()):
            schema["required"] = sorted(props)
        if not draw(rare(25)):  # now and then no input_schema: a 400
            tool["input_schema"] = schema
        for key, value in (("strict", True), ("defer_loading", False), ("cache_control", {"type": "ephemeral"})):
            if draw(rare(4)):
                tool[key] = value
        out.append(tool)
    if draw(rare(30)):
        out.append({"type": "web_search_20250305", "name": "web_search", "max_uses": 3})
    return out


@st.composite
def messages_requests(draw) -> dict[str, Any]:
    """An Anthropic Messages body for the differential test."""
    tl = draw(tools())
    names = [t["name"] for t in tl if "type" not in t]
    msgs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["user", "user", "assistant", "assistant_blocks", "tools", "tools", "system"]))
        if kind == "user":
            msgs.append({"role": "user", "content": draw(user_content)})
        elif kind == "assistant":
            msgs.append({"role": "assistant", "content": draw(text)})
        elif kind == "assistant_blocks":
            blocks = draw(st.lists(st.one_of(text_block, thinking_block, image_block), min_size=0 if draw(rare(15)) else 1, max_size=3))
            msgs.append({"role": "assistant", "content": blocks})
        elif kind == "system":
            msgs.append({"role": "system", "content": draw(st.one_of(text, st.lists(text_block, max_size=2)))})
        else:
            msgs.extend(draw(tool_round(names)))
    body: dict[str, Any] = {"model": draw(st.sampled_from(["deepseek-v4-pro", "deepseek-v4-flash"])), "messages": msgs}
    if draw(st.booleans()):
        body["max_tokens"] = draw(st.one_of(st.integers(1, 4096), st.integers(0, 500000)))
    system = draw(st.one_of(st.none(), text, st.lists(text_block, max_size=3)))
    if system is not None:
        body["system"] = system
    if tl and not draw(rare(4)):
        body["tools"] = tl
    choice = draw(st.sampled_from([None, "auto", "any", "none", "tool"]))
    if choice == "tool":
        body["tool_choice"] = {"type": "tool", "name": draw(st.sampled_from(names or ["f"]))}
    elif choice:
        body["tool_choice"] = {"type": choice}
        if choice != "none" and draw(st.booleans()):
            body["tool_choice"]["disable_parallel_tool_use"] = True
    th = draw(st.sampled_from([None, "enabled", "disabled", "adaptive"]))
    if th:
        body["thinking"] = {"type": th}
        if th == "enabled" and draw(st.booleans()):
            body["thinking"]["budget_tokens"] = 2048
    effort = draw(st.sampled_from([None, "none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"]))
    if effort:
        body["output_config"] = {"effort": effort}
    if draw(rare(4)):
        body["stop_sequences"] = draw(st.lists(st.one_of(text, st.just("\n\nHuman:")), max_size=3))
    if draw(rare(4)):
        body["temperature"] = draw(st.floats(-0.5, 2.5) if draw(rare(8)) else st.floats(0, 2))
    if draw(rare(4)):
        body["top_p"] = draw(st.floats(0, 1.2) if draw(rare(8)) else st.floats(0.01, 1))
    if draw(rare(6)):
        body["top_k"] = 40
        body["metadata"] = {"user_id": "u1"}
        body["stream"] = draw(st.booleans())
    return body


def wire(body: Any) -> str:
    """The JSON text both sides read (so number parsing is compared too)."""
    return json.dumps(body, ensure_ascii=False)
