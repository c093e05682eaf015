"""Output-parser throughput: recipe's DeepSeek-V4 OutputParser vs deepseek-recipe's StreamProcessor.

Run: ``python bench/bench_stream.py [--reps N]``. Same token ids for both; two outputs:

* ``think20k``: thinking mode, 15k reasoning tokens, ``</think>``, 5k answer tokens;
* ``tools``: non-thinking, tools declared, ~20k tokens of rounds of prose + a DSML block of 2-4
  parallel calls (string and non-string parameters, Windows paths, shell quoting, code); the anchor
  stops after the first block, so this row compares unequal work;
* ``oneblock``: one sentence and ONE block of parallel calls (~20k ids), parsed whole by both;
* ``think20k_v41`` / ``oneblock_v41``: the same outputs for DeepSeek-V4.1 (``deepseek-v4.1-flash``
  requests, DSML in V4.1's spaced spelling), against deepseek-recipe's V4.1 path; a V4.1 row's
  ratio should be at least its V4 row's (printed after the table);

each fed one id per push and all at once. Each round runs ours and the anchor back to back
(alternating which goes first); the table prints median [min–max] over the rounds of both times
and of the per-round ratio anchor/ours (> 1 means faster; target 2 on the equal-work rows), then
our per-token cost at 1k, 10k and 100k tokens for both outputs and a degenerate newline run
(flat = linear). ``--json FILE`` also writes the rows (bench/report.py). Pin it
(``taskset -c 0``) on a shared machine. deepseek-recipe (the anchor) is optional: without it
only our numbers are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import anchor
from anchor import dr

from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.output import OutputParser
from recipe.tokenizer import load_tokenizer
from timing import Row, span

WORDS = ["the", "model", "considers", "each", "option", "carefully,", "weighing", "3", "trade-offs;", "then", "it", "writes", "code:", "def", "f(x):", "return", "x", "*", "2", "#", "中文", "测试", "ünïcödé", "and", "a", "few", "more", "words", "to", "vary", "the", "text"]


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


TOOLS = ("get_weather", "search", "read_file", "run", "write_file")

_PROSE = (
    "I'll check the forecast for both cities and look up train times in parallel.",
    "The first results are in. Paris looks rainy, so let me read the config and run the tests before editing.",
    "Done. Now I will write the fix and re-run the failing test; the path on Windows needs escaping.",
    "Both searches came back empty, so I'm widening the query and fetching three more days.",
)
_CODE = ("def load(path):\n    with open(path, encoding=\"utf-8\") as f:\n        return [l.rstrip() for l in f if l.strip()]\n\n"
         "if __name__ == \"__main__\":\n    print(load(\"C:\\\\Users\\\\dev\\\\notes.txt\"))\n")


def _param(key: str, value: str, is_str: bool) -> str:
    return f'<｜DSML｜parameter name="{key}" string="{"true" if is_str else "false"}">{value}</｜DSML｜parameter>\n'


def _invoke(name: str, *params: str) -> str:
    return f'<｜DSML｜invoke name="{name}">\n{"".join(params)}</｜DSML｜invoke>\n'


def v41_spelling(text: str) -> str:
    """V4 DSML text in DeepSeek-V4.1's spelling (tag names with a leading space)."""
    for old, new in (("tool_calls>", " calls>"), ("｜DSML｜invoke", "｜DSML｜ invoke"), ("｜DSML｜parameter", "｜DSML｜ parameter")):
        text = text.replace(old, new)
    return text


def _calls(k: int) -> list[str]:
    """The k-th round's parallel calls: string and non-string parameters, quoting, paths, code."""
    city = ("Paris", "Zürich", "São Paulo", "東京")[k % 4]
    return [
        _invoke("get_weather", _param("city", f"{city}, \"FR\"", True), _param("days", str(1 + k % 7), False),
                _param("detailed", "true" if k % 2 else "false", False)),
        _invoke("search", _param("query", f"trains {city} to Lyon after 18:00 #{k}", True),
                _param("opts", '{"lang": ["en", "fr"], "limit": 10, "sort": null}', False)),
        _invoke("read_file", _param("path", f"C:\\Users\\dev\\project\\src\\mod{k % 9}.py", True)),
        _invoke("run", _param("cmd", f'cd /tmp/w{k} && pytest -q -k "not slow" 2>&1 | tail -n 20', True),
                _param("timeout", "120.5", False)),
        _invoke("write_file", _param("path", f"src/fix_{k}.py", True), _param("content", _CODE, True)),
    ][k % 5: k % 5 + 2 + k % 3]


def tool_ids(tok, n: int = 20_000, v41: bool = False) -> list[int]:
    """Non-thinking, tool-call heavy output (~``n`` ids): rounds of prose + a block of 2-4 parallel calls.

    deepseek-recipe drops everything after the first block's closer, so only token rates (not
    outputs) are comparable; both parsers get the same ids.
    """
    out: list[int] = []
    k = 0
    while len(out) < n:
        calls = _calls(k) or _calls(0)
        text = (f"{_PROSE[k % len(_PROSE)]}\n\n<｜DSML｜tool_calls>\n{''.join(calls)}</｜DSML｜tool_calls>"
                + ("\n\n" if k % 2 else "\n"))
        out += tok.encode_with_special_tokens(v41_spelling(text) if v41 else text)
        k += 1
    return out


