"""DeepSeek V3 / R1 / V3.1 / V3.2 through the three APIs.

Requests: a Chat, Responses and Messages request render exactly as their equivalent messages
(written out here by hand) through the generation's published template (transformers' jinja
renderer on the template string) or DeepSeek-V3.2's encoder; ids equal HF ``tokenizers``' encode
of that text (no special-token spellings in these messages). Outputs: the official ``openai`` and
``anthropic`` SDKs consume every stream and response over real HTTP, and what they accumulate
from the stream equals the non-streamed response.
"""

from __future__ import annotations

import copy
import json

import pytest
from sdk_server import openai_view, serve
from v3x_support import hf_v3, jinja_render

import recipe
from recipe.encodings.deepseek_v3_2.reference import encode_messages
from recipe.errors import RequestError
from recipe.options import Options
from recipe.tokenizer import load_v3_tokenizer

pytest.importorskip("transformers")

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ARGS = '{"city": "Paris"}'

#: family model name -> (template revision of the API path, thinking switch?)
MODELS = {"deepseek-v3": ("V3-0324", "never"), "deepseek-r1": ("R1-0528", "always"),
          "deepseek-v3.1": ("V3.2-Exp", "switch"), "deepseek-v3.2": ("V3.2", "switch")}


def _scenario_weather(thinking: bool):
    chat = {"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
        {"role": "assistant", "content": "18 °C."},
        {"role": "user", "content": "And Tokyo?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": WEATHER}}],
        "thinking": {"type": "enabled" if thinking else "disabled"}}
    responses = {"instructions": "You are terse.", "input": [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": ARGS},
        {"type": "function_call_output", "call_id": "c1", "output": "18C"},
        {"role": "assistant", "content": "18 °C."},
        {"role": "user", "content": "And Tokyo?"}],
        "tools": [{"type": "function", "name": "get_weather", "description": "Weather", "parameters": WEATHER, "strict": False}],
        "reasoning": {"effort": "high" if thinking else "none"}}
    messages = {"system": "You are terse.", "max_tokens": 100, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "18C"}]},
        {"role": "assistant", "content": "18 °C."},
        {"role": "user", "content": "And Tokyo?"}],
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER}],
        "thinking": {"type": "enabled", "budget_tokens": 1024} if thinking else {"type": "disabled"}}
    equivalent = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
        {"role": "assistant", "content": "18 °C."},
        {"role": "user", "content": "And Tokyo?"}]
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": WEATHER}}]
    return {"chat": chat, "responses": responses, "messages": messages}, equivalent, tools


def _scenario_pending(thinking: bool):
    reqs, eq, tools = _scenario_weather(thinking)
    reqs["chat"]["messages"] = reqs["chat"]["messages"][:4]
    reqs["responses"]["input"] = reqs["responses"]["input"][:3]
    reqs["messages"]["messages"] = reqs["messages"]["messages"][:3]
    return reqs, eq[:4], tools


def _scenario_plain(thinking: bool):
    chat = {"messages": [{"role": "user", "content": "Hi <think> there"}], "thinking": {"type": "enabled" if thinking else "disabled"}}
    responses = {"input": "Hi <think> there", "reasoning": {"effort": "high" if thinking else "none"}}
    messages = {"max_tokens": 50, "messages": [{"role": "user", "content": "Hi <think> there"}],
                "thinking": {"type": "enabled", "budget_tokens": 1024} if thinking else {"type": "disabled"}}
    return {"chat": chat, "responses": responses, "messages": messages}, [{"role": "user", "content": "Hi <think> there"}], None


SCENARIOS = {"weather": _scenario_weather, "pending": _scenario_pending, "plain": _scenario_plain}


def _expected(model: str, thinking: bool, eq: list, tools: list | None) -> str:
    revision, mode = MODELS[model]
    think = {"never": False, "always": True}.get(mode, thinking)
    if revision == "V3.2":
        msgs = copy.deepcopy(eq)
        if tools:
            if msgs[0]["role"] == "system":
                msgs[0]["tools"] = tools
            else:
                msgs.insert(0, {"role": "system", "content": "", "tools": tools})
        return encode_messages(msgs, "thinking" if think else "chat")
    return jinja_render(revision, eq, tools=tools, add_generation_prompt=True, thinking=think)


