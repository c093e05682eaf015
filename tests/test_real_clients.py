"""What real clients send: the official SDKs in multi-turn tool loops against recipe on 127.0.0.1.

Every loop runs the SDK the way applications do — appending the SDK's own response objects to the
history (as objects, ``model_dump()``, ``model_dump(exclude_none=True)``), tool results as strings or
text-part lists — against ``tests/sdk_server.py`` with a scripted model (tool calls for two rounds,
then the final answer; see ``real_clients_support``). Every captured request must be answered 2xx;
the bodies are saved as regression fixtures in ``fixtures/real_clients/`` (when missing, or with
``RECIPE_RECORD_REAL_CLIENTS=1``) and ``test_real_clients_fixtures.py`` converts them without the
SDKs, checking prompt parity with deepseek-recipe.

Request classes of issue 6, each with its own tests: (1) Chat ``developer`` role (its cross-API
equivalence is in ``test_real_clients_fixtures.py``), (2) forced tool choice with thinking on, (3) structured output together with tools,
(4) strict and non-strict tools mixed, (5) ``redacted_thinking`` replayed, (6) Anthropic tools with
``"type": "custom"``, (7) ``previous_response_id`` conversations; plus the null-laden / extra-field
shapes of re-serialised SDK objects.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from pydantic import BaseModel
from real_clients_support import FINAL_TEXT, MODEL, TOOL_OUTPUT, recording

from recipe.store.conversations import MemoryStore

openai = pytest.importorskip("openai")

MAX_ROUNDS = 5
QUESTION = "What is the weather in Paris, and what time is it there?"
#: a non-strict and a strict tool (class 4 when sent together)
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Local time of a city.", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "fmt24": {"type": "boolean"}},
                   "required": ["city", "fmt24"], "additionalProperties": False}}}
TIME_LOOSE = {"type": "function", "function": {k: v for k, v in TIME["function"].items() if k != "strict"}}
WEATHER_STRICT = {"type": "function", "function": {**WEATHER["function"], "strict": True, "parameters": {
    **WEATHER["function"]["parameters"], "required": ["city", "days"], "additionalProperties": False}}}


class Forecast(BaseModel):
    """The structured final answer."""

    city: str
    temperature_c: float
    summary: str


class GetWeather(BaseModel):
    """Current weather of a city."""

    city: str


def _oai(url: str) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20)


def _respond_chat(message: Any, results: str) -> list[dict[str, Any]]:
    """Tool messages answering every call of ``message`` (string or text-part content)."""
    content = TOOL_OUTPUT if results == "string" else [{"type": "text", "text": TOOL_OUTPUT}]
    return [{"role": "tool", "tool_call_id": c.id, "content": content} for c in message.tool_calls or ()]


# --------------------------------------------------------------------------- openai SDK: Chat


CHAT_SERIALISATIONS = {
    # how apps put the assistant message back into the history
    "object": lambda m: m,
    "model_dump": lambda m: m.model_dump(),
    "exclude_none": lambda m: m.model_dump(exclude_none=True),
    "json": lambda m: json.loads(m.model_dump_json()),
}


@pytest.mark.parametrize("results", ["string", "parts"])
@pytest.mark.parametrize("serialise", list(CHAT_SERIALISATIONS))
def test_openai_chat_tool_loop(serialise, results):
    """create → append the SDK's ChatCompletionMessage back → tool results, until the final answer;
    thinking on by default (reasoning_content is replayed), mixed strict/non-strict tools."""
    with recording(f"openai_chat_{serialise}_{results}", min_requests=3, parallel=True) as s:
        client = _oai(s.url)
        messages: list[Any] = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            c = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_STRICT, TIME])
            msg = c.choices[0].message
            messages.append(CHAT_SERIALISATIONS[serialise](msg))
            if not msg.tool_calls:
                break
            messages += _respond_chat(msg, results)
    assert msg.content == FINAL_TEXT and msg.reasoning_content.startswith("Round 2")
    assert len(s.server.requests) == 3
    # every earlier tool result and call reached the last prompt
    last = s.model.preps[-1].prompt.text
    assert last.count(TOOL_OUTPUT) == 3 and last.count('invoke name="get_time"') == 2


def test_openai_chat_stream_loop():
    """chat.completions.stream: the accumulated final completion (tool calls carry ``index``,
    ``parsed_arguments``; the message ``parsed``) appended back with model_dump()."""
    with recording("openai_chat_stream", min_requests=3) as s:
        client = _oai(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            with client.chat.completions.stream(model=MODEL, messages=messages, tools=[WEATHER_STRICT, TIME],
                                                stream_options={"include_usage": True}) as stream:
                for _event in stream:
                    pass
                final = stream.get_final_completion()
            msg = final.choices[0].message
            messages.append(msg.model_dump())
            if not msg.tool_calls:
                break
            messages += _respond_chat(msg, "string")
    assert msg.content == FINAL_TEXT and len(s.server.requests) == 3


def test_openai_chat_parse_with_tools():
    """Class 3 (+ null-laden shapes): chat.completions.parse with a pydantic response_format and
    strict pydantic tools; the ParsedChatCompletionMessage (``parsed: null``,
    ``function.parsed_arguments``) appended back as the object."""
    with recording("openai_chat_parse_tools", min_requests=3) as s:
        client = _oai(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            c = client.chat.completions.parse(model=MODEL, messages=messages, response_format=Forecast,
                                              tools=[openai.pydantic_function_tool(GetWeather)])
            msg = c.choices[0].message
            messages.append(msg)
            if not msg.tool_calls:
                break
            assert msg.tool_calls[0].function.parsed_arguments == GetWeather(city="Paris")
            messages += _respond_chat(msg, "string")
    assert msg.parsed == Forecast(city="Paris", temperature_c=2.5, summary="Paris")


@pytest.mark.parametrize("thinking", ["default", "high"])
def test_openai_chat_developer_role(thinking):
    """Class 1: the ``developer`` role the openai SDK docs and reasoning-model apps use."""
    extra = {} if thinking == "default" else {"reasoning_effort": thinking}
    with recording(f"openai_chat_developer_{thinking}") as s:
        c = _oai(s.url).chat.completions.create(
            model=MODEL, messages=[{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Hi"}],
            **extra)
    assert c.choices[0].message.content == FINAL_TEXT
    assert "Answer in French." in s.model.preps[0].prompt.text


@pytest.mark.parametrize("choice", ["required", "named"])
def test_openai_chat_forced_tool_choice_thinking(choice):
    """Class 2: ``tool_choice`` required / a named function with thinking on (the default), then the
    loop continues with ``auto`` as agent frameworks do after the forced call."""
    forced: Any = "required" if choice == "required" else {"type": "function", "function": {"name": "get_time"}}
    with recording(f"openai_chat_forced_{choice}", rounds=1, min_requests=2) as s:
        client = _oai(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        c = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, TIME_LOOSE], tool_choice=forced)
        msg = c.choices[0].message
        assert msg.tool_calls and (choice == "required" or msg.tool_calls[0].function.name == "get_time")
        messages += [msg.model_dump(exclude_none=True), *_respond_chat(msg, "string")]
        c = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, TIME_LOOSE], tool_choice="auto")
    assert c.choices[0].message.content == FINAL_TEXT
    assert s.model.preps[0].output_constraint.kind == "tool_call_required"


def test_openai_chat_mixed_strict_tools():
    """Class 4: a strict and a non-strict function tool in one request."""
    with recording("openai_chat_mixed_strict", rounds=1, min_requests=2) as s:
        client = _oai(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            msg = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER, TIME]).choices[0].message
            messages.append(msg)
            if not msg.tool_calls:
                break
            messages += _respond_chat(msg, "string")
    assert msg.content == FINAL_TEXT


def test_openai_chat_max_tokens_both():
    """``max_tokens`` and ``max_completion_tokens`` together (older and newer SDK field, both set by
    frameworks that copy settings)."""
    with recording("openai_chat_max_tokens_both") as s:
        c = _oai(s.url).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                                max_tokens=512, max_completion_tokens=512)
    assert c.choices[0].message.content == FINAL_TEXT
    assert s.model.preps[0].conversation.max_tokens == 512


# --------------------------------------------------------------------------- openai SDK: Responses


R_WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather of a city.",
             "parameters": WEATHER_STRICT["function"]["parameters"], "strict": True}
R_TIME = {"type": "function", "name": "get_time", "description": "Local time of a city.",
          "parameters": TIME["function"]["parameters"], "strict": True}
R_TIME_LOOSE = {**R_TIME, "strict": False}
R_WEATHER_LOOSE = {**R_WEATHER, "parameters": WEATHER["function"]["parameters"], "strict": False}


def _outputs(response: Any) -> list[dict[str, Any]]:
    return [{"type": "function_call_output", "call_id": it.call_id, "output": TOOL_OUTPUT}
            for it in response.output if it.type == "function_call"]


RESPONSES_SERIALISATIONS = {
    "object": lambda items: list(items),
    "model_dump": lambda items: [i.model_dump() for i in items],
    "exclude_none": lambda items: [i.model_dump(exclude_none=True) for i in items],
}


@pytest.mark.parametrize("serialise", list(RESPONSES_SERIALISATIONS))
def test_openai_responses_history_loop(serialise):
    """responses.create with the full history: ``response.output`` items (reasoning, message,
    function_call) appended back, function_call_output items after them."""
    with recording(f"openai_responses_history_{serialise}", min_requests=3, parallel=True) as s:
        client = _oai(s.url)
        items: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            r = client.responses.create(model=MODEL, input=items, instructions="You are terse.",
                                        tools=[R_WEATHER, R_TIME], reasoning={"effort": "low"})
            items += RESPONSES_SERIALISATIONS[serialise](r.output)
            if not _outputs(r):
                break
            items += _outputs(r)
    assert r.output_text == FINAL_TEXT and len(s.server.requests) == 3
    assert s.model.preps[-1].prompt.text.count(TOOL_OUTPUT) == 3


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responses_previous_response_id(stream):
    """Class 7: ``previous_response_id`` turns against a server-side store; the history each request
    continues (calls, outputs, the question) reaches the prompt."""
    store = MemoryStore()
    with recording(f"openai_responses_previous_id{'_stream' if stream else ''}", store=store, min_requests=3) as s:
        client = _oai(s.url)
        new: list[Any] = [{"role": "user", "content": QUESTION}]
        prev = None
        for _ in range(MAX_ROUNDS):
            kw = {"model": MODEL, "input": new, "tools": [R_WEATHER, R_TIME], "previous_response_id": prev}
            if stream:
                with client.responses.stream(**kw) as st:
                    for _event in st:
                        pass
                    r = st.get_final_response()
            else:
                r = client.responses.create(**kw)
            prev, new = r.id, _outputs(r)
            if not new:
                break
    assert r.output_text == FINAL_TEXT and len(s.server.requests) == 3
    last = s.model.preps[-1].prompt.text
    assert QUESTION in last and last.count(TOOL_OUTPUT) == 2


def test_openai_responses_parse_with_tools():
    """Class 3: responses.parse with ``text_format`` and a strict tool; the parsed output items
    (``parsed``, ``parsed_arguments``) appended back."""
    with recording("openai_responses_parse_tools", min_requests=3) as s:
        client = _oai(s.url)
        items: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            r = client.responses.parse(model=MODEL, input=items, text_format=Forecast, tools=[R_WEATHER])
            items += r.output
            if not _outputs(r):
                break
            items += _outputs(r)
    assert r.output_parsed == Forecast(city="Paris", temperature_c=2.5, summary="Paris")


@pytest.mark.parametrize("choice", ["required", "named"])
def test_openai_responses_forced_tool_choice_thinking(choice):
    """Class 2 for Responses: required / named function with reasoning on."""
    forced: Any = "required" if choice == "required" else {"type": "function", "name": "get_time"}
    with recording(f"openai_responses_forced_{choice}") as s:
        r = _oai(s.url).responses.create(model=MODEL, input=QUESTION, tools=[R_WEATHER_LOOSE, R_TIME_LOOSE], tool_choice=forced,
                                         reasoning={"effort": "high"})
    calls = [it for it in r.output if it.type == "function_call"]
    assert calls and (choice == "required" or calls[0].name == "get_time")


def test_openai_responses_mixed_strict_tools():
    """Class 4 for Responses: strict and non-strict function tools together."""
    with recording("openai_responses_mixed_strict") as s:
        r = _oai(s.url).responses.create(model=MODEL, input=QUESTION, tools=[R_WEATHER, R_TIME_LOOSE])
    assert _outputs(r)


# --------------------------------------------------------------------------- openai-agents


def _agents() -> Any:
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)
    return agents


def _agent_tools(agents: Any, mixed: bool = False) -> list[Any]:
    """get_weather and get_time; ``mixed``: get_time opts out of strict schemas (class 4)."""

    @agents.function_tool
    def get_weather(city: str, days: int) -> str:
        """Current weather of a city.

        Args:
            city: the city.
            days: how many days ahead.
        """
        return TOOL_OUTPUT

    @agents.function_tool(strict_mode=not mixed)
    def get_time(city: str, fmt24: bool) -> str:
        """Local time of a city.

        Args:
            city: the city.
            fmt24: 24-hour clock.
        """
        return TOOL_OUTPUT

    return [get_weather, get_time]


AGENT_MODELS = {
    "chat": lambda agents, client: agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
    "responses": lambda agents, client: agents.OpenAIResponsesModel(model=MODEL, openai_client=client),
}


@pytest.mark.parametrize("output_type", [None, "Forecast"])
@pytest.mark.parametrize("api", list(AGENT_MODELS))
def test_openai_agents_runner(api, output_type):
    """An openai-agents ``Agent`` with (strict) function tools, with and without ``output_type``
    (class 3: structured output next to tools), run by ``Runner.run_sync`` through a Chat Completions
    and a Responses model; the runner loops until the final output."""
    agents = _agents()
    name = f"agents_{api}{'_output_type' if output_type else ''}"
    with recording(name, min_requests=3) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0, timeout=20)
        agent = agents.Agent(name="weather", instructions="You are terse.", tools=_agent_tools(agents),
                             model=AGENT_MODELS[api](agents, client), output_type=Forecast if output_type else None)
        result = agents.Runner.run_sync(agent, QUESTION, max_turns=MAX_ROUNDS)
    want = Forecast(city="Paris", temperature_c=2.5, summary="Paris") if output_type else FINAL_TEXT
    assert result.final_output == want and len(s.server.requests) == 3


@pytest.mark.parametrize("api", list(AGENT_MODELS))
def test_openai_agents_mixed_strict_tools(api):
    """Class 4 through openai-agents: one tool with ``strict_mode=False`` next to a strict one."""
    agents = _agents()
    with recording(f"agents_{api}_mixed_strict", min_requests=3) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0, timeout=20)
        agent = agents.Agent(name="weather", instructions="You are terse.", tools=_agent_tools(agents, mixed=True),
                             model=AGENT_MODELS[api](agents, client))
        result = agents.Runner.run_sync(agent, QUESTION, max_turns=MAX_ROUNDS)
    assert result.final_output == FINAL_TEXT


def test_openai_agents_forced_tool_choice():
    """Class 2 through openai-agents: ``ModelSettings(tool_choice="required")`` (the runner resets it
    to auto after the first tool call), Chat Completions model, thinking on by default."""
    agents = _agents()
    with recording("agents_chat_tool_choice_required", min_requests=2) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0, timeout=20)
        agent = agents.Agent(name="weather", instructions="You are terse.", tools=_agent_tools(agents)[:1],
                             model=AGENT_MODELS["chat"](agents, client),
                             model_settings=agents.ModelSettings(tool_choice="required"))
        result = agents.Runner.run_sync(agent, QUESTION, max_turns=MAX_ROUNDS)
    assert result.final_output == FINAL_TEXT


def test_openai_agents_previous_response_id():
    """Class 7 through openai-agents: ``auto_previous_response_id`` (the runner sends only new items
    and chains turns by id) against a server store."""
    agents = _agents()
    store = MemoryStore()
    with recording("agents_responses_previous_id", store=store, min_requests=3) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0, timeout=20)
        agent = agents.Agent(name="weather", instructions="You are terse.", tools=_agent_tools(agents)[:1],
                             model=AGENT_MODELS["responses"](agents, client))
        result = agents.Runner.run_sync(agent, QUESTION, max_turns=MAX_ROUNDS, auto_previous_response_id=True)
    assert result.final_output == FINAL_TEXT
    assert any(b.get("previous_response_id") for _, b in s.server.requests)


# --------------------------------------------------------------------------- anthropic SDK: Messages


A_WEATHER = {"name": "get_weather", "description": "Current weather of a city.",
             "input_schema": WEATHER["function"]["parameters"]}
A_TIME = {"name": "get_time", "description": "Local time of a city.", "input_schema": TIME["function"]["parameters"]}
THINKING = {"type": "enabled", "budget_tokens": 1024}
#: an opaque redacted_thinking payload as the Anthropic API returns them (base64 ciphertext)
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj"}


def _anthropic(url: str) -> Any:
    anthropic = pytest.importorskip("anthropic")
    return anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=20)


def _tool_results(message: Any, results: str) -> dict[str, Any]:
    content: Any = TOOL_OUTPUT if results == "string" else [{"type": "text", "text": TOOL_OUTPUT}]
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": content}
                                        for b in message.content if b.type == "tool_use"]}


MESSAGES_SERIALISATIONS = {
    "object": lambda blocks: list(blocks),
    "model_dump": lambda blocks: [b.model_dump() for b in blocks],
    "exclude_none": lambda blocks: [b.model_dump(exclude_none=True) for b in blocks],
}


@pytest.mark.parametrize("results", ["string", "parts"])
@pytest.mark.parametrize("serialise", list(MESSAGES_SERIALISATIONS))
def test_anthropic_tool_loop(serialise, results):
    """messages.create with thinking on: ``message.content`` (thinking with signature, text,
    tool_use; ``citations: null``, ``caller: null`` when dumped) appended back, tool_result blocks."""
    with recording(f"anthropic_{serialise}_{results}", min_requests=3, parallel=True) as s:
        client = _anthropic(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            m = client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING, system="You are terse.",
                                       tools=[A_WEATHER, A_TIME], messages=messages)
            messages.append({"role": "assistant", "content": MESSAGES_SERIALISATIONS[serialise](m.content)})
            if m.stop_reason != "tool_use":
                break
            messages.append(_tool_results(m, results))
    assert [b.type for b in m.content] == ["thinking", "text"] and m.content[1].text == FINAL_TEXT
    last = s.model.preps[-1].prompt.text
    assert last.count(TOOL_OUTPUT) == 3 and len(s.server.requests) == 3


def test_anthropic_stream_loop():
    """messages.stream → get_final_message(), appended back."""
    with recording("anthropic_stream", min_requests=3) as s:
        client = _anthropic(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            with client.messages.stream(model=MODEL, max_tokens=2048, thinking=THINKING, tools=[A_WEATHER, A_TIME],
                                        messages=messages) as st:
                m = st.get_final_message()
            messages.append({"role": "assistant", "content": m.content})
            if m.stop_reason != "tool_use":
                break
            messages.append(_tool_results(m, "string"))
    assert m.content[-1].text == FINAL_TEXT


def test_anthropic_redacted_thinking_replayed():
    """Class 5: the assistant turn replayed with a ``redacted_thinking`` block next to its thinking
    (the API returns them when a safety system encrypts reasoning; clients must send them back)."""
    with recording("anthropic_redacted_thinking", min_requests=3) as s:
        client = _anthropic(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            m = client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING, tools=[A_WEATHER, A_TIME],
                                       messages=messages)
            messages.append({"role": "assistant", "content": [REDACTED, *m.content]})
            if m.stop_reason != "tool_use":
                break
            messages.append(_tool_results(m, "string"))
    assert m.content[-1].text == FINAL_TEXT
    assert REDACTED["data"] not in s.model.preps[-1].prompt.text


@pytest.mark.parametrize("choice", ["tool", "any"])
def test_anthropic_forced_tool_choice(choice):
    """Class 2 for Messages: ``{"type": "tool"}`` / ``{"type": "any"}`` when the request leaves
    thinking to the server default (on), then the loop goes on with ``auto``."""
    forced = {"type": "tool", "name": "get_time"} if choice == "tool" else {"type": "any"}
    with recording(f"anthropic_forced_{choice}", rounds=1, min_requests=2) as s:
        client = _anthropic(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        m = client.messages.create(model=MODEL, max_tokens=1024, tools=[A_WEATHER, A_TIME], tool_choice=forced,
                                   messages=messages)
        uses = [b for b in m.content if b.type == "tool_use"]
        assert uses and (choice == "any" or uses[0].name == "get_time")
        messages += [{"role": "assistant", "content": m.content}, _tool_results(m, "string")]
        m = client.messages.create(model=MODEL, max_tokens=1024, tools=[A_WEATHER, A_TIME], tool_choice={"type": "auto"},
                                   messages=messages)
    assert m.content[-1].text == FINAL_TEXT
    # both force the call ({"type": "any"} as Chat's "required"; deepseek-recipe reads it as auto)
    assert s.model.preps[0].output_constraint.kind == "tool_call_required"


def test_anthropic_custom_tool_type():
    """Class 6: tools declared with ``"type": "custom"`` (litellm and others send it)."""
    with recording("anthropic_custom_tools", min_requests=2) as s:
        client = _anthropic(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            m = client.messages.create(model=MODEL, max_tokens=1024, messages=messages,
                                       tools=[{"type": "custom", **A_WEATHER}, {"type": "custom", **A_TIME}])
            messages.append({"role": "assistant", "content": m.content})
            if m.stop_reason != "tool_use":
                break
            messages.append(_tool_results(m, "string"))
    assert m.content[-1].text == FINAL_TEXT


def test_anthropic_mixed_strict_tools():
    """Class 4 for Messages: a ``strict`` tool next to a non-strict one."""
    strict_time = {**A_TIME, "strict": True}
    with recording("anthropic_mixed_strict") as s:
        m = _anthropic(s.url).messages.create(model=MODEL, max_tokens=1024, tools=[A_WEATHER, strict_time],
                                              messages=[{"role": "user", "content": QUESTION}])
    assert m.stop_reason == "tool_use"


# --------------------------------------------------------------------------- LangChain (optional)


def _lc_tools() -> list[Any]:
    tools = pytest.importorskip("langchain_core.tools")

    @tools.tool
    def get_weather(city: str, days: int) -> str:
        """Current weather of a city."""
        return TOOL_OUTPUT

    @tools.tool
    def get_time(city: str, fmt24: bool) -> str:
        """Local time of a city."""
        return TOOL_OUTPUT

    return [get_weather, get_time]


def _lc_chat(kind: str, url: str, **kw: Any) -> Any:
    if kind == "anthropic":
        lc = pytest.importorskip("langchain_anthropic")
        return lc.ChatAnthropic(model=MODEL, base_url=url, api_key="x", max_retries=0, default_request_timeout=20,
                                max_tokens=2048, **kw)
    lc = pytest.importorskip("langchain_openai")
    return lc.ChatOpenAI(model=MODEL, base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20,
                         use_responses_api=kind == "openai_responses", **kw)


LC_KINDS = {
    "openai": {},
    "openai_responses": {"reasoning": {"effort": "low"}},
    "anthropic": {"thinking": THINKING},
}


@pytest.mark.parametrize("kind", list(LC_KINDS))
def test_langchain_tool_loop(kind):
    """LangChain's agent loop by hand: ``bind_tools`` → AIMessage with tool_calls appended (LangChain
    re-serialises it in its own way per provider) → ToolMessage results, until the final answer."""
    messages_mod = pytest.importorskip("langchain_core.messages")
    tools = _lc_tools()
    by_name = {t.name: t for t in tools}
    with recording(f"langchain_{kind}_loop", min_requests=3) as s:
        llm = _lc_chat(kind, s.url, **LC_KINDS[kind]).bind_tools(tools)
        messages: list[Any] = [messages_mod.SystemMessage("You are terse."), messages_mod.HumanMessage(QUESTION)]
        for _ in range(MAX_ROUNDS):
            ai = llm.invoke(messages)
            messages.append(ai)
            if not ai.tool_calls:
                break
            messages += [messages_mod.ToolMessage(by_name[c["name"]].invoke(c["args"]), tool_call_id=c["id"])
                         for c in ai.tool_calls]
    assert FINAL_TEXT in str(ai.content) and len(s.server.requests) == 3


@pytest.mark.parametrize("tool_choice", ["get_time", "any"])
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_langchain_bind_tools_tool_choice(kind, tool_choice):
    """Class 2 through LangChain: ``bind_tools(tool_choice=…)`` (a name → named function / Messages
    ``{"type": "tool"}``; ``any`` → ``required`` / ``{"type": "any"}``), thinking left to the default."""
    with recording(f"langchain_{kind}_tool_choice_{tool_choice}") as s:
        ai = _lc_chat(kind, s.url).bind_tools(_lc_tools(), tool_choice=tool_choice).invoke(QUESTION)
    assert ai.tool_calls and (tool_choice == "any" or ai.tool_calls[0]["name"] == "get_time")


@pytest.mark.parametrize("method", ["function_calling", "json_schema"])
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_langchain_with_structured_output(kind, method):
    """Class 2 / 3 through LangChain: ``with_structured_output`` (function calling forces the schema
    tool; json_schema sends a response format), thinking left to the default."""
    with recording(f"langchain_{kind}_structured_{method}") as s:
        out = _lc_chat(kind, s.url).with_structured_output(Forecast, method=method).invoke(QUESTION)
    assert out == Forecast(city="Paris", temperature_c=2.5, summary="Paris")
    if method == "json_schema":  # Chat response_format / Messages output_config.format: the same json constraint
        assert {p.output_constraint.kind for p in s.model.preps} == {"json"}


# --------------------------------------------------------------------------- litellm (optional)


@pytest.fixture(scope="module")
def litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no model-price download at import
    mod = pytest.importorskip("litellm")
    mod.telemetry = False
    return mod


LITELLM_PROVIDERS = {
    # provider prefix -> api_base for our server
    "openai": "/v1",
    "anthropic": "",
}


@pytest.mark.filterwarnings("ignore:Item:UserWarning", "ignore:Items:UserWarning")
@pytest.mark.parametrize("provider", list(LITELLM_PROVIDERS))
def test_litellm_tool_loop(litellm, provider):
    """litellm.completion in OpenAI format against the OpenAI and the Anthropic route (litellm turns
    the tools into Anthropic tools with ``"type": "custom"``: class 6), its Message appended back."""
    with recording(f"litellm_{provider}_loop", min_requests=3) as s:
        messages: list[Any] = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": QUESTION}]
        for _ in range(MAX_ROUNDS):
            r = litellm.completion(model=f"{provider}/{MODEL}", api_base=s.url + LITELLM_PROVIDERS[provider],
                                   api_key="x", messages=messages, tools=[WEATHER_STRICT, TIME], max_tokens=1024,
                                   num_retries=0, timeout=20)
            msg = r.choices[0].message
            messages.append(msg.model_dump())
            if not msg.tool_calls:
                break
            messages += _respond_chat(msg, "string")
    assert msg.content == FINAL_TEXT and len(s.server.requests) == 3


# --------------------------------------------------------------------------- re-serialised SDK objects


def _set_calls(key: str, value: Any) -> Any:
    def mutate(d: dict[str, Any]) -> dict[str, Any]:
        for k, call in enumerate(d.get("tool_calls") or ()):
            if key == "index":
                call["index"] = k
            else:
                call["function"][key] = value
        return d

    return mutate


CHAT_SHAPES = {
    # what apps and frameworks leave in an assistant message they send back
    "no_content_key": lambda d: {k: v for k, v in d.items() if k != "content"},
    "content_null": lambda d: {**d, "content": None},
    "refusal_null": lambda d: {**d, "refusal": None},
    "annotations_null": lambda d: {**d, "annotations": None},
    "audio_function_call_null": lambda d: {**d, "audio": None, "function_call": None},
    "parsed_null": lambda d: {**d, "parsed": None},
    "parsed_arguments_null": _set_calls("parsed_arguments", None),
    "tool_call_index": _set_calls("index", 0),
}


@pytest.mark.parametrize("shape", list(CHAT_SHAPES))
def test_openai_chat_reserialised_shapes(shape):
    """Each null-laden / extra-field shape of a re-serialised ChatCompletionMessage, alone, in the
    history of a second turn (the SDK's own message as the starting point)."""
    with recording(f"openai_chat_shape_{shape}", rounds=1, min_requests=2) as s:
        client = _oai(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        msg = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER]).choices[0].message
        messages += [CHAT_SHAPES[shape](msg.model_dump(exclude_none=True)), *_respond_chat(msg, "parts")]
        final = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER]).choices[0].message
    assert final.content == FINAL_TEXT
    sent = s.server.requests[1][1]["messages"][1]
    assert ("content" not in sent) if shape == "no_content_key" else sent == CHAT_SHAPES[shape](msg.model_dump(exclude_none=True))


