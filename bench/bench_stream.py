"""Output-parser throughput: recipe's DeepSeek-V4 OutputParser vs deepseek-recipe's StreamProcessor.

Run: ``python bench/bench_stream.py [--reps N]``. Same token ids for both; two outputs:

* ``think20k``: thinking mode, 15k reasoning tokens, ``</think>``, 5k answer tokens;
* ``tools``: non-thinking, tools declared, ~20k tokens of short prose + DSML tool calls;

each fed one id per push and all at once. Prints medians (push, finish, tokens/s) and the ratio
ours/theirs (> 1 means faster), then our per-token cost at 1k, 10k and 100k tokens (flat = linear).
deepseek-recipe (the anchor) is optional: without it only our numbers are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.output import OutputParser
from recipe.tokenizer import default_tokenizer_path, load_tokenizer

try:
    import deepseek_recipe as dr
except ImportError:  # pragma: no cover
    dr = None

WORDS = ("the model considers each option carefully, weighing 3 trade-offs; then it writes "
         "code: def f(x): return x * 2 # 中文 测试 ünïcödé and a few more words to vary the text").split()


def _text_tokens(tok, n: int, seed: int) -> list[int]:
    out: list[int] = []
    i = seed
    while len(out) < n:
        line = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12)) + (".\n" if i % 3 else ".\n\n")
        out += tok.encode_ordinary(line)
        i += 1
    return out[:n]


def think_ids(tok, reasoning: int = 15_000, answer: int = 5_000) -> list[int]:
    """Thinking output: ``reasoning`` ids, ``</think>``, ``answer`` ids (``reasoning+answer`` in all)."""
    return _text_tokens(tok, reasoning - 1, 1) + [tok.special_id("</think>")] + _text_tokens(tok, answer, 2)


def tool_ids(tok, n: int = 20_000) -> list[int]:
    """Non-thinking output: a line of prose, then one DSML block of many calls (~``n`` ids in all).

    One block, because deepseek-recipe drops everything after the first block's closer.
    """
    invokes = (
        '<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Paris, "FR"</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
        '<｜DSML｜invoke name="search">\n<｜DSML｜parameter name="query" string="true">weather\\today\nline 2 with '
        'some more words in it to make a longer value</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="opts" string="false">{"lang": ["en", "fr"], "n": 10}</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
        '<｜DSML｜invoke name="run">\n<｜DSML｜parameter name="cmd" string="true">ls -la /tmp | grep x &amp;&amp; echo "done"'
        '</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
    )
    head = tok.encode_with_special_tokens("Let me check all of that.\n\n<｜DSML｜tool_calls>\n")
    unit = tok.encode_with_special_tokens(invokes)
    tail = tok.encode_with_special_tokens("</｜DSML｜tool_calls>")
    out = list(head)
    while len(out) + len(unit) + len(tail) <= n:
        out += unit
    return out + tail


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def run_ours(tok, opts, ids, per_token: bool) -> tuple[float, float]:
    p = OutputParser(opts, tok, tool_call_id=0)
    t0 = time.perf_counter()
    if per_token:
        push = p.push
        for i in ids:
            push((i,))
    else:
        p.push(ids)
    t1 = time.perf_counter()
    p.finish("stop")
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def _anchor_request(thinking: bool, tools: bool) -> str:
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": "high" if thinking else "none"}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
                         for n in ("get_weather", "search", "run")]
    return json.dumps(body)


def run_anchor(ctx, ids, per_token: bool) -> tuple[float, float]:
    req, conv, tok = ctx
    gen = dr.ChatCompletionRequest.chunk_generator(conv, "chatcmpl-bench", "m")
    sp = dr.StreamProcessor(gen, conv.parsing_options, tok)
    tokens = dr.InferenceChunk.tokens
    t0 = time.perf_counter()
    sp.push(dr.InferenceChunk.ready())
    if per_token:
        push = sp.push
        for i in ids:
            push(tokens([i]))
    else:
        sp.push(tokens(ids))
    t1 = time.perf_counter()
    sp.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop))
    sp.finish()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    tok = load_tokenizer()
    cases = {
        "think20k": (think_ids(tok), ParsingOptions(thinking_stage="reasoning"), (True, False)),
        "tools": (tool_ids(tok), ParsingOptions(parse_tool_calls=True, tool_names=("get_weather", "search", "run")), (False, True)),
    }
    dtok = dr.Tokenizer.from_file(str(default_tokenizer_path())) if dr else None
    if dr:
        ropts = dr.ConversionOptions().with_model_alias("deepseek-v4-pro", dr.ModelVersion.DeepseekV4Pro)
    print(f"{'case':10} {'mode':9} {'ours push':>10} {'finish':>9} {'ours tok/s':>11} {'anchor tok/s':>13} {'ratio':>6}")
    for name, (ids, opts, (thinking, tools)) in cases.items():
        for per_token in (True, False):
            ours = [run_ours(tok, opts, ids, per_token) for _ in range(args.reps)]
            push_s, fin_s = _median([a for a, _ in ours]), _median([b for _, b in ours])
            our_rate = len(ids) / _median([a + b for a, b in ours])
            line = f"{name:10} {'1/push' if per_token else 'all':9} {push_s * 1e3:8.2f}ms {fin_s * 1e3:7.3f}ms {our_rate / 1e3:9.0f}k"
            if dr:
                req = dr.ChatCompletionRequest(_anchor_request(thinking, tools))
                ctx = (req, req.convert(ropts), dtok)
                theirs = [run_anchor(ctx, ids, per_token) for _ in range(args.reps)]
                their_rate = len(ids) / _median([a + b for a, b in theirs])
                line += f" {their_rate / 1e3:11.0f}k {our_rate / their_rate:6.2f}"
            print(line)
    print("\nper-token cost, one id per push (think output scaled; flat = linear):")
    for n in (1_000, 10_000, 100_000):
        ids = think_ids(tok, reasoning=n * 3 // 4, answer=n - n * 3 // 4)
        reps = max(3, args.reps if n <= 10_000 else 3)
        t = _median([sum(run_ours(tok, ParsingOptions(thinking_stage="reasoning"), ids, True)) for _ in range(reps)])
        print(f"  {n:>7} tokens: {t / n * 1e6:6.2f} µs/token")


if __name__ == "__main__":
    main()
