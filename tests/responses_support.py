"""Shared helpers for the Responses request tests: our pipeline without pipeline.ADAPTERS.

``prepare_responses(body)`` does what ``recipe.pipeline.prepare(body, "responses")`` will do once the
adapter is registered: parse -> convert -> render -> encode, plus output constraint and parsing
options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recipe.api.common import check_model, output_constraint, parsing_options
from recipe.api.responses import parse_responses_request, responses_to_conversation
from recipe.conversation import Conversation, OutputConstraint, ParsingOptions
from recipe.encodings.deepseek_v4.render import render
from recipe.errors import RequestError
from recipe.options import DEFAULT_OPTIONS, Options
from recipe.prompt import Prompt, encode_prompt
from recipe.tokenizer import load_tokenizer

#: Options under which recipe answers exactly as deepseek-recipe 0.2.0 (400s included).
PARITY: Options = DEFAULT_OPTIONS.parity() if hasattr(DEFAULT_OPTIONS, "parity") else DEFAULT_OPTIONS

#: deepseek-recipe OutputConstraint kind spellings -> ours.
ORACLE_KINDS = {"Json": "json", "Regex": "regex", "ToolCall": "tool_call", "ToolCallRequired": "tool_call_required"}


@dataclass(frozen=True)
class Prepared:
    request: Any
    encoding: str
    conversation: Conversation
    prompt: Prompt
    token_ids: list[int]
    parsing: ParsingOptions
    output_constraint: OutputConstraint | None


def prepare_responses(body: Any, options: Options = PARITY) -> Prepared:
    """Parse, convert, render and encode a Responses body (raises RequestError)."""
    req = parse_responses_request(body)
    conv = responses_to_conversation(req, options)
    encoding = check_model(req.model, options)
    prompt = render(conv)
    return Prepared(req, encoding, conv, prompt, encode_prompt(load_tokenizer(), prompt), parsing_options(conv), output_constraint(conv))


def conversion(prep: Prepared) -> dict[str, Any]:
    """The conversion values the oracle reports, from our side."""
    c, oc = prep.conversation, prep.output_constraint
    return {
        "thinking": c.thinking,
        "output_constraint": None if oc is None else {"kind": oc.kind, "schema": oc.schema},
        "parse_tool_calls": prep.parsing.parse_tool_calls,
        "starts_in_tool_calls": prep.parsing.starts_in_tool_calls,
        "parse_json_output": prep.parsing.parse_json_output,
        "thinking_stage": prep.parsing.thinking_stage,
        "stop_sequences": list(c.stop),
        "max_tokens": c.max_tokens,
        "temperature": c.sampling.temperature,
        "top_p": c.sampling.top_p,
        "logprobs": c.sampling.logprobs,
        "top_logprobs": c.sampling.top_logprobs,
        "seed": c.sampling.seed,
    }


def ours(body: Any, options: Options = PARITY) -> dict[str, Any]:
    """Our result in the oracle's shape: ``{"ok", prompt, special_ranges, token_ids, conversion}``
    or ``{"ok": False, "stage", "message", "param"}``."""
    try:
        prep = prepare_responses(body, options)
    except RequestError as err:
        return {"ok": False, "stage": err.stage, "message": err.message, "param": err.param, "status": err.status}
    return {
        "ok": True,
        "prompt": prep.prompt.text,
        "special_ranges": [list(r) for r in prep.prompt.special_ranges],
        "token_ids": prep.token_ids,
        "conversion": conversion(prep),
    }


def normalise_oracle(result: dict[str, Any]) -> dict[str, Any]:
    """Map the oracle's OutputConstraint kind enum to our spelling (in place) and return it."""
    oc = result.get("conversion", {}).get("output_constraint") if result.get("ok") else None
    if oc:
        oc["kind"] = ORACLE_KINDS.get(oc["kind"].rsplit(".", 1)[-1], oc["kind"])
    return result
