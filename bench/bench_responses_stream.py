"""Full OpenAI Responses output path: recipe (parser + Responses encoder + SSE framing with
``event:`` lines) vs deepseek-recipe (StreamProcessor + ResponsesChunkGenerator with the request echo
+ ``to_json`` + the same ``event: <type>`` / ``data: …`` framing).

Run: ``python bench/bench_responses_stream.py [--reps N]``. Same token ids for both (the outputs of
bench/bench_stream.py): ``think20k`` (thinking, 15k reasoning + 5k answer tokens), ``tools``
(non-thinking, ~20k tokens of prose and blocks of parallel DSML tool calls; deepseek-recipe stops
after the first block, so this row compares unequal work) and ``oneblock`` (one sentence and a single
~20k-token block of parallel calls, parsed completely by both), each fed one id per push and all at
once. Prints medians (ms, tokens/s) and the ratio theirs/ours (> 1 means we are faster).
deepseek-recipe (the anchor) is optional: without it only our numbers are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_stream import TOOLS, one_block_ids, think_ids, tool_ids

from recipe.completion import CompletionStream
from recipe.pipeline import prepare
from recipe.tokenizer import default_tokenizer_path, load_tokenizer

try:
    import deepseek_recipe as dr
except ImportError:  # pragma: no cover
    dr = None


def request(thinking: bool, tools: bool) -> dict:
    body = {"model": "deepseek-v4-pro", "input": "Go.", "reasoning": {"effort": "high" if thinking else "none"}, "stream": True}
    if tools:
        body["tools"] = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in TOOLS]
    return body


def run_ours(prep, ids: list[int], per_token: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    cs = CompletionStream(prep, seed=0, created=1, prompt_tokens=10, model="m", response_id="resp_x")
    n = len(cs.sse(cs.start()))
    sse = cs.sse
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
    req = dr.ResponsesRequest(body)
    echo = req.echo()
    return req, echo, req.convert(opts)


def run_theirs(tok, body: dict, ids: list[int], per_token: bool) -> tuple[float, int]:
    req, echo, cr = _anchor_setup(body)
    t0 = time.perf_counter()
    sp = dr.StreamProcessor(req.chunk_generator(cr, "resp_x", "m").with_echo(echo), cr.parsing_options, tok)
    n = 0

    def frame(events) -> int:
        out = []
        for e in events:
            js = e.to_json()  # '{"type":"<name>",…': the event name is the type
            out.append(b"event: " + js[9:js.index('"', 9)].encode() + b"\ndata: " + js.encode() + b"\n\n")
        return len(b"".join(out))

    n += frame(sp.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=10))))
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
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    tok = load_tokenizer()
    dtok = dr.Tokenizer.from_file(str(default_tokenizer_path())) if dr else None
    outputs = {"think20k": (request(True, False), think_ids(tok)), "tools": (request(False, True), tool_ids(tok)),
               "oneblock": (request(False, True), one_block_ids(tok))}
    print(f"{'output':9} {'push':4} {'tokens':>6} | {'ours ms':>8} {'tok/s':>9} {'bytes':>8} | "
          f"{'theirs ms':>9} {'tok/s':>9} {'bytes':>8} | {'theirs/ours':>11}")
    for name, (body, ids) in outputs.items():
        prep = prepare(body)
        for per_token in (True, False):
            ours = [run_ours(prep, ids, per_token) for _ in range(args.reps)]
            o_ms = statistics.median(t for t, _ in ours) * 1e3
            line = (f"{name:9} {'one' if per_token else 'all':4} {len(ids):6} | {o_ms:8.1f} "
                    f"{len(ids) / o_ms * 1e3:9.0f} {ours[0][1]:8} | ")
            if dr is not None:
                theirs = [run_theirs(dtok, body, ids, per_token) for _ in range(args.reps)]
                t_ms = statistics.median(t for t, _ in theirs) * 1e3
                line += f"{t_ms:9.1f} {len(ids) / t_ms * 1e3:9.0f} {theirs[0][1]:8} | {t_ms / o_ms:11.2f}"
            else:
                line += "(deepseek-recipe not installed)"
            print(line, flush=True)
    print(f"medians of {args.reps} runs; bytes = SSE bytes produced (tools: theirs stops parsing after the first "
          "block; oneblock: same calls, different argument fragment granularity)")


if __name__ == "__main__":
    main()
