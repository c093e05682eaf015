"""Helpers for the output-parser tests: options from a Chat request, feeding in any chunking."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from fixtures import jsonl
from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.output import OutputParser
from recipe.output.events import ParsedOutput, ToolCallArgumentsDelta, ToolCallEnd, accumulate
from recipe.tokenizer import Tokenizer, load_tokenizer


def rows(name: str) -> list[dict[str, Any]]:
    """Rows of ``fixtures/completions/<name>``."""
    return jsonl(f"completions/{name}")


def tok() -> Tokenizer:
    return load_tokenizer()


def chat_options(req: dict[str, Any]) -> ParsingOptions:
    """ParsingOptions deepseek-recipe derives from these (simple) Chat requests."""
    effort = req.get("reasoning_effort")
    thinking = effort != "none"
    th = req.get("thinking")
    if th:
        thinking = th.get("type") != "disabled"
    tools = tuple(t["function"]["name"] for t in req.get("tools", ()))
    tc = req.get("tool_choice")
    stop = req.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    return ParsingOptions(
        parse_tool_calls=bool(tools) and tc != "none",
        starts_in_tool_calls=tc == "required" or isinstance(tc, dict),
        thinking_stage="reasoning" if thinking else None,
        stop_sequences=tuple(stop),
        tool_names=tools,
    )


def opts(thinking: bool = False, tools: Sequence[str] = (), stop: Sequence[str] = (), required: bool = False,
         stage: str | None = None) -> ParsingOptions:
    return ParsingOptions(
        parse_tool_calls=bool(tools),
        starts_in_tool_calls=required,
        thinking_stage=stage if stage else ("reasoning" if thinking else None),
        stop_sequences=tuple(stop),
        tool_names=tuple(tools),
    )


def split_ids(ids: Sequence[int], how: str | int | random.Random) -> list[list[int]]:
    """Chunk ``ids``: ``"one"`` per id, ``"all"`` at once, an int chunk size, or a Random for random groups."""
    ids = list(ids)
    if how == "one":
        return [[i] for i in ids]
    if how == "all":
        return [ids]
    if isinstance(how, int):
        return [ids[k:k + how] for k in range(0, len(ids), how)]
    out, k = [], 0
    while k < len(ids):
        n = how.randint(1, 9)
        out.append(ids[k:k + n])
        k += n
    return out


def run_ids(o: ParsingOptions, chunks: Sequence[Sequence[int]], finish: str = "stop", seed: int = 7,
            check_stream: bool = True) -> ParsedOutput:
    """Feed id chunks, finish, accumulate; checks the streaming invariants on the way."""
    p = OutputParser(o, tok(), tool_call_id=seed)
    events = []
    for c in chunks:
        events += p.push(c)
    events += p.finish(finish)
    if check_stream:
        check_events(events)
    return accumulate(events)


def run_text(o: ParsingOptions, pieces: Sequence[str], finish: str = "stop", seed: int = 7) -> ParsedOutput:
    """Feed decoded text pieces (one token each), finish, accumulate."""
    p = OutputParser(o, tok(), tool_call_id=seed)
    events = []
    for piece in pieces:
        events += p.push_text(piece, 1)
    events += p.finish(finish)
    check_events(events)
    return accumulate(events)


def decoded_pieces(ids: Sequence[int]) -> list[str]:
    """Per-token text as a streaming backend would send it (UTF-8 completed incrementally)."""
    dec = tok().incremental_decoder()
    pieces = [dec.push(i) for i in ids]
    if pieces:
        pieces[-1] += dec.flush()
    return pieces


def check_events(events: list) -> None:
    """Concatenated argument deltas equal ToolCallEnd.arguments, which is always valid JSON."""
    deltas: dict[int, list[str]] = {}
    for ev in events:
        if isinstance(ev, ToolCallArgumentsDelta):
            deltas.setdefault(ev.index, []).append(ev.text)
        elif isinstance(ev, ToolCallEnd):
            assert "".join(deltas.get(ev.index, [])) == ev.arguments
            assert isinstance(json.loads(ev.arguments), dict), ev.arguments


def summary(r: ParsedOutput) -> tuple:
    """Everything but the random parts: content, reasoning, (name, arguments) calls, finish reason, counts."""
    return (r.content, r.reasoning_content, [(c.name, c.arguments) for c in r.tool_calls], r.finish_reason,
            r.completion_tokens, r.reasoning_tokens)