def one_block_ids(tok, n: int = 20_000, v41: bool = False) -> list[int]:
    """Non-thinking: one sentence, then ONE block of parallel calls (~``n`` ids) — the tool-heavy
    output both libraries parse completely (deepseek-recipe stops after the first block,
    so only a single block compares equal work); ``v41``: in DeepSeek-V4.1's spelling."""
    calls: list[str] = []
    k = 0
    while True:
        calls += _calls(k) or _calls(0)
        k += 1
        text = f"Checking everything.\n\n<｜DSML｜tool_calls>\n{''.join(calls)}</｜DSML｜tool_calls>"
        ids = tok.encode_with_special_tokens(v41_spelling(text) if v41 else text)
        if len(ids) >= n:
            return ids


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


def _anchor_request(thinking: bool, tools: bool, model: str = "deepseek-v4-pro") -> str:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": "high" if thinking else "none"}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
                         for n in TOOLS]
    return json.dumps(body)


def run_anchor(ctx, ids, per_token: bool) -> tuple[float, float]:
    _req, conv, tok = ctx
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
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON (bench/report.py)")
    ap.add_argument("--no-scaling", action="store_true", help="skip the per-token cost at 1k/10k/100k tokens")
    args = ap.parse_args()
    tok = load_tokenizer()
    think_opts = ParsingOptions(thinking_stage="reasoning")
    tool_opts = ParsingOptions(parse_tool_calls=True, tool_names=TOOLS)
    cases = {
        "think20k": (think_ids(tok), think_opts, (True, False), "deepseek-v4-pro"),
        "tools": (tool_ids(tok), tool_opts, (False, True), "deepseek-v4-pro"),
        "oneblock": (one_block_ids(tok), tool_opts, (False, True), "deepseek-v4-pro"),
        "think20k_v41": (think_ids(tok), think_opts, (True, False), "deepseek-v4.1-flash"),
        "oneblock_v41": (one_block_ids(tok, v41=True), tool_opts, (False, True), "deepseek-v4.1-flash"),
    }
    dtok = anchor.tokenizer() if dr else None
    if dr:
        ropts = anchor.options()
    print(f"{', '.join(f'{len(v[0])} ids in {k!r}' for k, v in cases.items())}; {args.reps} rounds, ours and the "
          "anchor back to back in each (alternating which goes first); median [min–max] over the rounds; "
          "ratio = anchor time / ours per round (> 1: we are faster)")
    print(f"{'case':12} {'mode':6} {'ours ms':>22} {'ours tok/s':>10} {'anchor ms':>22} {'ratio':>20}")
    rows = []
    for name, (ids, opts, (thinking, tools), model) in cases.items():
        for per_token in (True, False):
            ctx = None
            if dr:
                req = dr.ChatCompletionRequest(_anchor_request(thinking, tools, model))
                ctx = (req, req.convert(ropts), dtok)
            row = Row(f"{name} {'one' if per_token else 'all'}", target=2.0 if name != "tools" else None)
            ours_only = []
            for r in range(args.reps):
                if ctx and r % 2:
                    t = sum(run_anchor(ctx, ids, per_token))
                o = sum(run_ours(tok, opts, ids, per_token))
                if ctx and not r % 2:
                    t = sum(run_anchor(ctx, ids, per_token))
                if ctx:
                    row.add(o, t)
                ours_only.append(o)
            line = (f"{name:12} {'1/push' if per_token else 'all':6} {span(ours_only, 1e3):>22} "
                    f"{len(ids) / _median(ours_only) / 1e3:9.0f}k")
            if ctx:
                line += f" {span(row.theirs, 1e3):>22} {span(row.ratios):>20}" + ("" if name != "tools" else "  (unequal work)")
                rows.append({**row.as_dict(), "output": name, "push": "one" if per_token else "all", "tokens": len(ids),
                             "equal_work": name != "tools"})
            print(line, flush=True)
    print("tools: the anchor stops after the first tool block (unequal work); oneblock: one block, parsed whole by both")
    med = {(r["output"], r["push"]): r["ratio"][0] for r in rows}
    for name in ("think20k", "oneblock"):
        for push in ("one", "all"):
            if (name, push) in med:
                r4, r41 = med[(name, push)], med[(f"{name}_v41", push)]
                print(f"{name}_v41 {push}: V4.1 ratio {r41:.2f} vs V4 ratio {r4:.2f} -> {'ok' if r41 >= r4 else 'BELOW'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"api": "parser", "rounds": args.reps, "load": os.getloadavg(), "rows": rows}, f, indent=1)
    if args.no_scaling:
        return
    print("\nper-token cost, one id per push, ours (outputs scaled; flat = linear):")
    for n in (1_000, 10_000, 100_000):
        think = think_ids(tok, reasoning=n * 3 // 4, answer=n - n * 3 // 4)
        calls = tool_ids(tok, n)
        reps = max(3, args.reps if n <= 10_000 else 3)
        blank = tok.encode_ordinary("x") + tok.encode_ordinary("\n") * (n - 1)  # a degenerate newline run
        t1 = _median([sum(run_ours(tok, think_opts, think, True)) for _ in range(reps)])
        t2 = _median([sum(run_ours(tok, tool_opts, calls, True)) for _ in range(reps)])
        t3 = _median([sum(run_ours(tok, tool_opts, blank, True)) for _ in range(reps)])
        print(f"  {n:>7} tokens: think {t1 / len(think) * 1e6:5.2f} µs/token, tools {t2 / len(calls) * 1e6:5.2f} "
              f"µs/token, newline run {t3 / len(blank) * 1e6:5.2f} µs/token")


if __name__ == "__main__":
    main()
