"""Hypothesis strategies for Chat Completions requests (valid and slightly invalid)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

SPECIAL_SPELLINGS = [
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
    "｜DSML｜", "<｜DSML｜tool_calls>", "<｜latest_reminder｜>", "<tool_result>", "\n\n", " ",
]

text = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.sampled_from(list("ab \n\t{}\"':,0123456789中文🤖json")) , max_size=20),
    st.lists(st.sampled_from(SPECIAL_SPELLINGS + ["x", "JSON", "y"]), max_size=5).map("".join),
)
ident = st.text(alphabet=st.sampled_from(list("abcXYZ_-019")), min_size=1, max_size=8)

json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), text,
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)

parts = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, text),
        st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
    ),
    min_size=0,
    max_size=3,
)
content = st.one_of(text, parts)


@st.composite
def arguments(draw) -> str:
    import json

    kind = draw(st.sampled_from(["object", "object", "object", "other", "invalid"]))
    if kind == "object":
        obj = draw(st.dictionaries(st.text(max_size=6), json_value, max_size=4))
        return json.dumps(obj, ensure_ascii=draw(st.booleans()))
    if kind == "other":
        return json.dumps(draw(json_value))
    return draw(text)


@st.composite
def tool_round(draw, tool_names: list[str]) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 3))
    ids = draw(st.lists(ident, min_size=n, max_size=n, unique=True))
    calls = [
        {"id": i, "type": "function", "function": {"name": draw(st.sampled_from(tool_names or ["f"])), "arguments": draw(arguments())}}
        for i in ids
    ]
    asst: dict[str, Any] = {"role": "assistant", "tool_calls": calls}
    if draw(st.booleans()):
        asst["content"] = draw(st.one_of(st.none(), text))
    if draw(st.booleans()):
        asst["reasoning_content"] = draw(text)
    results = [{"role": "tool", "tool_call_id": i, "content": draw(content)} for i in draw(st.permutations(ids))]
    return [asst, *results]


@st.composite
def tools(draw) -> list[dict[str, Any]]:
    names = draw(st.lists(ident, max_size=3, unique=True))
    out = []
    for name in names:
        fn: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            fn["description"] = draw(text)
        if draw(st.booleans()):
            props = draw(st.dictionaries(ident, st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "number", "description": "n"}]), max_size=3))
            fn["parameters"] = {"type": "object", "properties": props}
            if draw(st.integers(0, 2)) == 0:
                fn["strict"] = draw(st.booleans())
        out.append({"type": "function", "function": fn})
    return out


@st.composite
def chat_requests(draw) -> dict[str, Any]:
    """A Chat Completions body: mostly valid, sometimes breaking a conversion rule."""
    tl = draw(tools())
    names = [t["function"]["name"] for t in tl]
    msgs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["user", "user", "system", "assistant", "tools", "reminder"]))
        if kind == "user":
            msgs.append({"role": "user", "content": draw(content)})
        elif kind == "system":
            msgs.append({"role": "system", "content": draw(st.one_of(text, st.just("")))})
        elif kind == "reminder":
            msgs.append({"role": "latest_reminder", "content": draw(text)})
        elif kind == "assistant":
            m: dict[str, Any] = {"role": "assistant", "content": draw(text)}
            if draw(st.booleans()):
                m["reasoning_content"] = draw(text)
            msgs.append(m)
        else:
            msgs.extend(draw(tool_round(names)))
    if draw(st.integers(0, 5)) == 0:
        m = {"role": "assistant", "content": draw(text), "prefix": True}
        if draw(st.booleans()):
            m["reasoning_content"] = draw(text)
        msgs.append(m)
    body: dict[str, Any] = {"model": draw(st.sampled_from(["deepseek-v4-pro", "deepseek-v4-flash"])), "messages": msgs}
    if tl and draw(st.integers(0, 3)):
        body["tools"] = tl
    choice = draw(st.sampled_from([None, "auto", "none", "required", "named"]))
    if choice == "named":
        body["tool_choice"] = {"type": "function", "function": {"name": draw(st.sampled_from(names or ["f"]))}}
    elif choice:
        body["tool_choice"] = choice
    th = draw(st.sampled_from([None, "enabled", "disabled", "adaptive"]))
    if th:
        body["thinking"] = {"type": th}
    eff = draw(st.sampled_from([None, "none", "minimal", "low", "medium", "high", "xhigh", "max"]))
    if eff:
        body["reasoning_effort"] = eff
    rf = draw(st.sampled_from([None, "text", "json_object", "json_schema", "regex"]))
    if rf == "json_schema":
        schema = draw(
            st.one_of(
                st.dictionaries(st.text(max_size=4), json_value, max_size=3),
                st.builds(lambda p: {"type": "object", "properties": p}, st.dictionaries(ident, st.sampled_from([{"type": "string"}, {"type": "integer", "minimum": 0}]), max_size=3)),
            )
        )
        spec = {"name": "s", "schema": schema}
        if draw(st.booleans()):
            spec["strict"] = draw(st.booleans())
        body["response_format"] = {"type": "json_schema", "json_schema": spec}
    elif rf == "regex":
        body["response_format"] = {"type": "regex", "regex": draw(text)}
    elif rf:
        body["response_format"] = {"type": rf}
    if draw(st.booleans()):
        body["stop"] = draw(st.one_of(text, st.lists(text, max_size=3)))
    if draw(st.integers(0, 3)) == 0:
        body["max_tokens"] = draw(st.integers(0, 400000))
    if draw(st.integers(0, 3)) == 0:
        body["temperature"] = draw(st.floats(-0.5, 2.5))
    if draw(st.integers(0, 3)) == 0:
        body["top_p"] = draw(st.floats(0, 1.2))
    return body
