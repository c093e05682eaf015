"""The prompt cache (recipe/prompt_cache.py): a request that reuses an earlier prompt gets exactly the
ids, prompt and errors of a cold ``prepare`` — for random conversations and random edits at random
positions, in all three APIs — plus hits, bounds, memory accounting and thread safety."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import threading
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from messages_strategies import messages_requests
from recipe.conversation import AssistantMessage, SystemMessage, ToolCall, UserMessage
from recipe.errors import RequestError
from recipe.pipeline import prepare
from recipe.prompt_cache import PromptCache, _canonical, _plain, _same, _same_messages, default_prompt_cache
from responses_strategies import responses_requests
from strategies import chat_requests, text

REQUESTS = {"chat": chat_requests(), "responses": responses_requests(), "messages": messages_requests()}
#: Keys that hold the conversation, and the keys that only set options, per API.
SEQUENCE = {"chat": "messages", "responses": "input", "messages": "messages"}
OPTIONS = {
    "chat": ("model", "thinking", "reasoning_effort", "tool_choice", "response_format", "max_tokens", "stop"),
    "responses": ("model", "instructions", "reasoning", "tool_choice", "text", "max_output_tokens"),
    "messages": ("model", "system", "thinking", "output_config", "tool_choice", "max_tokens", "stop_sequences"),
}


def outcome(body: Any, api: str, cache: PromptCache | None, tokenizer: Any = None) -> tuple[Any, ...]:
    """What ``prepare`` gives: ids, prompt segments and message starts (and image sources), or the error."""
    try:
        prep = prepare(json.dumps(body, ensure_ascii=False), api, prompt_cache=cache, cache=None, tokenizer=tokenizer)
    except RequestError as err:
        return ("error", err.stage, err.message, err.param)
    return ("ok", prep.token_ids, prep.prompt.segments, prep.prompt.message_starts, prep.prompt.images)


def _drop_reasoning(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    item = dict(item)
    item.pop("reasoning_content", None)
    if isinstance(item.get("content"), list):
        item["content"] = [b for b in item["content"] if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))]
    return item


@st.composite
def edited(draw, api: str, body: dict[str, Any], requests: dict[str, Any] = REQUESTS) -> dict[str, Any]:
    """``body`` after one random edit at a random position (new parts drawn from ``requests``)."""
    body = copy.deepcopy(body)
    key = SEQUENCE[api]
    seq = body.get(key)
    other = draw(requests[api])
    other_seq = other.get(key) if isinstance(other.get(key), list) else []
    kinds = ["append", "append", "append", "options", "tools"]
    if isinstance(seq, list) and seq:
        kinds += ["change", "drop_reasoning", "truncate", "insert", "text"]
    kind = draw(st.sampled_from(kinds))
    event(f"edit: {kind}")
    if kind == "append":
        if isinstance(seq, list):
            body[key] = seq + other_seq
        else:
            body[key] = other.get(key, [])
    elif kind == "options":
        for name in OPTIONS[api]:
            if draw(st.booleans()):
                if name in other:
                    body[name] = other[name]
                else:
                    body.pop(name, None)
    elif kind == "tools":
        tools = body.get("tools")
        if isinstance(tools, list) and len(tools) > 1 and draw(st.booleans()):
            body["tools"] = draw(st.permutations(tools))
        elif "tools" in other:
            body["tools"] = other["tools"]
        else:
            body.pop("tools", None)
    else:
        i = draw(st.integers(0, len(seq) - 1))
        if kind == "change" and other_seq:
            seq[i] = draw(st.sampled_from(other_seq))
        elif kind == "drop_reasoning":
            if api == "responses" and isinstance(seq[i], dict) and seq[i].get("type") == "reasoning":
                del seq[i]
            else:
                seq[i] = _drop_reasoning(seq[i])
        elif kind == "truncate":
            del seq[i:]
        elif kind == "insert":
            seq.insert(i, {"role": "system", "content": draw(text)} if api != "responses" else {"role": "user", "content": draw(text)})
        elif kind == "text" and isinstance(seq[i], dict) and isinstance(seq[i].get("content"), str):
            seq[i] = {**seq[i], "content": seq[i]["content"] + draw(text)}
    return body


def _check_chain(data: Any, api: str, requests: dict[str, Any] = REQUESTS, tokenizer: Any = None) -> None:
    cache = PromptCache()
    body = data.draw(requests[api])
    for step in range(3):
        reused = outcome(body, api, cache, tokenizer)
        assert reused == outcome(body, api, None, tokenizer), f"step {step}"
        body = data.draw(edited(api, body, requests))
    stats = cache.stats()
    event(f"hits > 0: {stats.hits > 0}")


@settings(max_examples=120)
@given(st.data())
def test_chat_reuse_equals_cold_prepare(data):
    _check_chain(data, "chat")


@settings(max_examples=80)
@given(st.data())
def test_responses_reuse_equals_cold_prepare(data):
    _check_chain(data, "responses")


@settings(max_examples=60)
@given(st.data())
def test_messages_reuse_equals_cold_prepare(data):
    _check_chain(data, "messages")


@settings(max_examples=90)
@given(st.data(), st.sampled_from(["chat", "responses", "messages"]))
def test_v41_reuse_equals_cold_prepare(data, api):
    """DeepSeek-V4.1 (system messages in place, images, deferred tools, request-order calls) with a
    V4.1 vocabulary: the same property."""
    from v41_strategies import chat_v41_requests, messages_v41_requests, responses_v41_requests
    from v41_support import synthetic_v41_tokenizer

    requests = {"chat": chat_v41_requests(), "responses": responses_v41_requests(), "messages": messages_v41_requests()}
    _check_chain(data, api, requests, synthetic_v41_tokenizer())


# --- the agent loop -------------------------------------------------------------------------------


def _agent(turns: int, *, tools: bool = True, effort: str = "high") -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Fix the bug in 中文 code."}]
    for k in range(turns):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": f"f{k}.py", "n": k})}}
        msgs.append({"role": "assistant", "content": f"step {k}", "reasoning_content": f"think {k}", "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"line {k}\n" * (k + 1)})
    body: dict[str, Any] = {"model": "deepseek-v4-pro", "messages": msgs, "reasoning_effort": effort}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    return body


def test_the_next_agent_turn_reuses_all_but_the_last_round():
    cache = PromptCache()
    first = prepare(_agent(6), prompt_cache=cache)
    nxt = prepare(_agent(7), prompt_cache=cache)
    assert nxt.token_ids == prepare(_agent(7), prompt_cache=None).token_ids
    stats = cache.stats()
    assert (stats.hits, stats.misses) == (1, 1)
    # resumed after the 6th assistant turn: everything before its tool result came from the cache
    assert first.token_ids[: stats.reused_tokens] == nxt.token_ids[: stats.reused_tokens]
    assert stats.reused_tokens > 0.9 * len(first.token_ids)
    assert stats.entries == 1  # the first entry's checkpoints all moved to the second: it was dropped


def test_the_next_v41_agent_turn_reuses_all_but_the_last_round():
    """The same on DeepSeek-V4.1 (its vocabulary: the synthetic one), the system message in place."""
    from v41_support import synthetic_v41_tokenizer

    tok = synthetic_v41_tokenizer()
    cache = PromptCache()
    v41 = lambda turns: {**_agent(turns), "model": "deepseek-v4.1-flash"}  # noqa: E731
    first = prepare(v41(6), prompt_cache=cache, tokenizer=tok)
    nxt = prepare(v41(7), prompt_cache=cache, tokenizer=tok)
    assert nxt.encoding == "deepseek_v41" and nxt.prompt.text.count("<｜System｜>") == 1
    assert nxt.token_ids == prepare(v41(7), prompt_cache=None, tokenizer=tok).token_ids
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.entries) == (1, 1, 1)
    assert first.token_ids[: stats.reused_tokens] == nxt.token_ids[: stats.reused_tokens]
    assert stats.reused_tokens > 0.9 * len(first.token_ids)
    # images before the checkpoint: their sources come back with the resumed prompt, in order
    def with_images(turns: int) -> dict[str, Any]:
        body = v41(turns)
        msgs = body["messages"]
        msgs[1] = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                                               {"type": "text", "text": "this"}]}
        msgs.append({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}]})
        return body

    prepare(with_images(3), prompt_cache=cache, tokenizer=tok)
    resumed = prepare(with_images(4), prompt_cache=cache, tokenizer=tok)
    assert cache.stats().hits == 2
    cold = prepare(with_images(4), prompt_cache=None, tokenizer=tok)
    assert (resumed.prompt, resumed.token_ids) == (cold.prompt, cold.token_ids)
    assert [s.url for s in resumed.prompt.images] == ["https://example.com/a.png", "https://example.com/b.png"]


def test_a_long_agent_loop_stays_exact_and_holds_one_entry():
    cache = PromptCache()
    for turns in range(1, 14):  # more turns than an entry keeps separate id parts
        body = _agent(turns)
        assert prepare(body, prompt_cache=cache).token_ids == prepare(body, prompt_cache=None).token_ids
    stats = cache.stats()
    assert (stats.hits, stats.entries, stats.checkpoints) == (12, 1, 13)


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.update(reasoning_effort="max"),
        lambda b: b.update(tools=[{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "x": 1}}}]),
        lambda b: b["messages"][2].pop("reasoning_content"),
        lambda b: b["messages"][3].update(content="edited"),
        lambda b: b["messages"].insert(4, {"role": "system", "content": "late system text is hoisted"}),
        lambda b: b["messages"][0].update(content="other system"),
    ],
)
def test_a_change_before_the_end_falls_back_exactly(change):
    cache = PromptCache()
    prepare(_agent(6), prompt_cache=cache)
    body = _agent(7)
    change(body)
    assert prepare(body, prompt_cache=cache).token_ids == prepare(body, prompt_cache=None).token_ids


def test_a_prefix_assistant_continuation_after_cached_turns():
    cache = PromptCache()
    body = _agent(3, tools=False)
    prepare(body, prompt_cache=cache)
    body["messages"].append({"role": "user", "content": "go on"})
    body["messages"].append({"role": "assistant", "content": "Partial", "prefix": True})
    del body["messages"][2:8]  # prefix is refused with tool calls in history
    cold = prepare(body, prompt_cache=None)
    assert prepare(body, prompt_cache=cache).token_ids == cold.token_ids


def test_tool_choice_only_changes_the_generation_prompt():
    cache = PromptCache()
    body = _agent(4)
    prepare(body, prompt_cache=cache)
    body["tool_choice"] = "required"
    body["reasoning_effort"] = "none"  # required tool choice without thinking opens the call block
    assert prepare(body, prompt_cache=cache).token_ids == prepare(body, prompt_cache=None).token_ids


def test_the_default_prepare_uses_the_process_wide_cache():
    cache = default_prompt_cache()
    before = cache.stats().hits
    prepare(_agent(5, effort="low"))
    prepare(_agent(6, effort="low"))
    assert cache.stats().hits == before + 1


# --- bounds, memory, threads ----------------------------------------------------------------------


def test_memory_is_bounded_and_reported():
    small = PromptCache(max_bytes=200_000)
    for k in range(8):
        body = _agent(10)
        body["messages"][1]["content"] = f"conversation {k}"  # eight distinct conversations
        prepare(body, prompt_cache=small)
    stats = small.stats()
    assert 0 < stats.bytes <= 200_000 and stats.evictions > 0
    assert stats.entries == len(small) < 8
    small.clear()
    assert small.stats().bytes == 0 and len(small) == 0


def test_entry_bound():
    cache = PromptCache(max_entries=2)
    for k in range(5):
        body = _agent(3)
        body["messages"][1]["content"] = f"c{k}"
        prepare(body, prompt_cache=cache)
    assert len(cache) == 2 and cache.stats().evictions == 3


def test_threads_share_one_cache():
    cache = PromptCache(max_bytes=1_000_000)
    bodies = []
    for k in range(4):
        for n in range(2, 9):
            b = _agent(n)
            b["messages"][1]["content"] = f"thread conversation {k}"
            bodies.append(b)
    expected = [prepare(b, prompt_cache=None).token_ids for b in bodies]
    errors: list[str] = []

    def work(offset: int) -> None:
        for j in range(len(bodies)):
            i = (j + offset) % len(bodies)
            if prepare(bodies[i], prompt_cache=cache).token_ids != expected[i]:
                errors.append(f"body {i}")

    threads = [threading.Thread(target=work, args=(t * 5,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert cache.stats().hits > 0


# --- exact comparison -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("x", "x", True),
        (1, True, False),
        (1, 1.0, False),
        (0.0, -0.0, False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),  # key order is printed
        ({1: "x"}, {True: "x"}, False),
        ({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}, True),
        (float("nan"), float("nan"), True),  # printed alike (null)
        ([1, [2]], [1, [2]], True),
        (None, "", False),
        (UserMessage("x"), SystemMessage("x"), False),
        (AssistantMessage("a", None, (ToolCall("i", "f", "{}"),)), AssistantMessage("a", None, (ToolCall("i", "f", "{}"),)), True),
        (AssistantMessage("a", None, (ToolCall("i", "f", "{}"),)), AssistantMessage("a", "", (ToolCall("i", "f", "{}"),)), False),
        (object(), object(), False),
    ],
)
def test_same_is_exact(a, b, same):
    assert _same(a, b) is same


def test_render_context_json_has_every_field_and_refuses_foreign_values():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Hidden:
        name: str
        _private: int  # orjson alone would leave this out

    assert _canonical(Hidden("a", 1)) != _canonical(Hidden("a", 2))

    class Sub(str):
        pass

    for foreign in (Sub("x"), datetime.date(2020, 1, 1), object()):
        with pytest.raises(TypeError):
            _canonical([foreign])


def test_message_types_compare_with_one_equality_and_others_are_walked():
    import typing

    from recipe import conversation

    for cls in typing.get_args(conversation.Message):
        # a field of another type falls back to the walk (slower, still exact): only SystemMessage's
        # V4.1 tool additions (tool schemas) do
        assert _plain(cls) is (cls is not SystemMessage), cls
    tool = lambda v: conversation.ToolDefinition("t", None, {"type": "object", "maximum": v})  # noqa: E731
    with_tool = lambda v: (UserMessage("u"), SystemMessage("s", (), (tool(v),)), UserMessage("w"))  # noqa: E731
    assert _same_messages(with_tool(1), with_tool(1)) and not _same_messages(with_tool(1), with_tool(1.0))
    assert not _same_messages(with_tool(1), (*with_tool(1)[:2], UserMessage("x")))

    @dataclasses.dataclass(frozen=True)
    class Scored:
        text: str
        score: float

    assert not _plain(Scored) and not _plain(conversation.ToolDefinition)
    assert not _same_messages((Scored("a", 1.0),), (Scored("a", 1),))  # 1.0 == 1, yet printed differently
    assert _same_messages((Scored("a", 1.0),), (Scored("a", 1.0),))
