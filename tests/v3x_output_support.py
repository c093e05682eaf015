"""Helpers for the V3 / R1 / V3.1 / V3.2 output-parser tests: parsers per family, any chunking."""

from __future__ import annotations

import random
from collections.abc import Sequence

from output_support import feed

from recipe.conversation import ParsingOptions
from recipe.encodings.table import get_encoding
from recipe.output.events import ParsedOutput
from recipe.tokenizer import load_v3_tokenizer

FAMILIES = ("deepseek_v3", "deepseek_r1", "deepseek_v3_1", "deepseek_v3_2")


def tok():
    return load_v3_tokenizer()


def opts(thinking: bool = False, tools: Sequence[str] = (), stop: Sequence[str] = (), stage: str | None = None,
         json_mode: bool = False) -> ParsingOptions:
    return ParsingOptions(parse_tool_calls=bool(tools), thinking_stage=stage or ("reasoning" if thinking else None),
                          stop_sequences=tuple(stop), tool_names=tuple(tools), parse_json_output=json_mode)


def encode(text: str) -> list[int]:
    """Ids of a model output: special spellings as their ids (how the model emits them)."""
    return tok().encode_with_special_tokens(text)


def parse_ids(family: str, o: ParsingOptions, chunks: Sequence[Sequence[int]], finish: str = "stop") -> ParsedOutput:
    """Feed id chunks to ``family``'s output parser, finish, accumulate (streaming invariants checked)."""
    return feed(get_encoding(family).new_parser(o, tok(), tool_call_id=7), chunks, finish=finish)


def parse_text(family: str, o: ParsingOptions, pieces: Sequence[str], finish: str = "stop") -> ParsedOutput:
    """Feed decoded text pieces (one token each) to ``family``'s output parser, finish, accumulate."""
    return feed(get_encoding(family).new_parser(o, tok(), tool_call_id=7), texts=pieces, finish=finish)


def chunkings(ids: list[int], seed: int = 0):
    """(name, chunks) of several chunkings: one id at a time, all at once, random groups."""
    yield "one", [[i] for i in ids]
    yield "all", [ids]
    rnd = random.Random(seed)
    out, k = [], 0
    while k < len(ids):
        n = rnd.randint(1, 7)
        out.append(ids[k:k + n])
        k += n
    yield "rand", out


def summary(r: ParsedOutput) -> tuple:
    return (r.content, r.reasoning_content, [(c.name, c.arguments) for c in r.tool_calls], r.finish_reason,
            r.completion_tokens, r.reasoning_tokens, r.notes)


def parse_all_ways(family: str, o: ParsingOptions, text: str) -> ParsedOutput:
    """Parse ``text`` (as ids) in every chunking and as per-character text; all must agree."""
    ids = encode(text)
    results = [parse_ids(family, o, chunks) for _, chunks in chunkings(ids, len(ids))]
    base = summary(results[0])
    for r in results[1:]:
        if o.stop_sequences:  # a push that completes a stop match counts all its ids
            assert summary(r)[:4] + summary(r)[5:] == base[:4] + base[5:]
        else:
            assert summary(r) == base
    per_char = parse_text(family, o, list(text))
    assert summary(per_char)[:4] == base[:4]
    if family != "deepseek_v3_2":  # the V4 parser's notes may differ between text and id feeding
        assert per_char.notes == results[0].notes
    return results[0]