MESSAGES_SHAPES = {
    "citations_null": lambda b: {**b, "citations": None} if b["type"] == "text" else b,
    "caller_null": lambda b: {**b, "caller": None} if b["type"] == "tool_use" else b,
    "all_nulls": lambda b: b,  # model_dump() keeps every None field of every block
}


@pytest.mark.parametrize("shape", list(MESSAGES_SHAPES))
def test_anthropic_reserialised_shapes(shape):
    """Null fields of re-serialised anthropic content blocks (``citations``, ``caller``, all of a
    ``model_dump()``) in the history of a second turn, thinking on."""
    with recording(f"anthropic_shape_{shape}", rounds=1, min_requests=2) as s:
        client = _anthropic(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        m = client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING, tools=[A_WEATHER], messages=messages)
        dump = (lambda b: b.model_dump()) if shape == "all_nulls" else (lambda b: b.model_dump(exclude_none=True))
        blocks = [MESSAGES_SHAPES[shape](dump(b)) for b in m.content]
        assert {"thinking", "text", "tool_use"} <= {b["type"] for b in blocks}
        messages += [{"role": "assistant", "content": blocks}, _tool_results(m, "parts")]
        m = client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING, tools=[A_WEATHER], messages=messages)
    assert m.content[-1].text == FINAL_TEXT
