"""Anthropic Messages request -> prompt token ids, recipe vs deepseek-recipe 0.2.0, measured in the same run.

    python bench/bench_messages.py               # both cases, 9 rounds
    python bench/bench_messages.py --rounds 3    # fewer rounds

Cases: (a) a short request (system + one user turn); (b) the long agentic conversation of
``bench_encode.py`` (55 assistant turns with thinking, tool_use and tool_result blocks, ~100k
prompt tokens), cold. recipe runs ``recipe.prepare(body, "messages")`` without segment or prompt
cache; deepseek-recipe runs ``MessagesRequest(body).convert(options)`` -> ``encode``. Each case checks
both give identical token ids, then times both sides back to back in each round and prints median
[min–max] over the rounds of each time and of the ratio (deepseek-recipe time / recipe time: > 1
means recipe is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import anchor  # noqa: E402
from gen import agentic_request, short_request  # noqa: E402
from timing import interleaved, print_rows  # noqa: E402

import recipe  # noqa: E402



def to_messages(chat: dict[str, Any]) -> dict[str, Any]:
    """The same conversation as an Anthropic Messages body (system hoisted, tool results as blocks)."""
    system: list[str] = []
    msgs: list[dict[str, Any]] = []
    for m in chat["messages"]:
        role = m["role"]
        if role == "system":
            system.append(m["content"])
        elif role == "user":
            msgs.append({"role": "user", "content": m["content"]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("reasoning_content") is not None:
                blocks.append({"type": "thinking", "thinking": m["reasoning_content"], "signature": "x"})
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for c in m.get("tool_calls") or ():
                fn = c["function"]
                blocks.append({"type": "tool_use", "id": c["id"], "name": fn["name"], "input": json.loads(fn["arguments"])})
            msgs.append({"role": "assistant", "content": blocks})
        else:  # tool: join consecutive results into one user turn
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if msgs and msgs[-1]["role"] == "user" and isinstance(msgs[-1]["content"], list) and msgs[-1]["content"][-1]["type"] == "tool_result":
                msgs[-1]["content"].append(block)
            else:
                msgs.append({"role": "user", "content": [block]})
    body: dict[str, Any] = {"model": chat["model"], "max_tokens": 8192, "messages": msgs}
    if system:
        body["system"] = "\n\n".join(system)
    if chat.get("tools"):
        body["tools"] = [
            {"name": t["function"]["name"], "description": t["function"].get("description"), "input_schema": t["function"]["parameters"]}
            for t in chat["tools"]
        ]
    if chat.get("reasoning_effort"):
        body["output_config"] = {"effort": chat["reasoning_effort"]}
    return body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    theirs = anchor.encoder("MessagesRequest")

    def ours(body: str) -> list[int]:
        return recipe.prepare(body, "messages", cache=None, prompt_cache=None).token_ids

    rows = []
    for name, chat, calls in (("(a) short Messages request", short_request(), 100), ("(b) long agentic, cold", agentic_request(), 1)):
        body = json.dumps(to_messages(chat))
        ids = ours(body)
        assert ids == theirs(body), name
        rows.append(interleaved(f"{name} ({len(ids)} tokens)", lambda: ours(body), lambda: theirs(body), args.rounds, calls))
    print_rows(rows, f"{args.rounds} rounds, sides back to back; median [min–max] (ms, and theirs/ours); ids identical")


if __name__ == "__main__":
    main()
