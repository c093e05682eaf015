"""Hypothesis strategies for DeepSeek-V4.1 requests of all three APIs: the V4 strategies' bodies with
the V4.1 model name, plus what V4.1 reads differently — images (valid and invalid URLs, data URLs,
file parts), developer and mid-conversation system messages, Messages ``defer_loading`` tools and
``tool_addition`` blocks, sampling values."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from messages_strategies import messages_requests, rare
from responses_strategies import responses_requests
from strategies import chat_requests, text
from v41_support import MODEL

#: image URLs: accepted, and each way deepseek-recipe refuses one.
URLS = [
    "https://example.com/a.png", "http:x", "HTTPS://X/y.jpg", "https://x y", "ftp://x", " https://x", "notaurl", "",
    "data:image/png;base64,iVBORw0KGgo=", "data:image/JPG;base64,aGk", "data:image/png;base64,a===",
    "data:image/tiff;base64,aGk=", "data:image/png,aGk=", "data:base64,aGk=", "data:,x", "data:image/gif;base64;x,aGk=",
    "data:image/webp;base64, aG k=\n", "data:image/png;BASE64,aGk=", "DATA:image/png;base64,YQ", "data:image/png;base64,-_8=",
    "data:image/png;base64", "data: image/jpeg ;base64,YQ==", "data:image/pngbase64,aGk=", "data:image/png;x=1;base64,",
    "data:image/png;base64,YQ=", "data:text/plain;base64,%%",
]
url = st.one_of(st.sampled_from(URLS), st.sampled_from(URLS), text)
detail = st.sampled_from([None, "low", "high", "original", "auto"])
BASE64 = ["iVBORw0KGgo=", "aGk=", "YQ=", "YQ", "aGk", "a===", "aG k=", "YWJ=", "", "=", "YQ===", "-_8="]


def _chat_image(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["url", "url", "url", "file"]))
    if kind == "url":
        iu: dict[str, Any] = {"url": draw(url)}
        d = draw(detail)
        if d is not None:
            iu["detail"] = d
        return {"type": "image_url", "image_url": iu}
    part: dict[str, Any] = {"type": "file"}
    for key, value in (("file_data", draw(url)), ("file_id", "file_1")):
        if draw(st.integers(0, 2)) != 1:
            part[key] = value
    return part


def _mix(draw: Any, content: Any, image: Any) -> Any:
    """``content`` with images: a list of text parts and images (or the content unchanged)."""
    if draw(st.integers(0, 2)):
        return content
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    for _ in range(draw(st.integers(1, 2))):
        parts.insert(draw(st.integers(0, len(parts))), image(draw))
    return parts


@st.composite
def chat_v41_requests(draw: Any) -> dict[str, Any]:
    """A Chat body for V4.1: images in user, system and tool content (now and then in an
    assistant), system messages anywhere, top_p in and out of thinking."""
    body = {**draw(chat_requests()), "model": MODEL}
    msgs = []
    for m in body["messages"]:
        m = dict(m)
        if m["role"] in ("user", "system", "tool") or (m["role"] == "assistant" and draw(rare(10))):
            if m.get("content") is not None:
                m["content"] = _mix(draw, m["content"], _chat_image)
        msgs.append(m)
        if draw(rare(6)):
            msgs.append({"role": "system", "content": draw(st.one_of(text, st.just("")))})
    body["messages"] = msgs
    if draw(rare(3)):
        body["top_p"] = draw(st.sampled_from([0.5, 0.95, 0.96, 1.0, 0.01]))
    return body


def _responses_image(draw: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "input_image"}
    for key, value in (("image_url", draw(url)), ("file_id", "file_1")):
        if draw(st.integers(0, 3)) != 1 if key == "image_url" else draw(rare(5)):
            part[key] = value
    d = draw(detail)
    if d is not None:
        part["detail"] = d
    return part


def _responses_content(draw: Any, content: Any, role: str | None) -> Any:
    if isinstance(content, str):
        kind = "output_text" if role == "assistant" else "input_text"
        content = [{"type": kind, "text": content}]
    return _mix(draw, content, _responses_image)


FOUND_TOOLS = [
    {"type": "function", "name": "found", "description": "d", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
    {"type": "function", "name": "found_strict", "strict": True, "parameters": {"type": "object", "properties": {"x": {"type": "number", "minimum": 1e-06}}}},
    {"type": "function", "name": "bad name"},
    {"type": "namespace", "name": "ns", "description": "nd", "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b", "description": "bd"}]},
    {"type": "namespace", "name": "ns2", "tools": [{"type": "custom", "name": "apply_patch"}]},
    {"type": "custom", "name": "apply_patch"}, {"type": "custom", "name": "other"},
    {"type": "web_search", "search_context_size": "low", "user_location": {"type": "approximate", "city": "P"}},
    {"type": "file_search", "vector_store_ids": ["v"]},
]


def _tool_search(draw: Any, call_id: str, names: list[str]) -> list[dict[str, Any]]:
    """A tool search round: the call, then (mostly) its output listing found tools (sometimes one
    the request already declares)."""
    found = draw(st.lists(st.sampled_from(FOUND_TOOLS + [{"type": "function", "name": n} for n in names[:1]]), max_size=3))
    items: list[dict[str, Any]] = [{"type": "tool_search_call", "call_id": call_id, "arguments": draw(st.sampled_from([{}, {"query": "weather", "n": 2}]))}]
    if not draw(rare(8)):
        items.append({"type": "tool_search_output", "call_id": call_id, "tools": found})
    return items


@st.composite
def responses_v41_requests(draw: Any) -> dict[str, Any]:
    """A Responses body for V4.1: images in messages and tool outputs, developer and system items,
    tool search rounds."""
    body = {**draw(responses_requests()), "model": MODEL}
    names = [t["name"] for t in body.get("tools") or () if t.get("type") == "function"]
    if isinstance(body.get("input"), list):
        items = []
        for n, it in enumerate(body["input"]):
            if draw(rare(5)):
                items.extend(_tool_search(draw, f"ts_{n}", names))
            it = dict(it)
            if "role" in it and (it["role"] != "assistant" or draw(rare(10))):
                it["content"] = _responses_content(draw, it["content"], it["role"])
            elif it.get("type") == "function_call_output":
                it["output"] = _responses_content(draw, it["output"], None)
            items.append(it)
            if draw(rare(6)):
                items.append({"role": draw(st.sampled_from(["developer", "system"])), "content": draw(st.one_of(text, st.just("")))})
        if draw(rare(4)):
            items.extend(_tool_search(draw, "ts_last", names))
        body["input"] = items
    if draw(rare(3)):
        body["top_p"] = draw(st.sampled_from([0.5, 0.95, 0.96, 1.0]))
    return body


def _messages_image(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["base64", "base64", "url", "url", "file"]))
    if kind == "base64":
        src = {"type": "base64", "media_type": draw(st.sampled_from(["image/png", "image/jpg", "image/jpeg", "image/gif", "image/webp"])),
               "data": draw(st.sampled_from(BASE64))}
    elif kind == "url":
        src = {"type": "url", "url": draw(url)}
    else:
        src = {"type": "file", "file_id": "file_1"}
    return {"type": "image", "source": src}


@st.composite
def messages_v41_requests(draw: Any) -> dict[str, Any]:
    """A Messages body for V4.1: images, ``role: "system"`` messages with text, images and
    ``tool_addition`` blocks, ``defer_loading`` tools."""
    body = {**draw(messages_requests()), "model": MODEL}
    tools = [dict(t) for t in body.get("tools") or ()]
    for t in tools:
        if "type" not in t and draw(rare(3)):
            t["defer_loading"] = draw(st.booleans())
    if tools:
        body["tools"] = tools
    names = [t["name"] for t in tools if "type" not in t] or ["nope"]
    msgs = []
    for m in body["messages"]:
        m = dict(m)
        if isinstance(m["content"], list) and m["role"] == "user" and draw(rare(2)):
            blocks = list(m["content"])
            blocks.insert(draw(st.integers(0, len(blocks))), _messages_image(draw))
            m["content"] = blocks
        if m["role"] == "system" and draw(st.booleans()):
            blocks = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else list(m["content"])
            for _ in range(draw(st.integers(0, 2))):
                block = draw(st.sampled_from(["addition", "addition", "image"]))
                new = (_messages_image(draw) if block == "image" else
                       {"type": "tool_addition", "tool": {"type": "tool_reference", "name": draw(st.sampled_from(names))}})
                blocks.insert(draw(st.integers(0, len(blocks))), new)
            m["content"] = blocks
        msgs.append(m)
    body["messages"] = msgs
    if draw(rare(3)):
        body["top_p"] = draw(st.sampled_from([0.5, 0.95, 0.96, 1.0]))
    return body
