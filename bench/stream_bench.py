"""The full output path benchmark shared by bench_chat_stream.py, bench_responses_stream.py and
bench_messages_stream.py: recipe (parser + API encoder + SSE framing, ``CompletionStream``) vs
deepseek-recipe (``StreamProcessor`` + the API's chunk generator + ``to_json`` + the same SSE framing)
on the token ids of bench/bench_stream.py, fed one id per push and all at once.

A script describes its API with a :class:`StreamBench` and calls :func:`main`; the table it prints
has one row per (output, push mode): ours and theirs in ms, SSE bytes and the ratio theirs/ours
(> 1 means we are faster), each as median [min–max] over rounds that run both sides back to back. deepseek-recipe (the anchor) is optional: without it only our numbers are
printed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anchor
from anchor import dr
from bench_stream import one_block_ids, think_ids, tool_ids
from timing import Row, span

from recipe.output.driver import CompletionStream
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer


def frame_data(chunks: Iterable[Any]) -> int:
    """Bytes of ``data: JSON\\n\\n`` for each anchor chunk (Chat Completions framing)."""
    return len(b"".join([b"data: " + c.to_json().encode() + b"\n\n" for c in chunks]))


def frame_events(events: Iterable[Any]) -> int:
    """Bytes of ``event: NAME\\ndata: JSON\\n\\n`` for each anchor event (Responses / Messages framing);
    the name is read from the JSON's leading ``{"type":"NAME"`` (to_json always starts so), without
    parsing it."""
    out = []
    for e in events:
        s = e.to_json()
        out.append(b"event: " + s[9:s.index('"', 9)].encode() + b"\ndata: " + s.encode() + b"\n\n")
    return len(b"".join(out))


@dataclass(frozen=True, slots=True)
class StreamBench:
    """What one API's stream benchmark sets.

    Attributes:
        api: ``prepare``'s API name (``chat`` | ``responses`` | ``messages``).
        request: ``(thinking, tools) -> streaming request body`` declaring bench_stream.TOOLS.
        response_id: the id both sides put in their payloads.
        anchor_request: deepseek-recipe's request class name (``ChatCompletionRequest`` …).
        anchor_frame: SSE bytes of a list of anchor chunks (:func:`frame_data` / :func:`frame_events`).
        anchor_trailer: bytes the anchor's stream ends with beyond its chunks (Chat ``data: [DONE]``).
        anchor_echo: the anchor's chunk generator echoes the request (Responses: ``with_echo``).
        block_name: the row name of bench_stream.one_block_ids's output.
        note: the table's footer after ``medians of N runs; bytes = SSE bytes produced``.
    """

    api: str
    request: Callable[[bool, bool], dict]
    response_id: str
    anchor_request: str
    anchor_frame: Callable[[Iterable[Any]], int]
    anchor_trailer: bytes = b""
    anchor_echo: bool = False
    block_name: str = "oneblock"
    note: str = ""


def run_ours(spec: StreamBench, prep: Any, ids: list[int], per_token: bool, payloads: bool = False) -> tuple[float, int]:
    """One run of our stream over ``ids``: (seconds, SSE bytes), stream construction included.
    Each push gives its SSE bytes with ``push_sse`` (a server that only sends bytes), or with
    ``sse(push(…))`` when ``payloads`` (a server that also reads the payload dicts); same bytes."""
    t0 = time.perf_counter()
    cs = CompletionStream(prep, seed=0, created=1, prompt_tokens=10, model="m", response_id=spec.response_id)
    sse = cs.sse
    n = len(sse(cs.start()))
    if payloads:
        push = cs.push
        if per_token:
            for i in ids:
                n += len(sse(push((i,))))
        else:
            n += len(sse(push(ids)))
    elif per_token:
        push_sse = cs.push_sse
        for i in ids:
            n += len(push_sse((i,)))
    else:
        n += len(cs.push_sse(ids))
    n += len(sse(cs.finish("stop")))
    return time.perf_counter() - t0, n


def run_theirs(spec: StreamBench, tok: Any, body: dict, ids: list[int], per_token: bool) -> tuple[float, int]:
    """One run of the anchor over ``ids`` (request conversion untimed): (seconds, SSE bytes).
    Pushes stop once the anchor says it finished (after its first tool block)."""
    req = getattr(dr, spec.anchor_request)(body)
    echo = req.echo() if spec.anchor_echo else None
    cr = req.convert(anchor.options())
    frame = spec.anchor_frame
    t0 = time.perf_counter()
    gen = req.chunk_generator(cr, spec.response_id, "m")
    if echo is not None:
        gen = gen.with_echo(echo)
    sp = dr.StreamProcessor(gen, cr.parsing_options, tok)
    n = frame(sp.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=10))))
    if per_token:
        push, tokens = sp.push, dr.InferenceChunk.tokens
        for i in ids:
            if sp.finished:
                break
            n += frame(push(tokens([i])))
    else:
        n += frame(sp.push(dr.InferenceChunk.tokens(ids)))
    if not sp.finished:
        n += frame(sp.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop)))
    n += frame(sp.finish())
    n += len(spec.anchor_trailer)
    return time.perf_counter() - t0, n


def _runs(spec: StreamBench, reps: int, prep: Any, dtok: Any, body: dict, ids: list[int],
          per_token: bool, payloads: bool = False) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """``reps`` rounds, each running ours and the anchor back to back (alternating which goes
    first), so load changes on the shared machine hit both sides of a round alike."""
    ours: list[tuple[float, int]] = []
    theirs: list[tuple[float, int]] = []
    for r in range(reps):
        if dr is not None and r % 2:
            theirs.append(run_theirs(spec, dtok, body, ids, per_token))
        ours.append(run_ours(spec, prep, ids, per_token, payloads))
        if dr is not None and not r % 2:
            theirs.append(run_theirs(spec, dtok, body, ids, per_token))
    return ours, theirs


#: Rows that compare equal work (the anchor parses all of the output); the ``tools`` rows do not.
def equal_work(name: str) -> bool:
    """Whether both sides parse the whole output of row ``name`` (deepseek-recipe stops after the
    first tool block, so the multi-block ``tools`` rows compare unequal work)."""
    return name != "tools"


def main(spec: StreamBench, doc: str) -> None:
    """The command line (``[--reps N] [--json FILE]``, default 9 rounds; ``doc``'s first line is its
    description) and the table: per row, ours and theirs in ms and the ratio theirs/ours, each as
    median [min–max] over the rounds."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON (bench/report.py)")
    ap.add_argument("--payloads", action="store_true",
                    help="time sse(push(ids)) (payload dicts, then their frames) instead of push_sse(ids)")
    args = ap.parse_args()
    tok = load_tokenizer()
    dtok = anchor.tokenizer() if dr else None
    outputs = {"think20k": (spec.request(True, False), think_ids(tok)), "tools": (spec.request(False, True), tool_ids(tok)),
               spec.block_name: (spec.request(False, True), one_block_ids(tok))}
    print(f"{'output':9} {'push':4} {'tokens':>6} | {'ours ms':>22} {'bytes':>8} | {'theirs ms':>22} {'bytes':>8} | "
          f"{'theirs/ours':>20}")
    rows = []
    for name, (body, ids) in outputs.items():
        prep = prepare(body, spec.api)
        for per_token in (True, False):
            ours, theirs = _runs(spec, args.reps, prep, dtok, body, ids, per_token, args.payloads)
            row = Row(f"{name} {'one' if per_token else 'all'}", target=2.0 if equal_work(name) else None)
            line = f"{name:9} {'one' if per_token else 'all':4} {len(ids):6} | "
            if dr is not None:
                for (o, _), (t, _) in zip(ours, theirs):
                    row.add(o, t)
                line += (f"{span(row.ours, 1e3, 1):>22} {ours[0][1]:8} | {span(row.theirs, 1e3, 1):>22} {theirs[0][1]:8} | "
                         f"{span(row.ratios):>20}{'' if equal_work(name) else '  (unequal work)'}")
            else:
                line += f"{span([t for t, _ in ours], 1e3, 1):>22} {ours[0][1]:8} | (deepseek-recipe not installed)"
            rows.append({**row.as_dict(), "output": name, "push": "one" if per_token else "all", "tokens": len(ids),
                         "ours_bytes": ours[0][1], "theirs_bytes": theirs[0][1] if theirs else None,
                         "equal_work": equal_work(name)} if dr is not None else {"output": name})
            print(line, flush=True)
    print(f"{args.reps} rounds, sides interleaved; median [min–max]; bytes = SSE bytes produced; ours by "
          f"{'sse(push(ids))' if args.payloads else 'push_sse(ids)'} {spec.note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"api": spec.api, "rounds": args.reps, "load": os.getloadavg(), "rows": rows}, f, indent=1)
