"""The official SDKs against ``recipe serve`` over real localhost HTTP, with the replay engine.

Every event must parse as the SDK's own type, the streamed deltas must add up to the non-streamed
response of the same engine output, usage must carry the engine's cached tokens, and multi-turn
agent loops (openai chat and responses, anthropic messages, openai-agents) must run to their
final answer — the last ones against the ``recipe serve --engine replay:FILE`` command itself.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from serve_support import ANSWER_TEXT, ANSWER_TURN, EOS, MODEL, TOOL_TURN, cli_server, running, write_replay

import recipe.serve
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.store.conversations import MemoryStore

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
R_WEATHER = {"type": "function", **WEATHER["function"]}
A_WEATHER = {"name": "get_weather", "description": "Weather of a city.", "input_schema": WEATHER["function"]["parameters"]}
QUESTION = "What is the weather in Paris?"


def _server(turns: list[dict], **kw: Any):
    return running(recipe.serve.app(ReplayEngine(load_turns(turns)), **kw))


def _oai(url: str) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20)


def _ant(url: str) -> Any:
    return anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=20)


def _own_type(event: Any) -> bool:
    """The SDK built ``event`` as the union member declared for its ``type`` (not a fallback)."""
    from typing import get_args

    return event.type in get_args(type(event).model_fields["type"].annotation)


def _norm(obj: Any) -> Any:
    """Ids and timestamps out (each request gets fresh ones)."""
    if isinstance(obj, dict):
        return {k: "*" if k in ("id", "call_id", "item_id", "created", "created_at", "completed_at", "signature")
                or (k == "encrypted_content" and v) else _norm(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_norm(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------- streamed == whole


@pytest.mark.parametrize("chunk", [1, 5])
def test_openai_chat_stream_adds_up_to_the_whole_response(chunk):
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    with _server([{"text": TOOL_TURN, "chunk": chunk, "cached_tokens": 64}]) as s:
        client = _oai(s.url)
        msgs = [{"role": "user", "content": QUESTION}]
        whole = client.chat.completions.create(model=MODEL, messages=msgs, tools=[WEATHER])
        state = ChatCompletionStreamState()
        chunks = list(client.chat.completions.create(model=MODEL, messages=msgs, tools=[WEATHER], stream=True))
        assert chunks and all(type(c) is ChatCompletionChunk for c in chunks)
        for c in chunks:
            state.handle_chunk(c)
        streamed = state.get_final_completion()
    msg = whole.choices[0].message
    assert whole.choices[0].finish_reason == "tool_calls" and msg.reasoning_content == "I need the weather first."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert whole.usage.prompt_tokens_details.cached_tokens == 64 == whole.usage.prompt_cache_hit_tokens
    want = _norm(whole.model_dump(mode="json", exclude_none=True))
    got = _norm(streamed.model_dump(mode="json", exclude_none=True))
    for c in got["choices"]:
        for t in c["message"].get("tool_calls") or ():
            t.pop("index", None)
        c["message"].pop("parsed", None)
    for c in want["choices"]:
        for t in c["message"].get("tool_calls") or ():
            t.pop("index", None)
    assert got == want


def test_openai_responses_stream_adds_up_to_the_whole_response():
    with _server([{"text": TOOL_TURN, "chunk": 3, "cached_tokens": 64}]) as s:
        client = _oai(s.url)
        whole = client.responses.create(model=MODEL, input=QUESTION, tools=[R_WEATHER])
        events = list(client.responses.create(model=MODEL, input=QUESTION, tools=[R_WEATHER], stream=True))
        with client.responses.stream(model=MODEL, input=QUESTION, tools=[R_WEATHER]) as stream:
            for _ in stream:
                pass
            final = stream.get_final_response()
    assert all(_own_type(e) for e in events)
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert [i.type for i in whole.output] == ["reasoning", "function_call"]
    assert whole.usage.input_tokens_details.cached_tokens == 64
    want = _norm(whole.model_dump(mode="json", exclude_none=True))
    assert _norm(events[-1].response.model_dump(mode="json", exclude_none=True)) == want
    got = _norm(final.model_dump(mode="json", exclude_none=True))
    for item in got["output"]:
        item.pop("parsed_arguments", None)
    assert got == want


def test_anthropic_stream_adds_up_to_the_whole_message():
    with _server([{"text": TOOL_TURN, "chunk": 2, "cached_tokens": 64}]) as s:
        client = _ant(s.url)
        kw = dict(model=MODEL, max_tokens=500, messages=[{"role": "user", "content": QUESTION}], tools=[A_WEATHER],
                  thinking={"type": "enabled", "budget_tokens": 1024})
        whole = client.messages.create(**kw)
        raw = list(client.messages.create(**kw, stream=True))
        with client.messages.stream(**kw) as stream:
            for _ in stream:
                pass
            final = stream.get_final_message()
    assert all(_own_type(e) for e in raw) and raw[0].type == "message_start"
    assert [b.type for b in whole.content] == ["thinking", "tool_use"] and whole.stop_reason == "tool_use"
    assert whole.content[1].input == {"city": "Paris"}
    assert whole.usage.cache_read_input_tokens == 64 and whole.usage.input_tokens > 0
    assert _norm(final.model_dump(mode="json", exclude_none=True)) == _norm(whole.model_dump(mode="json", exclude_none=True))


# ----------------------------------------------------------------------------- agent loops


def test_openai_chat_tool_loop_with_reasoning():
    with _server([{"text": TOOL_TURN}, {"text": ANSWER_TURN}]) as s:
        client = _oai(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(4):
            with client.chat.completions.stream(model=MODEL, messages=messages, tools=[WEATHER]) as stream:
                for _ in stream:
                    pass
                msg = stream.get_final_completion().choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                break
            messages += [{"role": "tool", "tool_call_id": c.id, "content": "sunny, 21C"} for c in msg.tool_calls]
    assert msg.content == ANSWER_TEXT and len(messages) == 4


def test_openai_responses_loop_with_previous_response_id_and_retrieve():
    store = MemoryStore()
    with _server([{"text": TOOL_TURN}, {"text": ANSWER_TURN}], store=store) as s:
        client = _oai(s.url)
        first = client.responses.create(model=MODEL, input=QUESTION, tools=[R_WEATHER])
        call = next(i for i in first.output if i.type == "function_call")
        with client.responses.stream(model=MODEL, previous_response_id=first.id, tools=[R_WEATHER],
                                     input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]) as st:
            for _ in st:
                pass
            second = st.get_final_response()
        assert second.output_text == ANSWER_TEXT and second.previous_response_id == first.id and second.store
        got = client.responses.retrieve(second.id)
        assert got.id == second.id and got.output_text == ANSWER_TEXT
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve("resp_unknown")
        # the second prompt held the first turn's call and the tool result (expanded from the store)
        assert store.load(second.id).previous_response_id == first.id


def test_anthropic_tool_loop_with_thinking():
    with _server([{"text": TOOL_TURN, "chunk": 4}, {"text": ANSWER_TURN, "chunk": 4}]) as s:
        client = _ant(s.url)
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        for _ in range(4):
            with client.messages.stream(model=MODEL, max_tokens=800, messages=messages, tools=[A_WEATHER],
                                        thinking={"type": "enabled", "budget_tokens": 1024}) as stream:
                final = stream.get_final_message()
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]})
            uses = [b for b in final.content if b.type == "tool_use"]
            if not uses:
                break
            messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "sunny"}
                                                         for b in uses]})
    assert final.content[-1].text == ANSWER_TEXT and final.content[0].type == "thinking"


def test_sdk_helpers_models_and_count_tokens():
    with _server([{"text": "Hi." + EOS}]) as s:
        names = {m.id for m in _oai(s.url).models.list()}
        assert {"deepseek-v4-pro", "deepseek-chat", "deepseek-reasoner"} <= names
        count = _ant(s.url).messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": QUESTION}])
    import recipe

    assert count.input_tokens == len(recipe.prepare({"model": MODEL, "max_tokens": 1, "messages": [
        {"role": "user", "content": QUESTION}]}, "messages").token_ids)


# ----------------------------------------------------------------------------- the CLI with replay:FILE


@pytest.fixture(scope="module")
def agent_script(tmp_path_factory):
    # cycling pairs: every loop below takes exactly two turns (tool call, answer)
    path = tmp_path_factory.mktemp("replay") / "agent.jsonl"
    call = "Let me check.</think>" + (
        '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
        '</｜DSML｜invoke>\n</｜DSML｜tool_calls>') + EOS
    return write_replay(path, [{"text": call, "chunk": 3}, {"text": ANSWER_TURN, "chunk": 3}])


def _agents() -> Any:
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)
    return agents


def test_openai_agents_runner_against_the_cli(agent_script):
    agents = _agents()

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Weather of a city.

        Args:
            city: the city.
        """
        return f"sunny in {city}"

    with cli_server("--engine", f"replay:{agent_script}", "--store", "memory") as (url, _proc):
        for kind in ("chat", "responses"):
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=20)
            model = (agents.OpenAIChatCompletionsModel if kind == "chat" else agents.OpenAIResponsesModel)(
                model=MODEL, openai_client=client)
            agent = agents.Agent(name="weather", instructions="Be terse.", tools=[get_weather], model=model)
            result = agents.Runner.run_sync(agent, QUESTION, max_turns=4)
            assert result.final_output == ANSWER_TEXT, kind
            calls = [i for i in result.new_items if i.type == "tool_call_output_item"]
            assert [c.output for c in calls] == ["sunny in Paris"]