@pytest.mark.parametrize("thinking", [False, True])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("model", list(MODELS))
def test_request_renders_as_its_messages_through_the_template(model, api, scenario, thinking):
    reqs, eq, tools = SCENARIOS[scenario](thinking)
    body = {"model": model, **reqs[api]}
    prep = recipe.prepare(body, api)
    want = _expected(model, thinking, eq, tools)
    assert prep.prompt.text == want
    plain = want.replace("<think> there", "")  # the user's "<think>" is text; HF would make it a token
    if plain == want:
        assert prep.token_ids == hf_v3().encode(want, add_special_tokens=False).ids
    tok = load_v3_tokenizer()
    assert tok.decode(prep.token_ids) == want
    assert [tok.special_name(i) for i in prep.token_ids if tok.is_special(i)] == [
        s.text for s in prep.prompt.segments if type(s).__name__ == "Special"]


def test_thinking_is_the_family_s():
    body = {"messages": [{"role": "user", "content": "q"}], "temperature": 0.3, "reasoning_effort": "high"}
    v3 = recipe.prepare({"model": "deepseek-v3", **body}, "chat")
    assert not v3.conversation.thinking and v3.parsing.thinking_stage is None
    assert v3.conversation.sampling.temperature == pytest.approx(0.3)  # not forced to 1.0: V3 does not think
    r1 = recipe.prepare({"model": "deepseek-r1", **body, "thinking": {"type": "disabled"}}, "chat")
    assert r1.conversation.thinking and r1.parsing.thinking_stage == "reasoning"  # R1 always reasons
    v31 = recipe.prepare({"model": "deepseek-v3.1", **body}, "chat")
    assert v31.prompt.text.endswith("<｜Assistant｜><think>") and v31.parsing.thinking_stage == "reasoning"


def test_v31_after_tool_results_the_output_is_not_reasoning():
    reqs, _, _ = _scenario_pending(True)
    prep = recipe.prepare({"model": "deepseek-v3.1", **reqs["chat"]}, "chat")
    assert prep.prompt.text.endswith("<｜tool▁output▁end｜>")
    assert prep.parsing.thinking_stage is None


def test_chat_prefix_continues_the_turn():
    msgs = [{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Soft rain ", "prefix": True}]
    for model, tail in [("deepseek-v3", "<｜Assistant｜>Soft rain "), ("deepseek-r1", "<｜Assistant｜>Soft rain "),
                        ("deepseek-v3.1", "<｜Assistant｜><think>Soft rain "), ("deepseek-v3.2", "<｜Assistant｜><think></think>Soft rain ")]:
        prep = recipe.prepare({"model": model, "messages": msgs, "thinking": {"type": "enabled"}}, "chat")
        assert prep.prompt.text.endswith(tail), (model, prep.prompt.text)
    v32 = recipe.prepare({"model": "deepseek-v3.2", "thinking": {"type": "enabled"},
                          "messages": [msgs[0], {"role": "assistant", "content": "", "reasoning_content": "Let me", "prefix": True}]}, "chat")
    assert v32.prompt.text.endswith("<｜Assistant｜><think>Let me") and v32.parsing.thinking_stage == "reasoning_continuation"


def test_v32_response_format_and_tools_without_system():
    body = {"model": "deepseek-v3.2", "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": "Capital of Italy? json"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "ans", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}}
    prep = recipe.prepare(body, "chat")
    want = encode_messages([{"role": "system", "content": "", "response_format": {"type": "json_schema", "json_schema": {
        "name": "ans", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}}, body["messages"][0]], "chat")
    assert prep.prompt.text == want


def test_v32_rejects_a_trailing_assistant_and_v4_roles():
    with pytest.raises(RequestError, match="V3.2"):
        recipe.prepare({"model": "deepseek-v3.2", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "chat")
    with pytest.raises(RequestError, match="latest_reminder"):
        recipe.prepare({"model": "deepseek-v3.1", "messages": [{"role": "user", "content": "q"}, {"role": "latest_reminder", "content": "r"}]}, "chat")


def test_tool_results_follow_the_call_order():
    calls = [{"id": i, "type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": c})}}
             for i, c in (("a", "Paris"), ("b", "Tokyo"))]
    body = {"model": "deepseek-v3", "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": calls},
                         {"role": "tool", "tool_call_id": "b", "content": "TOKYO"}, {"role": "tool", "tool_call_id": "a", "content": "PARIS"}]}
    text = recipe.prepare(body, "chat").prompt.text
    assert text.index("PARIS") < text.index("TOKYO")


