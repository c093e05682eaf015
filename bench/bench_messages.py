"""Anthropic Messages request -> prompt token ids, recipe vs deepseek-recipe 0.2.0, measured in the same run.

    python bench/bench_messages.py            # both cases
    python bench/bench_messages.py --quick    # fewer repetitions

Cases: (a) a short request (system + one user turn); (b) the long agentic conversation of
``bench_encode.py`` (55 assistant turns with thinking, tool_use and tool_result blocks, ~100k
prompt tokens), cold (no segment cache). recipe runs parse -> convert -> render -> encode;
deepseek-recipe runs ``MessagesRequest(body).convert(options)`` -> ``encode``. Each case checks
both give identical token ids, then prints medians and the ratio (deepseek-recipe time / recipe
time: > 1 means recipe is faster).
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
from timing import median_seconds as _median  # noqa: E402

from recipe.api.messages import messages_to_conversation, parse_messages_request  # noqa: E402
from recipe.encodings.deepseek_v4.render import render  # noqa: E402
from recipe.options import DEFAULT_OPTIONS  # noqa: E402
from recipe.prompt import encode_prompt  # noqa: E402
from recipe.tokenizer import load_tokenizer  # noqa: E402


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


def _ours(tok):
    def run(body: str) -> list[int]:
        conv = messages_to_conversation(parse_messages_request(body), DEFAULT_OPTIONS)
        return encode_prompt(tok, render(conv))

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_short, n_long = (300, 5) if args.quick else (2000, 15)
    ours, theirs = _ours(load_tokenizer()), anchor.encoder("MessagesRequest")
    rows = []
    for name, chat, n in (("(a) short Messages request", short_request(), n_short), ("(b) long agentic, cold", agentic_request(), n_long)):
        body = json.dumps(to_messages(chat))
        ids = ours(body)
        assert ids == theirs(body), name
        rows.append((f"{name} ({len(ids)} tokens)", _median(lambda: ours(body), n), _median(lambda: theirs(body), n)))
    print(f"{'case':44} {'recipe':>12} {'deepseek-recipe':>16} {'ratio':>8}")
    for name, us, them in rows:
        print(f"{name:44} {us * 1e3:9.3f} ms {them * 1e3:13.3f} ms {them / us:7.2f}x")
    print(f"medians of {n_short} (a) / {n_long} (b) runs; ids identical in every case")


if __name__ == "__main__":
    main()
