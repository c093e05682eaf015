"""Full Chat Completions output path: recipe (parser + Chat encoder + SSE framing) vs deepseek-recipe
(StreamProcessor + ChatCompletionChunkGenerator + ``to_json`` + the same ``data: …`` framing).

Run: ``python bench/bench_chat_stream.py [--reps N]``. Same token ids for both (the outputs of
bench/bench_stream.py): ``think20k`` (thinking, 15k reasoning + 5k answer tokens) and ``tools``
(non-thinking, ~20k tokens of prose and parallel DSML tool calls), each fed one id per push and all
at once. Prints medians (ms, tokens/s) and the ratio theirs/ours (> 1 means we are faster).
deepseek-recipe (the anchor) is optional: without it only our numbers are printed.
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
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Go."}],
            "reasoning_effort": "high" if thinking else "none", "stream": True}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in TOOLS]
    return body


def run_ours(prep, ids: list[int], per_token: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    cs = CompletionStream(prep, seed=0, created=1, prompt_tokens=10, model="m", response_id="chatcmpl-x")
    n = 0
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
    req = dr.ChatCompletionRequest(body)
    return req, req.convert(opts)


def run_theirs(tok, body: dict, ids: list[int], per_token: bool) -> tuple[float, int]:
    req, cr = _anchor_setup(body)
    t0 = time.perf_counter()
    sp = dr.StreamProcessor(req.chunk_generator(cr, "chatcmpl-x", "m"), cr.parsing_options, tok)
    n = 0

    def frame(chunks) -> int:
        return len(b"".join([b"data: " + c.to_json().encode() + b"\n\n" for c in chunks]))

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
    n += len(b"data: [DONE]\n\n")
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
    print(f"medians of {args.reps} runs; bytes = SSE bytes produced (theirs stops parsing after the first "
          "tool block, so tool outputs differ in size)")


if __name__ == "__main__":
    main()
