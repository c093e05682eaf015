"""Responses output vs deepseek-recipe 0.2.0: recorded event streams and accumulated responses
(fixtures/api/completions.jsonl), plus the oracle run live for all-at-once pushes, the request echo,
item status / phase rules, namespace tools and the custom apply_patch tool.

Compared structurally: call ids must match ``call_\\d\\d_…``, ``created_at``/``completed_at`` must be
ints; everything else must be equal, except the deviations in DEVIATIONS (docs/streaming.md,
"Responses deviations"), each asserted explicitly so the table cannot go stale.
"""

from __future__ import annotations

import pytest
from output_parity_support import DEVIATIONS, ids_of
from responses_output_support import (
    DELTAS,
    check_invariants,
    final_without_notes,
    merged,
    oracle_run,
    our_response,
    recording_kwargs,
    responses_rows,
    stream_payloads,
    strip_notes,
    structural,
)

ROWS = responses_rows()
IDS = [r["scenario"] for r in ROWS]


def _notes(payloads: list[dict], scenario: str) -> list[dict]:
    return final_without_notes(payloads, ["unclosed_reasoning"] if "notes" in DEVIATIONS.get(scenario, ()) else None)


def test_every_responses_scenario_is_present():
    assert len(ROWS) == 11
    assert set(DEVIATIONS) <= set(IDS)
    assert all(e["event"] == e["data"]["type"] for r in ROWS for e in r["events"])


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_recorded_stream_one_id_per_push(row):
    ours = stream_payloads(row["request"], [[i] for i in row["completion_token_ids"]], row["backend_finish"],
                           **recording_kwargs(row))
    check_invariants(ours)
    ours = _notes(ours, row["scenario"])
    want = [e["data"] for e in row["events"]]
    dev = DEVIATIONS.get(row["scenario"], set())
    # the same stream once adjacent deltas are joined: items, parts, texts, arguments, done events,
    # statuses, phases, final response (usage and echo included)
    assert structural(merged(ours)) == structural(merged(want))
    if dev & {"argument_fragments", "utf8_prefix"}:
        # deviations 11 / 12: delta granularity only (so the sequence numbers shift)
        assert structural(ours) != structural(want)

        def others(ps: list[dict]) -> list[dict]:
            return [{k: v for k, v in p.items() if k != "sequence_number"} for p in structural(ps) if p["type"] not in DELTAS]

        assert others(ours) == others(want)
    else:
        assert structural(ours) == structural(want)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
@pytest.mark.parametrize("how", ["stream", "response"])
def test_recorded_accumulated_response(row, how):
    """``stream``: the final event's response; ``response``: the non-streamed object. Both equal the
    recorded accumulated response."""
    ids = row["completion_token_ids"]
    kw = recording_kwargs(row)
    if how == "stream":
        ours = stream_payloads(row["request"], [[i] for i in ids], row["backend_finish"], **kw)[-1]["response"]
    else:
        ours = our_response(row["request"], ids, row["backend_finish"], **kw)
    if "notes" in DEVIATIONS.get(row["scenario"], ()):
        assert ours.pop("recipe") == {"notes": ["unclosed_reasoning"]}
    assert structural(ours) == structural(row["accumulated"])


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_all_at_once_vs_oracle(row):
    pytest.importorskip("deepseek_recipe")
    ids = row["completion_token_ids"]
    want = oracle_run(row["request"], [ids], row["backend_finish"])
    ours = stream_payloads(row["request"], [ids], row["backend_finish"], **recording_kwargs(row))
    check_invariants(ours)
    ours = _notes(ours, row["scenario"])
    assert structural(merged(ours)) == structural(merged(want))


# ---------------------------------------------------------------- request echo (live oracle)

