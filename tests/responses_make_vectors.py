"""Regenerate fixtures/api/responses_requests.jsonl: curated Responses requests run through deepseek-recipe.

Run: ``/tmp/venv/bin/python tests/responses_make_vectors.py`` (needs deepseek-recipe 0.2.0). Each
row is ``{id, api, request, prompt, special_ranges, token_ids, conversion}`` for an accepted request or
``{id, api, request, error: {stage, status, message}}`` for a rejected one; every value comes
from the oracle, none from recipe.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import oracle  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "api" / "responses_requests.jsonl"
M = "deepseek-v4-pro"
OFF = {"effort": "none"}
U = {"role": "user", "content": "Weather in Paris?"}
F = {"type": "function", "name": "get_weather", "description": "Get weather",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
AP = {"type": "custom", "name": "apply_patch"}


def fc(cid: str, name: str = "get_weather", args: str = '{"city": "Paris"}', **kw: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": name, "arguments": args, **kw}


def fo(cid: str | None, out: Any = "Sunny") -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call_output", "output": out}
    if cid is not None:
        item["call_id"] = cid
    return item


def asst(text: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def rs(*texts: str, summary: Any = ()) -> dict[str, Any]:
    return {"type": "reasoning", "summary": list(summary), "content": [{"type": "reasoning_text", "text": t} for t in texts]}


def ns(name: str, *fns: Any) -> dict[str, Any]:
    return {"type": "namespace", "name": name, "tools": [f if isinstance(f, dict) else {"type": "function", "name": f} for f in fns]}


def body(inp: Any = "Hi", **kw: Any) -> dict[str, Any]:
    b: dict[str, Any] = {"model": M}
    if inp is not None:
        b["input"] = inp
    b.update(kw)
    return b


CASES: dict[str, dict[str, Any]] = {
    # input forms, instructions, roles, parts
    "string_input": body("Hi", reasoning=OFF),
    "empty_string_input": body("", reasoning=OFF),
    "instructions_only": body(None, instructions="Be brief."),
    "instructions_empty_with_input": body("x", instructions="", reasoning=OFF),
    "instructions_and_system_items": body([{"role": "system", "content": "S1"}, U, {"role": "system", "content": ""}, {"role": "system", "content": "S2"}], instructions="INS", reasoning=OFF),
    "developer_is_user": body([{"role": "developer", "content": "D"}, U, {"role": "developer", "content": "D2"}], reasoning=OFF),
    "typed_message_items": body([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "A"}, {"type": "output_text", "text": ""}, {"type": "input_text", "text": "B"}], "status": "completed", "id": "m1"}], reasoning=OFF),
    "image_and_file_parts": body([{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png", "detail": "low"}, {"type": "input_file", "file_id": "f"}]}], reasoning=OFF),
    "system_with_file_part": body([{"role": "system", "content": [{"type": "input_file"}]}, U], reasoning=OFF),
    "empty_parts_user": body([{"role": "user", "content": []}], reasoning=OFF),
    "assistant_first": body([asst("Hello!"), U], reasoning=OFF),
    "assistant_only_empty": body([asst("")], reasoning=OFF),
    "consecutive_assistants_merged": body([U, asst("a"), asst(""), asst([{"type": "output_text", "text": "b", "annotations": []}]), U], reasoning=OFF),
    "assistant_parts_empty_kept": body([U, asst([{"type": "output_text", "text": ""}, {"type": "output_text", "text": ""}]), asst("b")], reasoning=OFF),
    "system_splits_assistants": body([U, asst("a"), {"role": "system", "content": "S"}, asst("b")], tools=[F]),
    "item_reference_ignored": body([{"type": "item_reference", "id": "x"}, U, asst("a"), {"type": "item_reference", "id": "y"}, asst("b")], reasoning=OFF),
    "unknown_item_types_ignored": body([U, {"type": "web_search_call", "id": "ws"}, {"type": "mcp_call"}, {"type": "compaction"}], reasoning=OFF),
    "tool_search_items_ignored": body([U, fc("c"), {"type": "tool_search_call", "call_id": "s", "arguments": {}}, {"type": "tool_search_output", "call_id": "s", "tools": []}, fo("c")], tools=[F], reasoning=OFF),
    "only_item_reference": body([{"type": "item_reference", "id": "x"}], reasoning=OFF),
    # reasoning items
    "reasoning_then_text": body([U, rs("R1"), rs("R2", "R3"), asst("A")], tools=[F]),
    "reasoning_after_text_new_message": body([U, asst("Let me check."), rs("R"), fc("c1"), fo("c1")], tools=[F]),
    "reasoning_empty_skipped": body([U, asst("a"), rs(""), asst("b"), rs(), {"type": "reasoning"}, asst("c")], tools=[F]),
    "reasoning_join_rules": body([U, rs("a", ""), rs(""), rs("", "b"), asst("x")], tools=[F]),
    "reasoning_summary_ignored": body([U, {"type": "reasoning", "summary": [{"type": "summary_text", "text": "S"}], "encrypted_content": "zz"}, asst("a")], tools=[F]),
    "reasoning_untyped_parts": body([U, {"type": "reasoning", "content": [{"text": "t"}, {"type": "other", "text": "u"}]}, asst("a")], tools=[F]),
    "reasoning_without_tools_dropped": body([U, rs("R"), asst("A"), U]),
    "reasoning_alone": body([U, rs("R")], tools=[F]),
    # function calls and outputs
    "calls_sorted_outputs_shuffled": body([U, fc("c2"), fc("c1", args='{"city": "A", "n": 1.5e-7}'), fo("c1", "o1"), fo("c2", "o2")], tools=[F], reasoning=OFF),
    "calls_after_partial_outputs": body([U, fc("c"), fc("d"), fo("c"), fc("e"), fo("d"), fo("e")], tools=[F], reasoning=OFF),
    "two_rounds": body([U, fc("c"), fo("c"), asst("x"), fc("d"), fo("d"), asst("done")], tools=[F]),
    "output_parts": body([U, fc("c"), fo("c", [{"type": "input_text", "text": "a"}, {"type": "input_image"}, {"type": "input_file"}, {"type": "input_text", "text": ""}])], tools=[F], reasoning=OFF),
    "output_empty_parts": body([U, fc("c"), fo("c", [])], reasoning=OFF),
    "output_without_call_id_after_tool": body([U, fc("c"), fo("c", "o"), fo(None, "x")], reasoning=OFF),
    "output_without_call_id_after_assistant": body([U, asst("a"), fo(None, "x"), U], reasoning=OFF),
    "calls_without_tools": body([fc("c", name="f", args="{}"), fo("c")], reasoning=OFF),
    "invalid_arguments": body([U, fc("c", args="not json"), fc("d", args="[1, 2]"), fo("c"), fo("d")], tools=[F], reasoning=OFF),
    "call_namespace_field": body([U, fc("c", name="f", namespace="ns"), fo("c")], reasoning=OFF),
    "call_namespace_seam": body([U, fc("c", name="_f", namespace="ns_"), fc("d", name="a", namespace=""), fo("c"), fo("d")], reasoning=OFF),
    "custom_tool_call_round": body([U, {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"}, {"type": "custom_tool_call_output", "call_id": "c", "output": "done"}], tools=[AP], reasoning=OFF),
    "custom_tool_call_no_output_field": body([U, {"type": "custom_tool_call", "call_id": "c", "name": "zz", "input": '{"a": 1}'}, {"type": "custom_tool_call_output", "call_id": "c"}], reasoning=OFF),
    "thinking_with_tools_history": body([U, rs("think"), fc("c"), fo("c"), rs("more"), asst("It is sunny.")], tools=[F], reasoning={"effort": "max"}),
    # pairing and call-id errors
    "err_no_call_for_output": body([U, fo("c9", "x")], tools=[F]),
    "err_no_output_for_call": body([U, fc("b"), fc("a")], tools=[F]),
    "err_user_interrupts": body([U, fc("c"), U, fo("c")], tools=[F]),
    "err_reasoning_interrupts": body([U, fc("c"), rs("R"), fo("c")], tools=[F]),
    "err_empty_reasoning_interrupts": body([U, fc("c"), rs(""), fo("c")], tools=[F]),
    "err_assistant_interrupts": body([U, fc("c"), asst("x"), fo("c")], tools=[F]),
    "err_output_without_id_while_pending": body([U, fc("c"), fo(None), fo("c")], tools=[F]),
    "err_duplicate_call_id": body([U, fc("c"), fc("c"), fo("c")], tools=[F]),
    "err_duplicate_call_id_later_round": body([U, fc("c"), fo("c"), fc("c"), fo("c")], tools=[F]),
    "err_duplicate_output": body([U, fc("c"), fo("c"), fo("c")], tools=[F]),
    "err_empty_call_id": body([U, fc(""), fo("")]),
    "err_empty_output_call_id": body([U, fc("c"), fo("")]),
    "err_partial_then_user": body([U, fc("b"), fc("a"), fo("a"), U], tools=[F]),
    # tools
    "function_tool_strict": body(tools=[{**F, "strict": True}], reasoning=OFF),
    "function_tool_strict_no_params": body(tools=[{"type": "function", "name": "f", "strict": True}, {"type": "function", "name": "g", "strict": True}], reasoning=OFF),
    "function_tool_null_fields": body(tools=[{"type": "function", "name": "f", "description": None, "parameters": None, "strict": None, "defer_loading": True}], reasoning=OFF),
    "namespace_tools": body(tools=[F, ns("fs", {"type": "function", "name": "read", "description": "Read", "parameters": {"type": "object", "properties": {"p": {"type": "string"}}}}, "write"), {"type": "web_search"}], reasoning=OFF),
    "namespace_collisions": body(tools=[{"type": "function", "name": "n__f_1"}, ns("n", "f"), {"type": "function", "name": "n__f"}, ns("n", "f")], reasoning=OFF),
    "namespace_seam_names": body(tools=[ns("a_", "_b"), ns("a", "__b"), ns("x", "_"), ns("x_", "y")], reasoning=OFF),
    "namespace_empty": body(tools=[ns("n")], reasoning=OFF),
    "namespace_call_uses_map": body([U, fc("c", name="a", namespace="ns"), fo("c")], tools=[{"type": "function", "name": "ns__a"}, ns("ns", "a")], reasoning=OFF),
    "hosted_tools_dropped": body(tools=[{"type": "web_search", "search_context_size": "low"}, {"type": "web_search_preview"}, {"type": "file_search", "vector_store_ids": ["v"]}, {"type": "mcp", "server_label": "x"}, {"type": "tool_search"}, {"type": "code_interpreter"}], reasoning=OFF),
    "apply_patch_tool": body(tools=[{**AP, "description": "ignored"}, {"type": "function", "name": "g", "strict": False}], reasoning=OFF),
    "err_custom_tool": body(tools=[{"type": "custom", "name": "x"}]),
    "err_custom_in_namespace": body(tools=[ns("n", {"type": "custom", "name": "apply_patch"})]),
    "err_namespace_duplicate": body(tools=[ns("n", "f", "f")]),
    "err_tool_names_unique": body(tools=[F, F]),
    "err_tool_name_pattern": body(tools=[{"type": "function", "name": "a b"}]),
    "err_tool_name_empty": body(tools=[{"type": "function", "name": ""}]),
    "err_namespace_name_pattern": body(tools=[ns("n s", "f")]),
    "err_inner_name_pattern": body(tools=[ns("n", "a b")]),
    "err_tool_schema": body(tools=[{"type": "function", "name": "f", "parameters": {"type": "string"}}]),
    "err_namespace_tool_schema": body(tools=[ns("n", {"type": "function", "name": "f", "parameters": 5})]),
    "err_strict_mixing": body(tools=[{**F, "strict": True}, {"type": "function", "name": "g"}]),
    "err_strict_normalisation": body(tools=[{"type": "function", "name": "f", "strict": True, "parameters": {"type": "object", "properties": {"a": {"type": "object"}}}}]),
    # tool_choice
    "choice_none_keeps_history": body([U, fc("c", name="a", namespace="ns"), fo("c")], tools=[{"type": "function", "name": "ns__a"}, ns("ns", "a")], tool_choice="none"),
    "choice_none_allows_mixing": body(tools=[{**F, "strict": True}, {"type": "function", "name": "g"}], tool_choice="none"),
    "choice_required": body(tools=[F], tool_choice="required", reasoning=OFF),
    "choice_named_function": body(tools=[F, {"type": "function", "name": "g", "strict": True}], tool_choice={"type": "function", "name": "g"}, reasoning=OFF),
    "choice_named_namespace_flat": body(tools=[F, ns("ns", "a")], tool_choice={"type": "function", "name": "ns__a"}, reasoning=OFF),
    "choice_custom_apply_patch": body(tools=[F, AP], tool_choice={"type": "custom", "name": "apply_patch"}, reasoning=OFF),
    "choice_web_search_is_auto": body(tools=[F], tool_choice={"type": "web_search"}, reasoning=OFF),
    "choice_required_without_tools": body(tool_choice="required", reasoning={"effort": "high"}),
    "choice_named_without_tools": body(tools=[{"type": "web_search"}], tool_choice={"type": "function", "name": "zz"}),
    "err_choice_unknown_name": body(tools=[F], tool_choice={"type": "function", "name": "zz"}, reasoning=OFF),
    "err_choice_local_namespace_name": body(tools=[ns("ns", "a")], tool_choice={"type": "function", "name": "a"}, reasoning=OFF),
    "err_choice_required_thinking": body(tools=[F], tool_choice="required"),
    "err_choice_allowed_tools": body(tools=[F], tool_choice={"type": "allowed_tools", "mode": "auto", "tools": []}),
    "err_choice_bad_string": body(tools=[F], tool_choice="sometimes"),
    # text.format
    "format_text": body(text={"format": {"type": "text"}, "verbosity": "low"}),
    "format_json_object": body("Reply in JSON", text={"format": {"type": "json_object"}}, reasoning=OFF),
    "format_json_object_instructions": body("u", instructions="json please", text={"format": {"type": "json_object"}}),
    "format_json_object_tool_output": body([U, fc("c"), fo("c", "JSON")], text={"format": {"type": "json_object"}}, reasoning=OFF),
    "format_json_schema_strict": body(text={"format": {"type": "json_schema", "name": "s", "schema": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}}, "strict": True}}),
    "format_json_schema_plain": body(text={"format": {"type": "json_schema", "name": "s", "description": "d", "schema": {"type": "object", "properties": {"x": {"type": "number"}}, "title": "T"}}}, reasoning=OFF),
    "format_json_schema_with_tools": body(tools=[F], text={"format": {"type": "json_schema", "name": "s", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}, "strict": True}}),
    "format_text_with_strict_tools": body(tools=[{**F, "strict": True}], text={"format": {"type": "text"}}, reasoning=OFF),
    "format_json_with_strict_tools_choice_none": body("json", tools=[{**F, "strict": True}], tool_choice="none", text={"format": {"type": "json_object"}}),
    "err_json_object_with_strict_tools": body("json", tools=[{**F, "strict": True}], text={"format": {"type": "json_object"}}),
    "err_json_schema_with_strict_tools": body(tools=[{**F, "strict": True}], text={"format": {"type": "json_schema", "name": "s", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
    "err_json_object_no_word": body("Hi", text={"format": {"type": "json_object"}}),
    "err_json_word_in_reasoning_only": body([U, rs("json"), asst("x")], text={"format": {"type": "json_object"}}),
    "err_json_schema_null": body(text={"format": {"type": "json_schema", "name": "s", "schema": None}}),
    "err_json_schema_strict_no_props": body(text={"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": True}}),
    "err_format_regex": body(text={"format": {"type": "regex", "regex": "a"}}),
    "err_format_missing_name": body(text={"format": {"type": "json_schema", "schema": {}}}),
    "err_format_null": body(text={"format": None}),
    # reasoning.effort, sampling, limits
    "effort_minimal": body(reasoning={"effort": "minimal"}),
    "effort_medium": body(reasoning={"effort": "medium", "summary": "auto"}),
    "effort_xhigh": body(reasoning={"effort": "xhigh"}),
    "effort_ultra": body(reasoning={"effort": "ultra"}),
    "effort_max": body(reasoning={"effort": "max"}),
    "effort_unspecified": body(reasoning={"summary": "detailed"}),
    "effort_map_form": body(reasoning={"effort": {"low": None}}),
    "sampling_thinking_off": body(reasoning=OFF, temperature=0.3, top_p=0.5, top_logprobs=5, max_output_tokens=100),
    "sampling_thinking_on_tools": body(tools=[F], temperature=0.3, top_p=0.5, top_logprobs=0),
    "ignored_fields": body(reasoning=OFF, stream=True, store=False, metadata={"a": "b"}, previous_response_id="resp_1", parallel_tool_calls=False, seed=5, stop=["x"], n=2, user="u1", include=["reasoning.encrypted_content"], truncation="auto"),
    "err_max_output_tokens_zero": body(max_output_tokens=0),
    "err_max_output_tokens_big": body(max_output_tokens=393217),
    "err_top_logprobs_21": body(top_logprobs=21),
    "err_temperature": body(temperature=2.5, reasoning=OFF),
    "err_temperature_f32_overflow": body(temperature=1e39),
    "err_top_p_zero": body(top_p=0),
    "err_model": body(model="gpt-4o"),
    # parse-stage errors
    "err_no_input_nor_instructions": body(None),
    "err_empty_items": body([], instructions="I"),
    "err_parse_input_number": body(5),
    "err_parse_item_string": body(["x"]),
    "err_parse_item_without_role": body([{"content": "x"}]),
    "err_parse_role_tool": body([{"role": "tool", "content": "x"}]),
    "err_parse_content_null": body([{"role": "user", "content": None}]),
    "err_parse_part_refusal": body([{"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]),
    "err_parse_output_text_in_output": body([U, fc("c"), fo("c", [{"type": "output_text", "text": "x"}])]),
    "err_parse_call_missing_arguments": body([U, {"type": "function_call", "call_id": "c", "name": "f"}]),
    "err_parse_arguments_object": body([U, fc("c", args={})]),  # type: ignore[arg-type]
    "err_parse_namespace_number": body([U, fc("c", namespace=5), fo("c")]),
    "err_parse_output_null": body([U, fc("c"), fo("c", None)]),
    "err_parse_reasoning_content_string": body([U, {"type": "reasoning", "content": "q"}]),
    "err_parse_tool_missing_type": body(tools=[{"name": "f"}]),
    "err_parse_namespace_web_search": body(tools=[ns("n", {"type": "web_search"})]),
    "err_parse_web_search_context_size": body(tools=[{"type": "web_search", "search_context_size": "huge"}]),
    "err_parse_effort": body(reasoning={"effort": "extreme"}),
    "err_parse_max_output_tokens_float": body(max_output_tokens=10.0),
    "err_parse_top_logprobs_256": body(top_logprobs=256),
    "err_parse_stream_string": body(stream="yes"),
    "err_parse_image_detail": body([{"role": "user", "content": [{"type": "input_image", "detail": "ultra"}]}]),
    "err_parse_tool_choice_empty_object": body(tool_choice={}),
}


def row(case_id: str, request: dict[str, Any]) -> dict[str, Any]:
    wire = json.dumps(request, ensure_ascii=False)
    res = oracle.convert("responses", wire)
    out: dict[str, Any] = {"id": case_id, "api": "responses", "request": request}
    if not res["ok"]:
        out["error"] = {"stage": res["stage"], "status": 400, "message": res["message"]}
        return out
    req = oracle.dr.ResponsesRequest(wire)
    conv = req.convert(oracle.options()).conversation
    conversion = dict(res["conversion"])
    oc = conversion["output_constraint"]
    if oc:
        oc["kind"] = str(oc["kind"]).rsplit(".", 1)[-1]
    conversion.update(
        reasoning_effort=None if conv.reasoning_effort is None else str(conv.reasoning_effort),
        tool_choice=str(conv.tool_choice),
        response_format=str(conv.response_format),
    )
    namespace_map = oracle.dr.ResponsesRequest(wire).namespace_tool_map(oracle.options())
    out.update(prompt=res["prompt"], special_ranges=res["special_ranges"], token_ids=res["token_ids"], conversion=conversion,
               namespace_tool_map={k: list(v) for k, v in namespace_map.items()})
    return out


def main() -> None:
    rows = [row(k, v) for k, v in CASES.items()]
    with open(OUT, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} rows ({sum('error' in r for r in rows)} rejected) -> {OUT}")


if __name__ == "__main__":
    main()
