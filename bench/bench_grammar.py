"""Output grammars: compile (cache miss / hit), per-token mask and accept, matcher memory
(run: python bench/bench_grammar.py [--rounds N]).

recipe's grammar (Lark, matched by llguidance on recipe's vocabulary) side by side, in the same run,
with xgrammar's built-in ``deepseek_v4`` structural tag and with recipe's own structural tag compiled
by xgrammar, when xgrammar is installed (``pip install -e '.[xgrammar]'``; it pulls in torch). Without
xgrammar the ratios are against these targets:

* compile ≤ 10 ms for ≤ 8 tools on a cache miss (grammar text + llguidance matcher), ≤ 50 µs on a hit
  (2 and 8 tools of one shape, 8 mixed tools, and 64 tools without a target);
* mask p50 ≤ 20 µs and p99 ≤ 1 ms on a 2-tool turn (3k-token reasoning, then two calls).

Every figure is the median [min–max] over the rounds; the machine's load is printed with them.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from typing import Any

import recipe
from recipe.encodings.deepseek_v4.constants import DSML, EOS, THINK_END
from recipe.schema import constrain
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
_SPECIAL = {s: TOK.special_tokens[s] for s in (DSML, THINK_END, EOS)}


def tool(i: int, n_params: int = 4) -> dict[str, Any]:
    props = {f"p{j}": ({"type": "string"} if j % 3 == 0 else {"type": "integer"} if j % 3 == 1 else
                       {"type": "array", "items": {"type": "number"}}) for j in range(n_params)}
    return {"type": "function", "function": {"name": f"tool_{i}", "description": f"Tool {i}.", "strict": True,
            "parameters": {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}}}


def _strict(name: str, props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name, "strict": True, "parameters": {
        "type": "object", "properties": props, "required": list(props), "additionalProperties": False}}}


_S, _OPT_INT = {"type": "string"}, {"type": ["integer", "null"]}
#: 8 strict tools with different parameters (names, enums, nullable values, arrays of objects): the
#: identical tools of ``tool(i)`` share their parameter rules, these mostly do not.
MIXED_TOOLS = [
    _strict("get_weather", {"location": _S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}),
    _strict("search_web", {"query": _S, "max_results": _OPT_INT, "site": {"type": ["string", "null"]}}),
    _strict("read_file", {"path": _S, "offset": _OPT_INT, "limit": _OPT_INT}),
    _strict("write_file", {"path": _S, "content": _S, "append": {"type": "boolean"}}),
    _strict("run_command", {"command": _S, "timeout_s": {"type": ["number", "null"]}, "env": {"type": "array", "items": {
        "type": "object", "properties": {"name": _S, "value": _S}, "required": ["name", "value"], "additionalProperties": False}}}),
    _strict("create_event", {"title": _S, "start": _S, "end": _S, "attendees": {"type": "array", "items": {
        "type": "object", "properties": {"email": _S, "optional": {"type": "boolean"}}, "required": ["email", "optional"],
        "additionalProperties": False}}}),
    _strict("send_email", {"to": {"type": "array", "items": _S}, "subject": _S, "body": _S,
                           "cc": {"anyOf": [{"type": "array", "items": _S}, {"type": "null"}]}}),
    _strict("calculator", {"expression": _S, "precision": {"type": "integer"}}),
]


def body(n_tools: int | str, thinking: bool = True) -> dict[str, Any]:
    """A Chat request with ``n_tools`` identical-shape strict tools, or ``"8 mixed"`` (:data:`MIXED_TOOLS`)."""
    tools = MIXED_TOOLS if n_tools == "8 mixed" else [tool(i) for i in range(int(n_tools))]
    return {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Do it."}],
            "thinking": {"type": "enabled" if thinking else "disabled"}, "tools": tools}


def golden_ids() -> list[int]:
    """A 2-tool turn: ~3k tokens of reasoning, a sentence, two calls, EOS (reference encoder layout)."""
    reasoning = ("The user wants both tools called. I check the parameters one by one, compare the options, "
                 "and write down every intermediate step before I decide. ") * 110
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": f"tool_{i}", "arguments": json.dumps(
        {"p0": "Paris, France", "p1": 42 + i, "p2": [1.5, -2.25, 3e-05], "p3": "line one\nline two"})}} for i in range(2)]
    user = {"role": "user", "content": "Do it."}
    asst = {"role": "assistant", "reasoning_content": reasoning, "content": "Calling both.", "tool_calls": calls}
    prompt = recipe.encode_messages([user], "thinking")
    text = recipe.encode_messages([user, asst], "thinking", drop_thinking=False)[len(prompt):]
    ids: list[int] = []
    import re

    for k, part in enumerate(re.split("(" + "|".join(map(re.escape, _SPECIAL)) + ")", text)):
        if k % 2:
            ids.append(_SPECIAL[part])
        elif part:
            ids += TOK.encode_ordinary(part)
    return ids


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def fmt(values: list[float], unit: str) -> str:
    return f"{statistics.median(values):9.2f} {unit} [{min(values):.2f}–{max(values):.2f}]"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


# ---------------------------------------------------------------------------------------------


def bench_compile(rounds: int, xg: Any) -> None:
    print("\n== compile: grammar text (Lark + structural tag), llguidance matcher; cache miss / hit ==")
    for n in (2, 8, "8 mixed", 64):
        prep = recipe.prepare(body(n))
        text_ms, ll_ms, hit_us, mhit_us, xg_ms, xb_ms, first_ms = [], [], [], [], [], [], []
        for _ in range(rounds):
            constrain._grammars.clear()
            constrain._compiled.clear()
            t0 = time.perf_counter()
            g = recipe.output_grammar(prep)
            t1 = time.perf_counter()
            m = recipe.OutputMatcher(prep)
            t2 = time.perf_counter()
            m.mask()  # the first mask builds the lexer's first states (not part of the compile target)
            first_ms.append((time.perf_counter() - t2) * 1e3)
            text_ms.append((t1 - t0) * 1e3)
            ll_ms.append((t2 - t1) * 1e3)
            hits = []
            for _ in range(200):
                t = time.perf_counter()
                recipe.output_grammar(prep)
                hits.append(time.perf_counter() - t)
            hit_us.append(statistics.median(hits) * 1e6)
            mh = []
            for _ in range(50):
                t = time.perf_counter()
                recipe.OutputMatcher(prep)
                mh.append(time.perf_counter() - t)
            mhit_us.append(statistics.median(mh) * 1e6)
            if xg is not None:
                comp = xg["compiler"]
                t = time.perf_counter()
                comp.compile_structural_tag(g.structural_tag)
                xg_ms.append((time.perf_counter() - t) * 1e3)
                tag = xg["mod"].get_model_structural_tag(
                    "deepseek_v4", tools=body(n)["tools"], tool_choice="auto", reasoning="enabled")
                t = time.perf_counter()
                comp.compile_structural_tag(tag)
                xb_ms.append((time.perf_counter() - t) * 1e3)
        miss = [a + b for a, b in zip(text_ms, ll_ms)]
        print(f"{str(n) + ' tools':>13s}  miss total {fmt(miss, 'ms')}  (text {statistics.median(text_ms):.2f} + llguidance "
              f"{statistics.median(ll_ms):.2f})  x{statistics.median(miss) / 10:.2f} of the 10 ms target;"
              f"  then first mask {statistics.median(first_ms):.2f} ms")
        print(f"{'':13s} hit output_grammar {fmt(hit_us, 'µs')}  x{statistics.median(hit_us) / 50:.2f} of the 50 µs target;"
              f"  hit OutputMatcher {fmt(mhit_us, 'µs')}")
        if xg is not None:
            print(f"{'':13s} xgrammar: recipe's structural tag {fmt(xg_ms, 'ms')}; builtin deepseek_v4 {fmt(xb_ms, 'ms')}"
                  f"  -> recipe miss x{statistics.median(xb_ms) / statistics.median(miss):.1f} faster than builtin")


def bench_mask(rounds: int, xg: Any) -> None:
    print("\n== per token: 2-tool turn, thinking (reasoning + content + 2 calls) ==")
    prep = recipe.prepare(body(2))
    ids = golden_ids()
    print(f"turn: {len(ids)} tokens; check_output ok = {recipe.check_output(prep, ids).ok}")
    p50, p99, mx, acc, total = [], [], [], [], []
    x50, x99, xacc, b50, b99 = [], [], [], [], []
    for _ in range(rounds):
        m = recipe.OutputMatcher(prep)
        out = m.mask()
        masks, accepts = [], []
        for t in ids:
            a = time.perf_counter()
            m.mask(out)
            b = time.perf_counter()
            assert m.accept(t)
            c = time.perf_counter()
            masks.append((b - a) * 1e6)
            accepts.append((c - b) * 1e6)
        p50.append(statistics.median(masks))
        p99.append(pct(masks, 0.99))
        mx.append(max(masks))
        acc.append(statistics.median(accepts))
        total.append(sum(masks) / len(masks))
        if xg is not None:
            for name, tag, r50, r99, racc in (("recipe", prep.output_constraint.grammar.structural_tag, x50, x99, xacc),
                                               ("builtin", xg["builtin2"], b50, b99, None)):
                cg = xg["compiler"].compile_structural_tag(tag)
                xm = xg["mod"].GrammarMatcher(cg)
                bm = xg["mod"].allocate_token_bitmask(1, TOK.n_vocab)
                tm, ta = [], []
                for t in ids:
                    a = time.perf_counter()
                    xm.fill_next_token_bitmask(bm)
                    b = time.perf_counter()
                    ok = xm.accept_token(t)
                    c = time.perf_counter()
                    if not ok:
                        break
                    tm.append((b - a) * 1e6)
                    ta.append((c - b) * 1e6)
                r50.append(statistics.median(tm))
                r99.append(pct(tm, 0.99))
                if racc is not None:
                    racc.append(statistics.median(ta))
    print(f"llguidance (recipe Lark)  mask p50 {fmt(p50, 'µs')}  x{statistics.median(p50) / 20:.2f} of 20 µs;"
          f"  p99 {fmt(p99, 'µs')}  x{statistics.median(p99) / 1000:.2f} of 1 ms")
    print(f"{'':26s}mask max {fmt(mx, 'µs')}; mean {fmt(total, 'µs')}; accept p50 {fmt(acc, 'µs')}")
    if xg is not None:
        print(f"xgrammar (recipe's tag)   mask p50 {fmt(x50, 'µs')}; p99 {fmt(x99, 'µs')}; accept p50 {fmt(xacc, 'µs')}")
        print(f"xgrammar (builtin tag)    mask p50 {fmt(b50, 'µs')}; p99 {fmt(b99, 'µs')}  (builtin accepted "
              f"{'all' if xg['builtin_ok'] else 'not all'} of the turn)")


def bench_tokenizer() -> None:
    """The llguidance tokenizer, built once per process from recipe's vocabulary."""
    gc.collect()
    before = rss_kib()
    t = time.perf_counter()
    constrain.ll_tokenizer(TOK)
    built = time.perf_counter() - t
    print(f"llguidance tokenizer (once per process): {built:.2f} s, +{(rss_kib() - before) / 1024:.1f} MiB RSS")


