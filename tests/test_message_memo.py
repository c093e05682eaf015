"""The message memo (recipe/api/reuse.py): a request whose messages repeat an earlier request's reuses
their validated wire models and conversions, and gets exactly what a cold ``prepare`` gives — the
request model, the Conversation, the prompt, the ids, or the error — for random histories and random
edits anywhere in them (a changed value, a value of another JSON type, keys in another order, a
message inserted, dropped or moved), not only appends."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from recipe.api.reuse import MessageMemo, same_json
from recipe.errors import RequestError
from recipe.pipeline import prepare
from recipe.prompt_cache import PromptCache
from strategies import chat_requests, content, json_value, text, tool_round

# --- exact equality of JSON values ------------------------------------------------------------------

small_scalar = st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, -1, 2]), st.sampled_from([0.0, -0.0, 1.0, 2.5]),
                         st.sampled_from(["", "a", "1", "true"]))
small_json = st.recursive(small_scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
                          max_leaves=6)


@st.composite
def twisted(draw, value: Any) -> Any:
    """``value`` with one change that ``==`` may not see: a number or boolean of another type, keys
    in another order, a float's sign."""
    if isinstance(value, dict) and value:
        if draw(st.booleans()) and len(value) > 1:
            keys = draw(st.permutations(list(value)))
            return {k: value[k] for k in keys}
        k = draw(st.sampled_from(sorted(value)))
        return {**value, k: draw(twisted(value[k]))}
    if isinstance(value, list) and value:
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], draw(twisted(value[i])), *value[i + 1:]]
    if type(value) is bool:
        return int(value) if draw(st.booleans()) else float(value)
    if type(value) is int:
        return float(value) if draw(st.booleans()) or value not in (0, 1) else bool(value)
    if type(value) is float:
        return -value if value == 0 else (int(value) if value.is_integer() else value)
    return value


@settings(max_examples=300)
@given(st.data())
def test_same_json_is_equality_of_the_json_bytes(data):
    a = data.draw(small_json)
    b = data.draw(st.one_of(small_json, twisted(a), st.just(copy.deepcopy(a))))
    assert same_json(a, b) == (orjson.dumps(a) == orjson.dumps(b)), (a, b)


def test_same_json_examples():
    assert same_json({"a": [1, {"b": "x"}]}, {"a": [1, {"b": "x"}]})
    assert not same_json({"a": 1}, {"a": True})
    assert not same_json({"a": 1}, {"a": 1.0})
    assert not same_json([0.0], [-0.0])
    assert not same_json({"a": "x", "b": None}, {"b": None, "a": "x"})
    assert math.copysign(1, -0.0) < 0 and same_json(-0.0, -0.0)


# --- cached = cold, for random edits anywhere ----------------------------------------------------------


@st.composite
def histories(draw) -> dict[str, Any]:
    """A Chat body with a longer history than :func:`chat_requests` draws: several tool rounds,
    content parts, prefix flags and stray keys of every JSON type."""
    body = draw(chat_requests())
    names = [t["function"]["name"] for t in body.get("tools") or []]
    msgs = body["messages"]
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["round", "round", "user", "assistant", "system"]))
        if kind == "round":
            msgs[len(msgs):] = draw(tool_round(names))
        elif kind == "user":
            msgs.append({"role": "user", "content": draw(content)})
        elif kind == "assistant":
            msgs.append({"role": "assistant", "content": draw(text), "reasoning_content": draw(text)})
        else:
            msgs.append({"role": "system", "content": draw(text)})
    for i, m in enumerate(msgs):  # values of other JSON types than strings, which an edit can twist
        if m["role"] == "assistant" and "prefix" not in m and draw(st.booleans()):
            msgs[i] = {**m, "prefix": False}
        elif draw(st.integers(0, 3)) == 0:
            msgs[i] = {**m, draw(st.sampled_from(["name", "extra"])): draw(st.one_of(json_value, small_json))}
    return body


