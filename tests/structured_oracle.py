"""deepseek-recipe 0.2.0 as an oracle for JSON printing and schema handling (tests only)."""

from __future__ import annotations

import json
from typing import Any

import pytest

dsr = pytest.importorskip("deepseek_recipe")

OPTS = dsr.ConversionOptions().with_model_alias("deepseek-v4-pro", dsr.ModelVersion.DeepseekV4Pro)
ENC = dsr.DeepseekV4Encoding()
_INVOKE = '<｜DSML｜invoke name="f">\n'
_RF_MARK = "to reply:\n"


def run(body: Any) -> tuple:
    """("parse", msg) | ("convert", msg) | ("ok", prompt, (kind, schema) or None)."""
    try:
        req = dsr.ChatCompletionRequest(body)
    except ValueError as exc:
        return ("parse", str(exc))
    try:
        conv = req.convert(OPTS)
    except dsr.ConversionError as exc:
        assert exc.status_code == 400
        return ("convert", exc.args[0])
    prompt = ENC.render_conversation(conv.conversation).prompt
    oc = conv.inference_options.output_constraint
    return ("ok", prompt, oc and (oc.kind, oc.schema))


def _tool_body(parameters: Any, strict: bool | None) -> str:
    fn: dict[str, Any] = {"name": "f", "parameters": parameters}
    if strict is not None:
        fn["strict"] = strict
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": fn}]}
    return json.dumps(body, allow_nan=False)


def tool_schema(parameters: Any, strict: bool | None) -> tuple:
    """("ok", prompt tool line, constraint string) or ("convert"|"parse", message)."""
    r = run(_tool_body(parameters, strict))
    if r[0] != "ok":
        return r
    prompt = r[1]
    start = prompt.index("### Available Tool Schemas\n\n") + len("### Available Tool Schemas\n\n")
    line = prompt[start : prompt.index("\n\nYou MUST strictly follow", start)]
    return ("ok", line, r[2][1])


def response_schema(schema: Any, strict: bool | None) -> tuple:
    """("ok", prompt schema text, constraint string) or ("convert"|"parse", message)."""
    js: dict[str, Any] = {"name": "n", "schema": schema}
    if strict is not None:
        js["strict"] = strict
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi json"}],
            "response_format": {"type": "json_schema", "json_schema": js}}
    r = run(json.dumps(body, allow_nan=False))
    if r[0] != "ok":
        return r
    prompt = r[1]
    start = prompt.index(_RF_MARK) + len(_RF_MARK)
    return ("ok", prompt[start : prompt.index("<｜User｜>", start)], r[2][1])


def rendered_arguments(arguments: str) -> str:
    """The DSML parameter lines deepseek-recipe renders for a history tool call with these arguments."""
    body = {
        "model": "deepseek-v4-pro",
        "reasoning_effort": "none",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    }
    r = run(body)
    assert r[0] == "ok", r
    prompt = r[1]
    start = prompt.index(_INVOKE) + len(_INVOKE)
    return prompt[start : prompt.index("</｜DSML｜invoke>", start)]
