"""Deterministic generators of benchmark requests (Chat Completions bodies)."""

from __future__ import annotations

import random
from typing import Any

_WORDS = (
    "the model reads a request and renders a prompt with tools results reasoning cache prefix token block "
    "agent loop file patch test build error value python function class return import module config server "
    "latency throughput memory stream event delta parser state machine schema argument call id name"
).split()
_CJK = "模型读取请求并渲染提示词工具结果推理缓存前缀令牌"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{k}",
            "description": f"Tool number {k}: " + " ".join(_WORDS[k : k + 12]),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "file path"},
                    "limit": {"type": "integer", "minimum": 1},
                    "flags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["path"],
            },
        },
    }
    for k in range(10)
]


_LETTERS = "etaoinshrdlcumwfgypbvkjxqz"


def _word(rng: random.Random) -> str:
    """A pseudo-word: common words half the time, random letter strings otherwise (little repetition)."""
    if rng.random() < 0.5:
        return rng.choice(_WORDS)
    return "".join(rng.choice(_LETTERS[: rng.randint(8, 26)]) for _ in range(rng.randint(2, 11)))


def _prose(rng: random.Random, n_words: int) -> str:
    words = [_word(rng) for _ in range(n_words)]
    for k in range(0, n_words, 17):
        words[k] = words[k].capitalize()
    return " ".join(words) + "."


def _code(rng: random.Random, n_lines: int) -> str:
    lines = []
    for k in range(n_lines):
        indent = "    " * rng.randint(0, 3)
        w = [_word(rng) for _ in range(3)]
        lines.append(f"{indent}{w[0]}_{k} = {w[1]}({w[2]!r}, {rng.randint(0, 9999)})  # {rng.choice(_CJK)}")
    return "\n".join(lines)


def short_request() -> dict[str, Any]:
    """System + user, thinking with the default effort (≈ 99 prompt tokens)."""
    return {
        "model": "deepseek-v4-pro",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
            {"role": "user", "content": "What is the capital of France, and why is it famous?"},
        ],
    }


def agentic_request(assistant_turns: int = 55, seed: int = 7, lines_per_result: int = 60) -> dict[str, Any]:
    """A long agent conversation: system prompt, several user turns, ``assistant_turns`` assistant turns
    with reasoning and 1–2 tool calls each, code/prose tool results; 10 tools; thinking, effort high."""
    rng = random.Random(seed)
    msgs: list[dict[str, Any]] = [{"role": "system", "content": _prose(rng, 900)}]
    call_no = 0
    for turn in range(assistant_turns):
        if turn % 8 == 0:
            msgs.append({"role": "user", "content": _prose(rng, 60)})
        calls = []
        for _ in range(rng.choice((1, 1, 2))):
            calls.append(
                {
                    "id": f"call_{call_no:04d}",
                    "type": "function",
                    "function": {
                        "name": f"tool_{rng.randrange(10)}",
                        "arguments": f'{{"path": "src/{rng.choice(_WORDS)}.py", "limit": {rng.randint(1, 500)}, "flags": ["-v", "{rng.choice(_WORDS)}"]}}',
                    },
                }
            )
            call_no += 1
        msgs.append(
            {
                "role": "assistant",
                "content": _prose(rng, rng.randint(0, 30)),
                "reasoning_content": _prose(rng, rng.randint(40, 120)),
                "tool_calls": calls,
            }
        )
        for c in calls:
            body = _code(rng, lines_per_result) if rng.random() < 0.7 else _prose(rng, lines_per_result * 8)
            msgs.append({"role": "tool", "tool_call_id": c["id"], "content": body})
    return {"model": "deepseek-v4-pro", "messages": msgs, "tools": TOOLS, "reasoning_effort": "high"}


def next_request(req: dict[str, Any], seed: int = 8) -> dict[str, Any]:
    """``req`` plus one more tool round: an assistant call and its result (the agent loop's next request)."""
    rng = random.Random(seed)
    cid = "call_9999"
    extra = [
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": _prose(rng, 60),
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": "tool_1", "arguments": '{"path": "x.py"}'}}],
        },
        {"role": "tool", "tool_call_id": cid, "content": _code(rng, 80)},
    ]
    return {**req, "messages": req["messages"] + extra}