FN = {"type": "function", "name": "get_w", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
ECHO_BODIES = [
    {},
    {"reasoning": None, "text": None, "tools": None, "tool_choice": None, "instructions": None},
    {"reasoning": {"effort": "max"}},
    {"reasoning": {"effort": "xhigh", "generate_summary": "concise"}},
    {"reasoning": {"effort": "low", "summary": "auto", "generate_summary": "concise"}},
    {"reasoning": {"effort": {"low": None}, "summary": {"detailed": None}}},
    {"text": {"verbosity": "high"}},
    {"text": {"format": {"type": "json_object"}, "verbosity": {"medium": None}}},
    {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
                         "strict": True, "description": "D"}}},
    {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}},
    {"tool_choice": "none", "tools": [FN]},
    {"tool_choice": {"type": "web_search"}},
    {"tool_choice": {"type": "web_search_2025_08_26"}},
    {"tools": [{"type": "custom", "name": "apply_patch", "description": "x", "format": {"type": "grammar"}}]},
    {"tools": [{"type": "file_search", "vector_store_ids": ["a"]}, {"type": "mcp", "server_label": "x"},
               {"type": "web_search_preview"}, FN]},
    {"tools": [{"type": "web_search", "search_context_size": "high",
                "user_location": {"type": "approximate", "city": "P", "country": "FR", "zzz": 1}}]},
    {"tools": [{"type": "web_search_2025_08_26", "user_location": None}, {"type": "web_search", "user_location": {}}]},
    {"tools": [{"type": "function", "name": "f", "description": "d", "parameters": None, "strict": False, "defer_loading": True}]},
    {"tools": [{"type": "namespace", "name": "fs", "description": "files",
                "tools": [{"type": "function", "name": "read", "extra": 2, "parameters": {"type": "object"}}]}, FN]},
    {"temperature": 0, "top_p": 0.3, "top_logprobs": 5, "user": "me", "instructions": "", "max_output_tokens": 7},
    {"temperature": 0.7, "top_p": 1, "instructions": "Be terse."},
    {"store": True, "parallel_tool_calls": False, "metadata": {"a": "b"}, "truncation": "auto", "service_tier": "flex",
     "background": True, "safety_identifier": "s", "prompt_cache_key": "k", "max_tool_calls": 3},
]


@pytest.mark.parametrize("extra", ECHO_BODIES, ids=[str(i) for i in range(len(ECHO_BODIES))])
def test_echo_matches_oracle(extra):
    pytest.importorskip("deepseek_recipe")
    body = {"model": "deepseek-v4-pro", "input": "Answer in json.", **extra}
    want = oracle_run(body, [])
    ours = stream_payloads(body, [], "stop", **recording_kwargs())
    if "recipe" in ours[-1]["response"]:
        # an empty output in thinking mode never closed its reasoning (parser note, deviation 13);
        # with a json_schema format, the empty answer is also reported as not matching it
        notes = ours[-1]["response"]["recipe"]["notes"]
        assert notes[0] == "unclosed_reasoning"
        fmt = (extra.get("text") or {}).get("format") or {}
        expected_rest = ["schema_mismatch", "schema_error: the answer is not JSON"] if fmt.get("type") == "json_schema" else []
        assert notes[1:] == expected_rest
        ours = strip_notes(ours)
    assert structural(ours) == structural(want)


def test_tool_search_echo_deviation():
    """Deviation: the request model keeps only ``type`` of hosted tools it drops, so a
    ``tool_search`` tool is echoed with null ``execution``/``description``/``parameters``
    (deepseek-recipe echoes the given values)."""
    pytest.importorskip("deepseek_recipe")
    body = {"model": "deepseek-v4-pro", "input": "x",
            "tools": [{"type": "tool_search", "execution": "client", "description": "d", "parameters": {"type": "object"}}]}
    theirs = oracle_run(body, [])[0]["response"]["tools"]
    ours = stream_payloads(body, [], "stop", **recording_kwargs())[0]["response"]["tools"]
    assert theirs == [{"type": "tool_search", "execution": "client", "description": "d", "parameters": {"type": "object"}}]
    assert ours == [{"type": "tool_search", "execution": None, "description": None, "parameters": None}]
    body["tools"][0] = {"type": "tool_search"}
    assert oracle_run(body, [])[0]["response"]["tools"] == stream_payloads(body, [], "stop", **recording_kwargs())[0]["response"]["tools"]


# ---------------------------------------------------------------- status, phase, calls (live oracle)

TOOLS = [FN, {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}]
CALL = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜DSML｜parameter name="city" string="true">Paris'
        '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
CALL2 = CALL.replace("\n</｜DSML｜tool_calls>", '\n<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter name="tz" string="true">UTC'
                     '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
NS_TOOLS = [{"type": "namespace", "name": "fs", "tools": [{"type": "function", "name": "read"}]},
            {"type": "function", "name": "fs__read"}, {"type": "custom", "name": "apply_patch"}]
NS_CALLS = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="fs__read_1">\n</｜DSML｜invoke>\n<｜DSML｜invoke name="fs__read">\n'
            '</｜DSML｜invoke>\n<｜DSML｜invoke name="apply_patch">\n<｜DSML｜parameter name="input" string="true">*** Begin "P"\n'
            '</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name="apply_patch">\n<｜DSML｜parameter name="x" string="true">a'
            '</｜DSML｜parameter>\n<｜DSML｜parameter name="input" string="false">5</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
            '<｜DSML｜invoke name="nope__x">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')


def _b(effort: str, tools: list | None = None, **kw) -> dict:
    b = {"model": "deepseek-v4-pro", "input": "Weather in Paris?", "reasoning": {"effort": effort}, **kw}
    if tools:
        b["tools"] = tools
    return b