@st.composite
def edit(draw, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` after one random edit of its messages, anywhere."""
    body = copy.deepcopy(body)
    msgs = body["messages"]
    kinds = ["append", "append_round"]
    if msgs:
        kinds += ["text", "twist", "reorder", "parts", "drop", "insert", "move", "replace", "break"]
    kind = draw(st.sampled_from(kinds))
    event(f"edit: {kind}")
    # anywhere, but more often past the first two messages (an edit there keeps an earlier prefix)
    i = draw(st.one_of(st.integers(0, len(msgs) - 1), st.integers(min(2, len(msgs) - 1), len(msgs) - 1))) if msgs else 0
    if kind == "append":
        msgs.append({"role": draw(st.sampled_from(["user", "assistant", "system"])), "content": draw(content)})
    elif kind == "append_round":
        msgs[len(msgs):] = draw(tool_round([t["function"]["name"] for t in body.get("tools") or []]))
    elif kind == "text":
        m = msgs[i]
        if isinstance(m.get("content"), str):
            m["content"] += draw(text.filter(bool))
        elif m.get("tool_calls"):
            m["tool_calls"][0]["function"]["arguments"] += " "
        else:
            m["content"] = draw(text)
    elif kind == "twist":  # a value ``==`` cannot tell from the earlier one (False -> 0, 1 -> 1.0, keys reordered)
        scalars = [(j, k) for j, m in enumerate(msgs) for k, v in m.items() if type(v) in (bool, int, float)]
        if scalars and draw(st.integers(0, 3)):
            j, k = draw(st.sampled_from(scalars))
            msgs[j][k] = draw(twisted(msgs[j][k]))
        else:
            msgs[i] = draw(twisted(msgs[i]))
    elif kind == "reorder":
        msgs[i] = {k: msgs[i][k] for k in draw(st.permutations(list(msgs[i])))}
        if msgs[i].get("tool_calls"):
            call = msgs[i]["tool_calls"][0]
            msgs[i]["tool_calls"][0] = {k: call[k] for k in reversed(list(call))}
    elif kind == "parts":
        m = msgs[i]
        if isinstance(m.get("content"), str):
            m["content"] = [{"type": "text", "text": m["content"]}]
        else:
            m["content"] = draw(text)
    elif kind == "drop":
        del msgs[i]
    elif kind == "insert":
        msgs.insert(i, {"role": draw(st.sampled_from(["user", "system", "latest_reminder"])), "content": draw(text)})
    elif kind == "move":
        msgs.append(msgs.pop(i))
    elif kind == "replace":
        msgs[i] = {"role": "user", "content": draw(content)}
    else:  # a value the wire model refuses, or a conversion rule broken
        msgs[i] = draw(st.sampled_from([{**msgs[i], "role": "robot"}, {**msgs[i], "content": 7},
                                        {**msgs[i], "tool_call_id": "nobody"}, {"role": "tool", "content": "x"}]))
    return body


def _outcome(body: Any, cache: PromptCache | None, model: str | None = None) -> tuple[Any, ...]:
    body = body if model is None else {**body, "model": model}
    try:
        prep = prepare(json.dumps(body, ensure_ascii=False), "chat", prompt_cache=cache, cache=None)
    except RequestError as err:
        return ("error", err.stage, err.message, err.param, err.status)
    ids = prep.token_ids if prep.missing_special is None else None
    return ("ok", repr(prep.request), repr(prep.conversation), prep.prompt.segments, ids, prep.notes)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_reused_messages_give_what_a_cold_request_gives(data):
    cache = PromptCache()
    body = data.draw(histories())
    for step in range(4):
        assert _outcome(body, cache) == _outcome(body, None), f"step {step}"
        body = data.draw(edit(body))
    event(f"messages reused: {cache.stats().reused_messages > 0}")


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_reuse_across_model_families_is_exact(data):
    """Messages converted for DeepSeek-V4 are not reused for DeepSeek-V4.1 (other conversion rules:
    images become image tokens) and the other way round."""
    from v41_support import synthetic_v41_tokenizer

    tok = synthetic_v41_tokenizer()
    cache = PromptCache()
    body = data.draw(histories())
    models = data.draw(st.lists(st.sampled_from(["deepseek-v4-pro", "deepseek-v4.1-flash"]), min_size=2, max_size=3))
    for model in models:
        b = {**body, "model": model}
        got = prepare(json.dumps(b), "chat", prompt_cache=cache, cache=None, tokenizer=tok) if _valid(b, tok) else None
        cold = prepare(json.dumps(b), "chat", prompt_cache=None, cache=None, tokenizer=tok) if got is not None else None
        if got is not None:
            assert repr(got.conversation) == repr(cold.conversation)
            assert got.token_ids == cold.token_ids
        body = data.draw(edit(body))


def _valid(body: dict[str, Any], tok: Any) -> bool:
    try:
        prepare(json.dumps(body), "chat", prompt_cache=None, cache=None, tokenizer=tok)
    except RequestError:
        return False
    return True


# --- the agent loop, bounds -------------------------------------------------------------------------


def _agent(turns: int) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Fix it."}]
    for k in range(turns):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "read", "arguments": json.dumps({"n": k})}}
        msgs.append({"role": "assistant", "content": "", "reasoning_content": f"think {k}", "tool_calls": [call],
                     "prefix": False})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"line {k}\n" * (k + 1)})
    return {"model": "deepseek-v4-pro", "messages": msgs,
            "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]}


def test_the_agent_loop_validates_and_converts_only_what_it_added():
    cache = PromptCache()
    for turns in range(1, 8):
        body = _agent(turns)
        assert _outcome(body, cache) == _outcome(body, None)
    # each request after the first reused every message of the one before it
    assert cache.stats().reused_messages == sum(2 + 2 * (t - 1) for t in range(2, 8))
    assert len(cache.messages._heads) == 1  # the loop's earlier requests were each replaced by the next


@pytest.mark.parametrize("change", [
    lambda m: m[2].update(prefix=0),  # == False, but pydantic refuses 0 for a bool: the same error as cold
    lambda m: m[2].update(prefix=0.0),
    lambda m: m[2]["tool_calls"][0]["function"].update(arguments={"n": 0}),  # an object, not a string
    lambda m: m[3].update(content=["line 0\n"]),  # a list of strings, not parts
    lambda m: m[3].update(tool_call_id=None),
])
def test_an_earlier_message_changed_to_an_equal_looking_value_is_validated_again(change):
    cache = PromptCache()
    prepare(json.dumps(_agent(3)), prompt_cache=cache)
    body = _agent(4)
    change(body["messages"])
    assert _outcome(body, cache) == _outcome(body, None)
    assert _outcome(body, cache)[0] == "error"


def test_a_dict_body_is_not_memoised_and_the_memo_is_bounded():
    cache = PromptCache()
    prepare(_agent(3), prompt_cache=cache)  # a dict: its values may be any Python objects
    assert cache.stats().message_bytes == 0
    memo = MessageMemo(max_bytes=8000)  # room for two of these conversations
    small = PromptCache()
    small.messages = memo
    for k in range(6):
        body = _agent(2)
        body["messages"][1]["content"] = f"conversation {k}"  # another opening: another head
        assert _outcome(body, small) == _outcome(body, None)
        assert memo.bytes <= 8000
    assert len(memo._heads) == 2  # the least recently used were dropped
    memo.clear()
    assert memo.bytes == 0 and not memo._heads


@pytest.mark.parametrize("where", [-1, 3])
def test_nesting_past_the_limit_in_a_new_or_edited_message_is_the_cold_error(where):
    """Only the messages not seen before are walked for the nesting limit: a too-deep value in an
    appended message, or in an earlier one edited, is refused as a cold request refuses it."""
    cache = PromptCache()
    prepare(json.dumps(_agent(3)), prompt_cache=cache)
    body = _agent(4)
    deep: Any = "x"
    for _ in range(130):
        deep = [deep]
    body["messages"][where] = {**body["messages"][where], "extra": deep}
    got = _outcome(body, cache)
    assert got == _outcome(body, None)
    assert got[:2] == ("error", "parse") and "recursion limit exceeded" in got[2]
    within: Any = "x"
    for _ in range(124):  # the body, the message list and the message hold these: 127 levels
        within = [within]
    ok = _agent(4)
    ok["messages"][where] = {**ok["messages"][where], "extra": within}
    assert _outcome(ok, cache) == _outcome(ok, None) and _outcome(ok, cache)[0] == "ok"
