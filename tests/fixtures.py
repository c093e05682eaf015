"""Paths and loaders for the conformance data copied into fixtures/ (tests read only the project's own files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

#: keys of a request row's ``conversion`` (fixtures/api/requests.jsonl) that the Chat and Messages
#: parity tests compare one by one with ours.
CONVERSION_KEYS = (
    "thinking", "reasoning_effort", "tool_choice", "response_format", "output_constraint", "parse_tool_calls",
    "starts_in_tool_calls", "parse_json_output", "stop_sequences", "max_tokens", "temperature", "top_p",
    "logprobs", "top_logprobs", "seed",
)


def jsonl(relpath: str) -> list[dict[str, Any]]:
    """Rows of a JSON-lines fixture file."""
    with open(FIXTURES / relpath, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def api_requests(api: str) -> list[dict[str, Any]]:
    """Rows of fixtures/api/requests.jsonl for one API (deepseek-recipe 0.2.0 parity vectors)."""
    return [r for r in jsonl("api/requests.jsonl") if r["api"] == api]