def test_openai_and_anthropic_sdks_against_the_cli(agent_script):
    with cli_server("--engine", f"replay:{agent_script}", "--store", "memory") as (url, _proc):
        c = _oai(url).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": QUESTION}], tools=[WEATHER])
        assert c.choices[0].message.tool_calls[0].function.name == "get_weather"
        m = _ant(url).messages.create(model=MODEL, max_tokens=500, messages=[
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}],
            tools=[A_WEATHER])
        assert m.content[-1].text == ANSWER_TEXT and m.stop_reason == "end_turn"


def test_demo_engine_answers_the_sdks_on_a_fresh_server():
    """``recipe serve`` with no engine: a tool call valid for the first tool's schema, then an answer."""
    import jsonschema

    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 3},
                                               "units": {"enum": ["c", "f"]}}, "required": ["city", "days", "units"]}
    tool = {"type": "function", "function": {"name": "forecast", "parameters": schema}}
    with running(recipe.serve.app()) as s:
        client = _oai(s.url)
        msgs: list[Any] = [{"role": "user", "content": QUESTION}]
        first = client.chat.completions.create(model=MODEL, messages=msgs, tools=[tool]).choices[0].message
        args = json.loads(first.tool_calls[0].function.arguments)
        jsonschema.validate(args, schema)
        msgs += [first.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "rain"}]
        second = client.chat.completions.create(model=MODEL, messages=msgs, tools=[tool]).choices[0].message
        assert second.content == "The tool returned: rain" and not second.tool_calls
        plain = client.chat.completions.create(model="deepseek-chat", messages=[{"role": "user", "content": "hi"}])
        assert plain.choices[0].message.content.startswith("Hello! I am recipe's demo engine")