def test_deepseek_chat_and_reasoner_point_at_the_generation_served():
    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "q"}]}
    assert recipe.prepare(body, "chat").encoding == "deepseek_v4"  # the default aliases: V4-Flash
    opts = Options().with_alias("deepseek-chat", "deepseek-v3.2", thinking=False).with_alias(
        "deepseek-reasoner", "deepseek-v3.2", thinking=True)
    chat = recipe.prepare(body, "chat", options=opts)
    reasoner = recipe.prepare({**body, "model": "deepseek-reasoner"}, "chat", options=opts)
    assert chat.encoding == reasoner.encoding == "deepseek_v3_2"
    assert chat.prompt.text.endswith("<｜Assistant｜></think>") and reasoner.prompt.text.endswith("<｜Assistant｜><think>")
    assert chat.token_ids[:-1] == reasoner.token_ids[:-1] and (chat.token_ids[-1], reasoner.token_ids[-1]) == (128799, 128798)


# ---------------------------------------------------------------------------------------------
# Outputs through the official SDKs
# ---------------------------------------------------------------------------------------------

TC, TE, SEP, TCS, TCE, EOS = ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "<｜tool▁calls▁begin｜>",
                              "<｜tool▁calls▁end｜>", "<｜end▁of▁sentence｜>")


def _calls(model: str, pairs: list[tuple[str, str]], cut: bool = False) -> str:
    if model == "deepseek-v3.2":
        inv = [f'<｜DSML｜invoke name="{n}">\n<｜DSML｜parameter name="city" string="true">{json.loads(a)["city"]}</｜DSML｜parameter>\n</｜DSML｜invoke>'
               for n, a in pairs]
        text = "\n\n<｜DSML｜function_calls>\n" + "\n".join(inv) + "\n</｜DSML｜function_calls>"
    elif model == "deepseek-v3.1":
        text = TCS + "".join(f"{TC}{n}{SEP}{a}{TE}" for n, a in pairs) + TCE
    else:
        text = TCS + "\n".join(f"{TC}function{SEP}{n}\n```json\n{a}\n```{TE}" for n, a in pairs) + TCE
    return text[: len(text) * 2 // 3] if cut else text + EOS


def _output(model: str, scenario: str, thinking: bool) -> tuple[str, str]:
    thinking = _thinking_of(model, thinking)
    think = "<think>\nChecking.\n</think>\n\n" if model == "deepseek-r1" else ("Checking.</think>" if thinking else "")
    two = [("get_weather", '{"city": "Paris"}'), ("get_weather", '{"city": "Tokyo"}')]
    return {
        "answer": (think + "It is 18 °C. 🌦" + EOS, "stop"),
        "calls": (think + "Let me look." + _calls(model, two), "stop"),
        "cut": (think + _calls(model, two[:1], cut=True), "length"),
    }[scenario]


OUT_SCENARIOS = ["answer", "calls", "cut"]


def _model(api: str, body: dict, headers) -> tuple[list[int], str, list | None]:
    model, scenario = body["model"], headers["x-scenario"]
    thinking = headers.get("x-thinking") == "1"
    text, fin = _output(model, scenario, thinking)
    ids = load_v3_tokenizer().encode_with_special_tokens(text)
    lps = [(-0.5, [(i, -0.5)]) for i in ids] if body.get("logprobs") else None
    return ids, fin, lps


@pytest.fixture(scope="module")
def server():
    with serve(_model, seed=3, created=1700000000, prompt_tokens=20, cached_tokens=5) as s:
        yield s


def _thinking_of(model: str, thinking: bool) -> bool:
    return {"never": False, "always": True}.get(MODELS[model][1], thinking)


@pytest.mark.parametrize("thinking", [False, True])
@pytest.mark.parametrize("scenario", OUT_SCENARIOS)
@pytest.mark.parametrize("model", list(MODELS))
def test_chat_sdk(server, model, scenario, thinking):
    openai = pytest.importorskip("openai")
    from openai.lib.streaming.chat import ChatCompletionStreamState

    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=20)
    reqs, _, _ = _scenario_weather(thinking)
    req = {"model": model, **reqs["chat"], "logprobs": True, "top_logprobs": 1}
    req["extra_body"] = {"thinking": req.pop("thinking")}
    hdr = {"x-scenario": scenario, "x-thinking": "1" if thinking else "0"}
    full = client.chat.completions.create(**req, extra_headers=hdr)
    want = openai_view(full)
    want.pop("recipe", None)
    state = ChatCompletionStreamState()
    for chunk in client.chat.completions.create(**req, extra_headers=hdr, stream=True, stream_options={"include_usage": True}):
        state.handle_chunk(chunk)
    got = openai_view(state.current_completion_snapshot)
    got.pop("recipe", None)
    assert got["choices"][0]["message"] == want["choices"][0]["message"]
    assert got["choices"][0]["finish_reason"] == want["choices"][0]["finish_reason"]
    msg = want["choices"][0]["message"]
    reasons = _thinking_of(model, thinking)
    assert (msg.get("reasoning_content") == "Checking.") == reasons
    if scenario == "answer":
        assert msg["content"] == "It is 18 °C. 🌦" and want["choices"][0]["finish_reason"] == "stop"
        assert want["choices"][0]["logprobs"]["content"]
    elif scenario == "calls":
        assert msg["content"] == "Let me look."
        assert [json.loads(c["function"]["arguments"]) for c in msg["tool_calls"]] == [{"city": "Paris"}, {"city": "Tokyo"}]
        assert want["choices"][0]["finish_reason"] == "tool_calls"
    else:
        assert want["choices"][0]["finish_reason"] == "length"
        for c in msg.get("tool_calls") or ():
            assert isinstance(json.loads(c["function"]["arguments"]), dict)
    assert full.usage.prompt_tokens == 20