SCENARIOS = {
    "truncated_call_length": (_b("low", TOOLS), "R</think>Checking.\n\n" + CALL[:CALL.index("Paris") + 3], "length"),
    "complete_call_length": (_b("low", TOOLS), "R</think>Checking.\n\n" + CALL, "length"),
    "call_content_filter": (_b("low", TOOLS), "R</think>" + CALL, "content_filter"),
    "reasoning_only_length": (_b("low"), "R more", "length"),
    "reasoning_closed_length": (_b("low"), "R</think>", "length"),
    "empty_stop": (_b("low"), "", "stop"),
    "empty_length": (_b("none"), "", "length"),
    "empty_reasoning": (_b("low"), "</think>Hi", "stop"),
    "newlines_only": (_b("none"), "\n\n", "stop"),
    "message_then_two_calls": (_b("none", TOOLS), "Hi.\n\n" + CALL2, "stop"),
    "parallel_calls_length": (_b("none", TOOLS), CALL2, "length"),
    "namespace_and_apply_patch": (_b("none", NS_TOOLS), "Hi" + NS_CALLS, "stop"),
    "apply_patch_truncated": (_b("none", NS_TOOLS), NS_CALLS[:NS_CALLS.index("*** Begin") + 6], "length"),
    "json_schema_answer": (_b("none", text={"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}),
                           '{"a": 1}', "stop"),
}
#: scenario -> parser notes on the final response (deviation 13)
SCENARIO_NOTES = {
    "truncated_call_length": ["truncated_tool_call"],
    "reasoning_only_length": ["unclosed_reasoning"],
    "empty_stop": ["unclosed_reasoning"],
    "namespace_and_apply_patch": ["undeclared_tool"],
    "apply_patch_truncated": ["truncated_tool_call"],
}
#: scenario -> the parts of the stream that differ by a documented deviation
SCENARIO_DEVIATIONS = {
    "truncated_call_length": "truncated_call",  # deviation 1: arguments closed as valid JSON
    "apply_patch_truncated": "apply_patch_granularity",
    "namespace_and_apply_patch": "apply_patch_granularity",
}


def _without_args(payloads: list[dict]) -> list[dict]:
    """Events with argument / custom input deltas and the texts they build removed."""
    out = []
    for p in payloads:
        if p["type"] in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            continue
        out.append(p)
    return merged(out)


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("push", ["one", "all"])
def test_scenarios_vs_oracle(name, push):
    pytest.importorskip("deepseek_recipe")
    body, text, fin = SCENARIOS[name]
    ids = ids_of(text)
    chunks = [[i] for i in ids] if push == "one" else [ids]
    want = oracle_run(body, chunks, fin)
    ours = stream_payloads(body, chunks, fin, **recording_kwargs())
    check_invariants(ours)
    ours = final_without_notes(ours, SCENARIO_NOTES.get(name))
    dev = SCENARIO_DEVIATIONS.get(name)
    if dev != "truncated_call":
        # same stream once adjacent deltas are joined
        assert structural(merged(ours)) == structural(merged(want))
    if dev is None:
        return
    m_ours, m_want = structural(merged(ours)), structural(merged(want))
    if dev == "truncated_call":
        # deviation 1: ours '{"city": "Par"}' (closed, valid JSON); theirs the raw prefix '{"city": "Par'
        fix = '{"city": "Par"}', '{"city": "Par'
        assert m_ours[-1]["response"]["output"][-1]["arguments"] == fix[0]
        assert m_want[-1]["response"]["output"][-1]["arguments"] == fix[1]
        import json

        assert json.loads(json.dumps(m_ours).replace(json.dumps(fix[0])[1:-1], json.dumps(fix[1])[1:-1])) == m_want
    else:
        # deviation: a custom tool call's input comes as one delta once the invoke is complete
        # (theirs streams it piece by piece); every other event is identical
        ctc = [p for p in ours if p["type"] == "response.custom_tool_call_input.delta"]
        assert len(ctc) == len({p["item_id"] for p in ctc})
        if push == "one":
            assert len([p for p in want if p["type"] == "response.custom_tool_call_input.delta"]) > len(ctc)
        assert structural(_without_args(ours)) == structural(_without_args(want))
        if name == "namespace_and_apply_patch":
            out = m_ours[-1]["response"]["output"]
            assert [(o["type"], o.get("name"), o.get("namespace")) for o in out] == [
                ("message", None, None), ("function_call", "read", "fs"), ("function_call", "fs__read", None),
                ("custom_tool_call", "apply_patch", None), ("custom_tool_call", "apply_patch", None),
                ("function_call", "nope__x", None)]
            assert [o.get("input") for o in out[3:5]] == ['*** Begin "P"\n', '{"x": "a", "input": 5}']
            assert out[0]["phase"] == "commentary"
