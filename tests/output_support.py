"""Helpers for the output-parser tests: options from a Chat request, feeding in any chunking."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from fixtures import jsonl
from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.output import OutputParser
from recipe.output.events import ParsedOutput, ToolCallArgumentsDelta, ToolCallEnd, ToolCallStart, accumulate
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


def feed(parser: Any, chunks: Sequence[Sequence[int]] = (), texts: Sequence[str] = (), finish: str = "stop",
         check_stream: bool = True) -> ParsedOutput:
    """Push id ``chunks`` (then decoded ``texts``, one token each) into an output ``parser`` of any
    family, finish it with ``finish``, accumulate; checks the streaming invariants on the way
    (:func:`check_events`) unless ``check_stream`` is false."""
    events = []
    for c in chunks:
        events += parser.push(c)
    for piece in texts:
        events += parser.push_text(piece, 1)
    events += parser.finish(finish)
    if check_stream:
        check_events(events)
    return accumulate(events)


def run_ids(o: ParsingOptions, chunks: Sequence[Sequence[int]], finish: str = "stop", seed: int = 7,
            check_stream: bool = True) -> ParsedOutput:
    """Feed id chunks to DeepSeek-V4's parser, finish, accumulate; checks the streaming invariants on the way."""
    return feed(OutputParser(o, tok(), tool_call_id=seed), chunks, finish=finish, check_stream=check_stream)


def run_text(o: ParsingOptions, pieces: Sequence[str], finish: str = "stop", seed: int = 7) -> ParsedOutput:
    """Feed decoded text pieces (one token each) to DeepSeek-V4's parser, finish, accumulate."""
    return feed(OutputParser(o, tok(), tool_call_id=seed), texts=pieces, finish=finish)


def decoded_pieces(ids: Sequence[int]) -> list[str]:
    """Per-token text as a streaming backend would send it (UTF-8 completed incrementally)."""
    dec = tok().incremental_decoder()
    pieces = [dec.push(i) for i in ids]
    if pieces:
        pieces[-1] += dec.flush()
    return pieces


def check_events(events: list) -> None:
    """A call's argument deltas come after its ToolCallStart and concatenate to its
    ToolCallEnd.arguments, a JSON object; exactly one Finish, last."""
    deltas: dict[int, list[str]] = {}
    started: set[int] = set()
    for ev in events:
        if isinstance(ev, ToolCallStart):
            started.add(ev.index)
        elif isinstance(ev, ToolCallArgumentsDelta):
            assert ev.index in started
            deltas.setdefault(ev.index, []).append(ev.text)
        elif isinstance(ev, ToolCallEnd):
            assert "".join(deltas.get(ev.index, [])) == ev.arguments
            assert isinstance(json.loads(ev.arguments), dict), ev.arguments
    assert type(events[-1]).__name__ == "Finish"
    assert sum(type(e).__name__ == "Finish" for e in events) == 1


def summary(r: ParsedOutput) -> tuple:
    """Everything but the random parts: content, reasoning, (name, arguments) calls, finish reason, counts."""
    return (r.content, r.reasoning_content, [(c.name, c.arguments) for c in r.tool_calls], r.finish_reason,
            r.completion_tokens, r.reasoning_tokens)