@pytest.mark.parametrize("scenario", OUT_SCENARIOS)
@pytest.mark.parametrize("model", list(MODELS))
def test_responses_sdk(server, model, scenario):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=20)
    reqs, _, _ = _scenario_weather(True)
    req = {"model": model, **reqs["responses"]}
    hdr = {"x-scenario": scenario, "x-thinking": "1"}
    full = client.responses.create(**req, extra_headers=hdr)
    events = list(client.responses.create(**req, extra_headers=hdr, stream=True))
    assert all(type(e).__name__.startswith("Response") for e in events)
    final = openai_view(events[-1].response)
    want = openai_view(full)
    for d in (final, want):
        d.pop("completed_at", None)
    assert final == want
    kinds = [o["type"] for o in want["output"]]
    if scenario == "calls":
        assert kinds.count("function_call") == 2
    if _thinking_of(model, True):
        assert "reasoning" in kinds


@pytest.mark.parametrize("scenario", OUT_SCENARIOS)
@pytest.mark.parametrize("model", list(MODELS))
def test_messages_sdk(server, model, scenario):
    anthropic = pytest.importorskip("anthropic")
    from anthropic.lib.streaming._messages import accumulate_event

    client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=20)
    reqs, _, _ = _scenario_weather(True)
    req = {"model": model, **reqs["messages"]}
    hdr = {"x-scenario": scenario, "x-thinking": "1"}
    full = client.messages.create(**req, extra_headers=hdr)
    want = full.model_dump(mode="json", exclude_none=True)
    want.pop("recipe", None)
    snap, bufs = None, {}
    for ev in client.messages.create(**req, extra_headers=hdr, stream=True):
        snap = accumulate_event(event=ev, current_snapshot=snap, json_bufs=bufs)
    got = snap.model_dump(mode="json", exclude_none=True)
    got.pop("recipe", None)
    for d in (got, want):
        for b in d["content"]:
            b.pop("parsed_output", None)
    assert got == want
    types = [b["type"] for b in want["content"]]
    if scenario == "calls":
        assert types.count("tool_use") == 2 and want["stop_reason"] == "tool_use"
    if scenario == "cut":
        assert want["stop_reason"] == "max_tokens"


# ---------------------------------------------------------------------------------------------
# Special-token injection through the APIs: every added token of the V3 vocabulary, every field
# ---------------------------------------------------------------------------------------------

V3_TOK = load_v3_tokenizer()
ALL_V3_SPECIALS = "".join(sorted(V3_TOK.special_tokens))  # all 818 added tokens


def _hostile(model: str, t: str, thinking: bool) -> dict:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "sys " + t},
            {"role": "user", "content": [{"type": "text", "text": "user " + t}, {"type": "text", "text": t}]},
            {"role": "assistant", "content": "answer " + t, "reasoning_content": "reasoning " + t,
             "tool_calls": [{"id": "c1" + t, "type": "function", "function": {"name": "f" + t, "arguments": json.dumps({t: t, "n": [t, 1]})}},
                            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": json.dumps({"a": t})}}]},
            {"role": "tool", "tool_call_id": "c1" + t, "content": "result " + t},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": t}]},
            {"role": "user", "content": t},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "description": "desc " + t,
                                                     "parameters": {"type": "object", "properties": {t: {"type": "string", "description": t}}}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"title": t}}},
        "thinking": {"type": "enabled" if thinking else "disabled"},
    }