def bench_memory() -> None:
    print("\n== memory (RSS, this process) ==")
    for n in (2, 64):
        prep = recipe.prepare(body(n))
        ids = golden_ids() if n == 2 else []
        gc.collect()
        base = rss_kib()
        live = []
        for _ in range(100):
            m = recipe.OutputMatcher(prep)
            if ids:
                m.accept_many(ids[:2000])
            live.append(m)
        gc.collect()
        per = (rss_kib() - base) / 100
        print(f"{n:3d} tools: {per:8.1f} KiB per live matcher (100 live{', each 2000 tokens in' if ids else ''})")


def _xgrammar() -> Any:
    try:
        import xgrammar as xgr
    except ImportError:
        return None
    vocab = [TOK.token_bytes(i) for i in range(TOK.n_vocab)]
    info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=TOK.n_vocab, stop_token_ids=[1])
    comp = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    builtin2 = xgr.get_model_structural_tag("deepseek_v4", tools=[tool(i) for i in range(2)], tool_choice="auto",
                                            reasoning="enabled")
    m = xgr.GrammarMatcher(comp.compile_structural_tag(builtin2))
    ok = all(m.accept_token(t) for t in golden_ids())
    return {"mod": xgr, "compiler": comp, "builtin2": builtin2, "builtin_ok": ok}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ns = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; rounds {ns.rounds}")
    xg = _xgrammar()
    print("xgrammar:", "installed (side by side)" if xg else "not installed (ratios against the targets only)")
    bench_tokenizer()
    bench_compile(ns.rounds, xg)
    bench_mask(ns.rounds, xg)
    bench_memory()


if __name__ == "__main__":
    main()
