"""Hypothesis strategies for OpenAI Responses requests (mostly valid, sometimes breaking a rule)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from strategies import arguments, ident, json_value, text

MODELS = st.sampled_from(["deepseek-v4-pro", "deepseek-v4-flash"])
EFFORTS = [None, "none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"]

_text_part = st.builds(lambda t, k: {"type": k, "text": t}, text, st.sampled_from(["input_text", "output_text"]))
_media_part = st.sampled_from(
    [
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        {"type": "input_image", "detail": "low", "file_id": "file_1"},
        {"type": "input_file", "file_id": "file_2", "filename": "a.pdf"},
    ]
)
parts = st.lists(st.one_of(_text_part, _text_part, _media_part), max_size=3)
content = st.one_of(text, parts)
output = st.one_of(
    text,
    st.lists(st.one_of(st.builds(lambda t: {"type": "input_text", "text": t}, text), _media_part), max_size=3),
)


@st.composite
def message(draw, role: str) -> dict[str, Any]:
    item: dict[str, Any] = {"role": role, "content": draw(content)}
    if draw(st.booleans()):
        item["type"] = "message"
    return item


@st.composite
def reasoning(draw) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning"}
    kind = draw(st.sampled_from(["content", "content", "summary_only", "bare"]))
    if kind != "bare":
        item["summary"] = [{"type": "summary_text", "text": draw(text)}] if draw(st.booleans()) else []
    if kind == "content":
        item["content"] = [{"type": "reasoning_text", "text": t} for t in draw(st.lists(st.one_of(text, st.just("")), max_size=3))]
    return item


@st.composite
def tool_round(draw, names: list[str], namespaces: list[tuple[str, str]], id_pool: list[str], used: set[str]) -> list[dict[str, Any]]:
    """Optional reasoning/text, 1-3 calls, then their outputs in any order (sometimes broken)."""
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append(draw(reasoning()))
    if draw(st.integers(0, 2)) == 0:
        items.append({"role": "assistant", "content": draw(content)})
    n = draw(st.integers(1, 3))
    fresh = [i for i in id_pool if i not in used] if draw(st.integers(0, 9)) else id_pool  # mostly new ids
    ids = draw(st.lists(st.sampled_from(fresh or id_pool), min_size=min(n, len(fresh or id_pool)), max_size=n, unique=True))
    used.update(ids)
    for cid in ids:
        kind = draw(st.sampled_from(["plain", "plain", "plain", "namespace", "custom"]))
        if kind == "namespace" and namespaces:
            ns, local = draw(st.sampled_from(namespaces))
            items.append({"type": "function_call", "call_id": cid, "name": local, "namespace": ns, "arguments": draw(arguments())})
        elif kind == "custom":
            items.append({"type": "custom_tool_call", "call_id": cid, "name": "apply_patch", "input": draw(text)})
        else:
            call = {"type": "function_call", "call_id": cid, "name": draw(st.sampled_from(names or ["f"])), "arguments": draw(arguments())}
            if draw(st.integers(0, 4)) == 0:
                call.update(id="fc_1", status="completed")
            items.append(call)
    answered = draw(st.permutations(ids))
    mode = draw(st.sampled_from(["ok"] * 8 + ["drop", "extra", "interrupt", "dup"]))
    if mode == "drop":
        answered = answered[:-1]
    outs = [
        {"type": "custom_tool_call_output" if draw(st.integers(0, 5)) == 0 else "function_call_output", "call_id": cid, "output": draw(output)}
        for cid in answered
    ]
    if mode == "extra":
        outs.append({"type": "function_call_output", "call_id": draw(st.sampled_from(id_pool)), "output": "x"})
    elif mode == "dup" and outs:
        outs.append(dict(outs[0]))
    elif mode == "interrupt" and outs:
        outs.insert(draw(st.integers(0, len(outs) - 1)), draw(st.sampled_from([{"role": "user", "content": "u"}, {"type": "reasoning", "content": []}])))
    if draw(st.integers(0, 5)) == 0 and outs:
        outs.insert(draw(st.integers(0, len(outs))), {"type": "item_reference", "id": "ref_1"})
    if mode == "ok" and draw(st.integers(0, 6)) == 0:
        outs.append({"type": "function_call_output", "output": draw(output)})  # answers nothing, after a tool result
    return items + outs


@st.composite
def tools(draw) -> tuple[list[dict[str, Any]], list[str], list[tuple[str, str]]]:
    """(tools, names a named tool_choice may use, (namespace, local) pairs)."""
    out: list[dict[str, Any]] = []
    names: list[str] = []
    pairs: list[tuple[str, str]] = []
    strict = draw(st.sampled_from([None, None, False, True]))
    n = draw(st.sampled_from([0, 1, 1, 2, 2, 3, 4]))
    fresh = iter(draw(st.lists(ident, min_size=n, max_size=n, unique=True)))
    for _ in range(n):
        kind = draw(st.sampled_from(["function"] * 6 + ["namespace"] * 3 + ["web_search", "apply_patch", "hosted"] * 2 + ["bad_custom"]))
        if kind == "function":
            name = draw(st.one_of(st.just(next(fresh)), ident))
            fn: dict[str, Any] = {"type": "function", "name": name}
            if draw(st.booleans()):
                fn["description"] = draw(text)
            if draw(st.booleans()):
                props = draw(st.dictionaries(ident, st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "number", "description": "n"}]), max_size=3))
                fn["parameters"] = {"type": "object", "properties": props}
            if strict is not None:
                fn["strict"] = strict
            out.append(fn)
            names.append(name)
        elif kind == "namespace":
            ns = next(fresh)
            locals_ = draw(st.lists(ident, min_size=0, max_size=3))
            inner = [{"type": "function", "name": n, **({"strict": strict} if strict is not None else {})} for n in locals_]
            out.append({"type": "namespace", "name": ns, "description": "d", "tools": inner})
            pairs += [(ns, n) for n in locals_]
            names += [(ns + n) if ns.endswith("_") or n.startswith("_") else f"{ns}__{n}" for n in locals_]
        elif kind == "web_search":
            out.append({"type": draw(st.sampled_from(["web_search", "web_search_preview", "web_search_2025_08_26"]))})
        elif kind == "apply_patch":
            out.append({"type": "custom", "name": "apply_patch"})
            names.append("apply_patch")
        elif kind == "hosted":
            out.append({"type": draw(st.sampled_from(["file_search", "mcp", "tool_search", "code_interpreter"]))})
        else:
            out.append({"type": "custom", "name": draw(ident)})
    return out, names, pairs


@st.composite
def responses_requests(draw) -> dict[str, Any]:
    """A Responses body: instructions, items of every kind, tools, tool_choice, effort, text.format."""
    tl, names, pairs = draw(tools())
    id_pool = draw(st.lists(ident, min_size=6, max_size=12, unique=True))
    used: set[str] = set()
    body: dict[str, Any] = {"model": draw(MODELS)}
    if draw(st.integers(0, 3)) == 0:
        body["instructions"] = draw(st.one_of(text, st.just("")))
    form = draw(st.sampled_from(["items"] * 12 + ["string"] * 2 + ["empty_list", "absent"]))
    if form == "string":
        body["input"] = draw(text)
    elif form == "empty_list":
        body["input"] = []
    elif form == "items" or "instructions" not in body:
        items: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(1, 6))):
            kind = draw(st.sampled_from(["user", "user", "developer", "system", "assistant", "reasoning", "round", "round", "ref"]))
            if kind in ("user", "developer", "system", "assistant"):
                items.append(draw(message(kind)))
            elif kind == "reasoning":
                items.append(draw(reasoning()))
            elif kind == "ref":
                items.append(draw(st.sampled_from([{"type": "item_reference", "id": "r"}, {"type": "web_search_call", "id": "w"}])))
            else:
                items.extend(draw(tool_round(names, pairs, id_pool, used)))
        body["input"] = items
    if tl and draw(st.integers(0, 3)):
        body["tools"] = tl
    choice = draw(st.sampled_from([None, None, "auto", "none", "required", "named", "named", "custom", "web_search"]))
    if choice == "named":
        body["tool_choice"] = {"type": "function", "name": draw(st.sampled_from(names or ["f"]))}
    elif choice == "custom":
        body["tool_choice"] = {"type": "custom", "name": "apply_patch"}
    elif choice == "web_search":
        body["tool_choice"] = {"type": "web_search"}
    elif choice:
        body["tool_choice"] = choice
    eff = draw(st.sampled_from(EFFORTS + ["none", "none", "none", "omit", "omit"]))
    if eff != "omit":
        body["reasoning"] = {} if eff is None else {"effort": eff}
        if draw(st.booleans()):
            body["reasoning"]["summary"] = draw(st.sampled_from(["auto", "concise", "detailed"]))
    fmt = draw(st.sampled_from([None, None, None, "text", "json_object", "json_schema", "json_schema_strict"]))
    if fmt in ("json_schema", "json_schema_strict"):
        if fmt == "json_schema":
            schema: Any = draw(st.one_of(st.dictionaries(st.text(max_size=4), json_value, max_size=3), st.just({"type": "object"})))
        else:
            props = draw(st.dictionaries(ident, st.sampled_from([{"type": "string"}, {"type": "integer", "minimum": 0}] * 4 + [{"type": "object"}]), max_size=3))
            schema = {"type": "object", "properties": props}
        body["text"] = {"format": {"type": "json_schema", "name": "s", "schema": schema, "strict": fmt == "json_schema_strict"}}
    elif fmt:
        body["text"] = {"format": {"type": fmt}}
    if draw(st.integers(0, 4)) == 0:
        body["max_output_tokens"] = draw(st.one_of(st.integers(1, 393216), st.integers(1, 393216), st.integers(0, 400000)))
    if draw(st.integers(0, 4)) == 0:
        body["temperature"] = draw(st.one_of(st.floats(0, 2), st.floats(0, 2), st.floats(-0.5, 2.5)))
    if draw(st.integers(0, 4)) == 0:
        body["top_p"] = draw(st.one_of(st.floats(0.01, 1), st.floats(0.01, 1), st.floats(0, 1.2)))
    if draw(st.integers(0, 4)) == 0:
        body["top_logprobs"] = draw(st.one_of(st.integers(0, 20), st.integers(0, 20), st.integers(0, 25)))
    return body


def wire(body: dict[str, Any]) -> str:
    """The JSON text both implementations read."""
    return json.dumps(body, ensure_ascii=False)
