"""Responses request -> Conversation -> prompt token ids, recipe vs deepseek-recipe 0.2.0, same run.

    python bench/bench_responses.py               # both cases, 9 rounds
    python bench/bench_responses.py --rounds 3    # fewer rounds

Cases: (a) a short Responses request (instructions + string input); (b) the long agentic
conversation of bench/gen.py (55 assistant turns with reasoning items, function calls and outputs,
10 tools, ~100k prompt tokens) written as Responses input items. For each case it checks that both
libraries give identical token ids, then times the request conversion alone (parse + convert) and
the whole way to token ids (``recipe.prepare(body, "responses")`` with no segment or prompt cache),
both sides back to back in each round, and prints median [min–max] over the rounds of each time and
of the ratio deepseek-recipe time / recipe time (> 1 means recipe is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import anchor  # noqa: E402
from gen import agentic_request  # noqa: E402
from timing import interleaved, print_rows  # noqa: E402

import recipe  # noqa: E402

from recipe.api.responses import parse_responses_request, responses_to_conversation  # noqa: E402
from recipe.options import DEFAULT_OPTIONS  # noqa: E402


def short_request() -> dict[str, Any]:
    return {"model": "deepseek-v4-pro", "instructions": "You are a helpful assistant. Answer briefly.",
            "input": "What is the capital of France, and why is it famous?"}


def agentic_responses_request() -> dict[str, Any]:
    """bench/gen.py's agentic Chat request as Responses items (reasoning, text, calls, outputs)."""
    chat = agentic_request()
    items: list[dict[str, Any]] = []
    instructions = None
    for m in chat["messages"]:
        if m["role"] == "system":
            instructions = m["content"]
        elif m["role"] == "user":
            items.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            items.append({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": m["reasoning_content"]}]})
            if m["content"]:
                items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": m["content"], "annotations": []}]})
            for c in m["tool_calls"]:
                items.append({"type": "function_call", "call_id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]})
        else:
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
    tools = [{"type": "function", **t["function"]} for t in chat["tools"]]
    return {"model": "deepseek-v4-pro", "instructions": instructions, "input": items, "tools": tools, "reasoning": {"effort": "high"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    dr, opts, enc = anchor.dr, anchor.options(), anchor.encoding()

    def ours_convert(body: str):
        return responses_to_conversation(parse_responses_request(body), DEFAULT_OPTIONS)

    def ours_ids(body: str) -> list[int]:
        return recipe.prepare(body, "responses", cache=None, prompt_cache=None).token_ids

    def theirs_convert(body: str):
        return dr.ResponsesRequest(body).convert(opts)

    def theirs_ids(body: str) -> list[int]:
        return list(enc.encode(theirs_convert(body).conversation))

    rows = []
    for name, body, calls in (("short", short_request(), 100), ("agentic", agentic_responses_request(), 1)):
        text = json.dumps(body, ensure_ascii=False)
        ids = ours_ids(text)
        assert ids == theirs_ids(text), f"{name}: token ids differ"
        for label, mine, theirs in (("parse+convert", ours_convert, theirs_convert), ("to token ids", ours_ids, theirs_ids)):
            rows.append(interleaved(f"({name}, {len(ids)} tokens) {label}", lambda: mine(text), lambda: theirs(text),
                                    args.rounds, calls))
    print_rows(rows, f"{args.rounds} rounds, sides back to back; median [min–max] (ms, and theirs/ours)")


if __name__ == "__main__":
    main()