@pytest.mark.parametrize("thinking", [True, False])
@pytest.mark.parametrize("model", list(MODELS))
def test_every_added_token_in_every_api_field_stays_text(model, thinking):
    hostile = recipe.prepare(_hostile(model, ALL_V3_SPECIALS, thinking), "chat")
    plain = recipe.prepare(_hostile(model, "x", thinking), "chat")
    assert hostile.prompt.text.count("<｜tool▁sep｜>") > plain.prompt.text.count("<｜tool▁sep｜>")
    specials = [i for i in hostile.token_ids if V3_TOK.is_special(i)]
    assert specials == [i for i in plain.token_ids if V3_TOK.is_special(i)]
    assert specials == [V3_TOK.special_id(s.text) for s in hostile.prompt.segments if type(s).__name__ == "Special"]
    assert V3_TOK.decode(hostile.token_ids) == hostile.prompt.text


def test_each_added_token_alone_in_user_text():
    for model in MODELS:
        base = recipe.prepare({"model": model, "messages": [{"role": "user", "content": "x"}]}, "chat").token_ids
        want = [i for i in base if V3_TOK.is_special(i)]
        for spelling in V3_TOK.special_tokens:
            ids = recipe.prepare({"model": model, "messages": [{"role": "user", "content": spelling}]}, "chat").token_ids
            assert [i for i in ids if V3_TOK.is_special(i)] == want, (model, spelling)


def test_v32_history_arguments_that_are_not_an_object():
    calls = [{"id": "a", "type": "function", "function": {"name": "f", "arguments": ""}},
             {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]
    body = {"model": "deepseek-v3.2", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": calls},
                         {"role": "tool", "tool_call_id": "a", "content": "1"}, {"role": "tool", "tool_call_id": "b", "content": "2"}]}
    text = recipe.prepare(body, "chat").prompt.text
    assert '<｜DSML｜invoke name="f">\n\n</｜DSML｜invoke>' in text  # {} : no parameter lines
    assert '<｜DSML｜parameter name="arguments" string="true">{oops</｜DSML｜parameter>' in text


def _hostile_responses(model: str, t: str) -> dict:
    return {
        "model": model,
        "instructions": "inst " + t,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "user " + t}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": json.dumps({t: t})},
            {"type": "function_call_output", "call_id": "c1", "output": "result " + t},
            {"role": "assistant", "content": [{"type": "output_text", "text": "answer " + t}]},
            {"role": "user", "content": t},
        ],
        "tools": [{"type": "function", "name": "f", "description": "desc " + t,
                   "parameters": {"type": "object", "properties": {t: {"type": "string", "description": t}}}}],
        "reasoning": {"effort": "high"},
    }


def _hostile_messages(model: str, t: str) -> dict:
    return {
        "model": model,
        "max_tokens": 100,
        "system": "sys " + t,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "user " + t}]},
            {"role": "assistant", "content": [{"type": "text", "text": "answer " + t},
                                              {"type": "tool_use", "id": "c1", "name": "f", "input": {t: t, "n": [t]}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": t}]},
                                         {"type": "text", "text": t}]},
        ],
        "tools": [{"name": "f", "description": "desc " + t,
                   "input_schema": {"type": "object", "properties": {t: {"type": "string", "description": t}}}}],
    }


@pytest.mark.parametrize("api,build", [("responses", _hostile_responses), ("messages", _hostile_messages)])
@pytest.mark.parametrize("model", list(MODELS))
def test_every_added_token_in_responses_and_messages_fields_stays_text(model, api, build):
    """Every added token of the V3 vocabulary in every text field of a Responses / Messages request
    is ordinary text: the special ids are exactly the template's, as for the same request with plain text."""
    hostile = recipe.prepare(build(model, ALL_V3_SPECIALS), api)
    plain = recipe.prepare(build(model, "x"), api)
    assert hostile.prompt.text.count("<｜tool▁sep｜>") > plain.prompt.text.count("<｜tool▁sep｜>")
    specials = [i for i in hostile.token_ids if V3_TOK.is_special(i)]
    assert specials == [i for i in plain.token_ids if V3_TOK.is_special(i)]
    assert specials == [V3_TOK.special_id(s.text) for s in hostile.prompt.segments if type(s).__name__ == "Special"]
    assert V3_TOK.decode(hostile.token_ids) == hostile.prompt.text
