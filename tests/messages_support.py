"""Test helper: the Messages request path (parse -> convert -> render -> ids) without pipeline.ADAPTERS."""

from __future__ import annotations

from typing import Any

from recipe.api.common import output_constraint, parsing_options
from recipe.api.messages import messages_to_conversation, parse_messages_request
from recipe.encodings.deepseek_v4.render import render
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS, Options
from recipe.prompt import encode_prompt
from recipe.tokenizer import load_tokenizer

#: deepseek-recipe OutputConstraint kind names -> ours.
ORACLE_KINDS = {"Json": "json", "Regex": "regex", "ToolCall": "tool_call", "ToolCallRequired": "tool_call_required"}


def run_messages(body: Any, options: Options = PARITY_OPTIONS) -> dict[str, Any]:
    """Our side, shaped like ``oracle.convert``: ``{"ok": True, prompt, special_ranges, token_ids,
    conversion, conv}`` or ``{"ok": False, stage, message, error}``."""
    try:
        req = parse_messages_request(body)
        conv = messages_to_conversation(req, options)
    except RequestError as err:
        return {"ok": False, "stage": err.stage, "message": err.message, "error": err}
    prompt = render(conv)
    oc = output_constraint(conv)
    po = parsing_options(conv)
    return {
        "ok": True,
        "prompt": prompt.text,
        "special_ranges": [list(r) for r in prompt.special_ranges],
        "token_ids": encode_prompt(load_tokenizer(), prompt),
        "conv": conv,
        "conversion": {
            "thinking": conv.thinking,
            "output_constraint": None if oc is None else {"kind": oc.kind, "schema": oc.schema},
            "parse_tool_calls": po.parse_tool_calls,
            "starts_in_tool_calls": po.starts_in_tool_calls,
            "parse_json_output": po.parse_json_output,
            "thinking_stage": po.thinking_stage,
            "stop_sequences": list(conv.stop),
            "max_tokens": conv.max_tokens,
            "temperature": conv.sampling.temperature,
            "top_p": conv.sampling.top_p,
            "logprobs": conv.sampling.logprobs,
            "top_logprobs": conv.sampling.top_logprobs,
            "seed": conv.sampling.seed,
        },
    }


def normalise_oracle(theirs: dict[str, Any]) -> dict[str, Any]:
    """Map deepseek-recipe's OutputConstraint kind spelling onto ours (in place; returns it)."""
    if theirs.get("ok"):
        oc = theirs["conversion"]["output_constraint"]
        if oc is not None:
            kind = oc["kind"].rsplit(".", 1)[-1]
            oc["kind"] = ORACLE_KINDS.get(kind, kind)
    return theirs
