"""Full Anthropic Messages output path: recipe (parser + Messages encoder + SSE framing) vs
deepseek-recipe (StreamProcessor + MessagesChunkGenerator + ``to_json`` + the same
``event: NAME`` / ``data: …`` framing).

Run: ``python bench/bench_messages_stream.py [--reps N]``. Same token ids for both (the outputs of
bench/bench_stream.py): ``think20k`` (thinking, 15k reasoning + 5k answer tokens) and ``tools``
(non-thinking, ~20k tokens of prose and parallel DSML tool calls; deepseek-recipe stops parsing after
the first block, so these rows compare unequal work), and ``block20k`` (non-thinking, a sentence then
ONE DSML block of ~20k tokens of parallel calls: both sides parse all of it), each fed one id per
push and all at once. Prints medians (ms, tokens/s, SSE bytes) and the ratio theirs/ours (> 1 means we are
faster). deepseek-recipe (the anchor) is optional: without it only our numbers are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_stream import TOOLS, one_block_ids, think_ids, tool_ids  # noqa: E402

from recipe.completion import CompletionStream  # noqa: E402
from recipe.pipeline import prepare  # noqa: E402
from recipe.tokenizer import default_tokenizer_path, load_tokenizer  # noqa: E402

try:
    import deepseek_recipe as dr
except ImportError:  # pragma: no cover
    dr = None


def request(thinking: bool, tools: bool) -> dict:
    body = {"model": "deepseek-v4-pro", "max_tokens": 32000, "messages": [{"role": "user", "content": "Go."}],
            "thinking": {"type": "enabled" if thinking else "disabled"}, "stream": True}
    if tools:
        body["tools"] = [{"name": n, "input_schema": {"type": "object"}} for n in TOOLS]
    return body


def run_ours(prep, ids: list[int], per_token: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    cs = CompletionStream(prep, seed=0, prompt_tokens=10, model="m", response_id="msg_x")
    n = 0
    sse = cs.sse
    n += len(sse(cs.start()))
    if per_token:
        push = cs.push
        for i in ids:
            n += len(sse(push((i,))))
    else:
        n += len(sse(cs.push(ids)))
    n += len(sse(cs.finish("stop")))
    return time.perf_counter() - t0, n


def _anchor_setup(body: dict):
    opts = dr.ConversionOptions().with_model_alias("deepseek-v4-pro", dr.ModelVersion.DeepseekV4Pro)
    req = dr.MessagesRequest(body)
    return req, req.convert(opts)


def _frame(events) -> int:
    """``event: NAME\\ndata: JSON\\n\\n`` for each event; the name is read from the JSON's leading
    ``{"type":"NAME"`` (to_json always starts so), without parsing it."""
    out = []
    for e in events:
        s = e.to_json()
        out.append(b"event: " + s[9:s.index('"', 9)].encode() + b"\ndata: " + s.encode() + b"\n\n")
    return len(b"".join(out))


def run_theirs(tok, body: dict, ids: list[int], per_token: bool) -> tuple[float, int]:
    req, cr = _anchor_setup(body)
    t0 = time.perf_counter()
    sp = dr.StreamProcessor(req.chunk_generator(cr, "msg_x", "m"), cr.parsing_options, tok)
    n = _frame(sp.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=10))))
    if per_token:
        push, tokens = sp.push, dr.InferenceChunk.tokens
        for i in ids:
            if sp.finished:
                break
            n += _frame(push(tokens([i])))
    else:
        n += _frame(sp.push(dr.InferenceChunk.tokens(ids)))
    if not sp.finished:
        n += _frame(sp.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop)))
    n += _frame(sp.finish())
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    tok = load_tokenizer()
    dtok = dr.Tokenizer.from_file(str(default_tokenizer_path())) if dr else None
    outputs = {"think20k": (request(True, False), think_ids(tok)), "tools": (request(False, True), tool_ids(tok)),
               "block20k": (request(False, True), one_block_ids(tok))}
    print(f"{'output':9} {'push':4} {'tokens':>6} | {'ours ms':>8} {'tok/s':>9} {'bytes':>8} | "
          f"{'theirs ms':>9} {'tok/s':>9} {'bytes':>8} | {'theirs/ours':>11}")
    for name, (body, ids) in outputs.items():
        prep = prepare(body, "messages")
        for per_token in (True, False):
            ours, theirs = [], []
            for _ in range(args.reps):  # interleaved, so both sides see the same machine load
                ours.append(run_ours(prep, ids, per_token))
                if dr is not None:
                    theirs.append(run_theirs(dtok, body, ids, per_token))
            o_ms = statistics.median(t for t, _ in ours) * 1e3
            line = (f"{name:9} {'one' if per_token else 'all':4} {len(ids):6} | {o_ms:8.1f} "
                    f"{len(ids) / o_ms * 1e3:9.0f} {ours[0][1]:8} | ")
            if dr is not None:
                t_ms = statistics.median(t for t, _ in theirs) * 1e3
                line += f"{t_ms:9.1f} {len(ids) / t_ms * 1e3:9.0f} {theirs[0][1]:8} | {t_ms / o_ms:11.2f}"
            else:
                line += "(deepseek-recipe not installed)"
            print(line, flush=True)
    print(f"medians of {args.reps} runs; bytes = SSE bytes produced (tools: theirs stops parsing after the "
          "first tool block; block20k: argument fragments differ in granularity, docs/streaming.md)")


if __name__ == "__main__":
    main()
