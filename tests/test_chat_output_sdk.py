"""The official ``openai`` SDK against our Chat output, over real HTTP on 127.0.0.1.

A stdlib HTTP server (one thread, module lifetime, socket timeouts) answers
``POST /v1/chat/completions`` with :class:`CompletionStream` SSE (one token id per push, as an engine
would) or :func:`response` JSON for the scenario named in the ``x-scenario`` header. The SDK must
consume both without error, and what it accumulates from the stream must equal the non-streamed
completion it reads, for every recorded scenario, with and without the usage option.
"""

from __future__ import annotations

import json

import pytest
from sdk_server import by_scenario, openai_view, serve

from chat_output_support import chat_rows
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")
from openai.lib.streaming.chat import ChatCompletionStreamState  # noqa: E402

ROWS = {r["scenario"]: r for r in chat_rows()}
EXTRA_OUTPUTS = {
    # (completion text, finish) on top of the recorded rows
    "logprobs": ("Hi \U0001F916 there.</think>\n\nAns \u00e9 wer", "stop"),
}
KW = dict(seed=3, created=1700000000, system_fingerprint="fp_x", prompt_tokens=20, cached_tokens=5)


def _output(scenario: str) -> tuple[list[int], str]:
    if scenario in ROWS:
        return ROWS[scenario]["completion_token_ids"], ROWS[scenario]["backend_finish"]
    text, fin = EXTRA_OUTPUTS[scenario]
    return load_tokenizer().encode_with_special_tokens(text), fin


def _lps(ids: list[int]) -> list[tuple[float, list[tuple[int, float]]]]:
    return [(-0.01 * (k + 1), [(i, -0.01 * (k + 1))]) for k, i in enumerate(ids)]


@pytest.fixture(scope="module")
def client():
    with serve(by_scenario(_output, logprobs=_lps), **KW) as server:
        yield openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=20)


def _request(scenario: str) -> dict:
    if scenario in ROWS:
        return dict(ROWS[scenario]["request"])
    return {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "low",
            "logprobs": True, "top_logprobs": 1}


SCENARIOS = [*ROWS, *EXTRA_OUTPUTS]


@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sdk_stream_equals_response(client, scenario, include_usage):
    req = _request(scenario)
    hdr = {"x-scenario": scenario}
    full = client.chat.completions.create(**req, extra_headers=hdr)
    want = openai_view(full)
    notes = want.pop("recipe", None)

    kwargs = dict(req, extra_headers=hdr)
    if include_usage:
        kwargs["stream_options"] = {"include_usage": True}
    state = ChatCompletionStreamState()
    chunks = []
    for chunk in client.chat.completions.create(**kwargs, stream=True):
        chunks.append(chunk)
        state.handle_chunk(chunk)
    got = openai_view(state.current_completion_snapshot)
    lp = want["choices"][0].get("logprobs")
    if lp and "reasoning_content" in lp:
        # the SDK's accumulator keeps only logprobs.content; the reasoning entries (DeepSeek extension)
        # are readable per chunk as an extra attribute
        per_chunk = [e["token"] for c in chunks if c.choices and c.choices[0].logprobs is not None
                     for e in (c.choices[0].logprobs.model_extra or {}).get("reasoning_content") or ()]
        assert per_chunk == [e["token"] for e in lp.pop("reasoning_content")]
        assert per_chunk and lp["content"]
    assert got == want
    # extras are readable as attributes: DeepSeek fields and our notes
    assert full.usage.prompt_cache_hit_tokens == 5 and full.usage.prompt_cache_miss_tokens == 15
    if "reasoning_content" in want["choices"][0]["message"]:
        assert full.choices[0].message.reasoning_content == state.current_completion_snapshot.choices[0].message.reasoning_content
    if notes is not None:
        assert chunks[-1].recipe == notes and full.recipe == notes
    assert chunks[-1].usage is not None and all(c.usage is None for c in chunks[:-1])
    assert want["choices"][0]["finish_reason"] == _expected_finish(scenario)

    # the accumulating helper: events, then the final completion (which the SDK refuses for
    # length / content_filter by design, api-wire-formats §2.4)
    fin = want["choices"][0]["finish_reason"]
    with client.chat.completions.stream(**kwargs) as s:
        kinds = [ev.type for ev in s]
        snap = openai_view(s.current_completion_snapshot)
        if fin == "length":
            with pytest.raises(openai.LengthFinishReasonError):
                s.get_final_completion()
        elif fin == "content_filter":
            with pytest.raises(openai.ContentFilterFinishReasonError):
                s.get_final_completion()
        else:
            final = openai_view(s.get_final_completion())
            assert {k: v for k, v in final.items() if k != "choices"} == {k: v for k, v in want.items() if k != "choices"}
            assert final["choices"][0]["message"] == want["choices"][0]["message"]
    assert snap == want
    msg = want["choices"][0]["message"]
    if msg.get("content"):
        assert "content.done" in kinds
    if msg.get("tool_calls"):
        assert kinds.count("tool_calls.function.arguments.done") == len(msg["tool_calls"])
        for tc in msg["tool_calls"]:
            assert isinstance(json.loads(tc["function"]["arguments"]), dict)


def _expected_finish(scenario: str) -> str:
    if scenario in ROWS:
        return ROWS[scenario]["accumulated"]["choices"][0]["finish_reason"]
    return "stop"


def test_scenarios_cover_the_brief():
    fins = {_expected_finish(s) for s in SCENARIOS}
    assert fins == {"stop", "tool_calls", "length", "content_filter"}
    assert {"think_answer", "plain", "two_tools", "stop_seq", "no_think_end", "logprobs"} <= set(SCENARIOS)
