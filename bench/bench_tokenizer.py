"""Tokenizer speed: recipe (tiktoken) vs HF ``tokenizers`` vs ``deepseek_recipe.Tokenizer``.

Encodes ~1 MB of deterministic mixed text (English prose, Python-like code, Chinese, Japanese,
emoji, digit runs, CRLF) with each tokenizer built from the same ``tokenizer.json`` and prints the
median of N runs, throughput, and the ratio to recipe's ``encode_ordinary`` (the anchor, measured
in the same run). The ids are checked to be equal first.

    /tmp/venv/bin/python bench/bench_tokenizer.py [--repeat N] [--size BYTES]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from timing import median_seconds

from recipe.tokenizer import default_tokenizer_path, load_tokenizer

_WORDS = (
    "model prompt token cache reasoning answer because however request stream value function "
    "parser server latency memory build test error return class import module config simple"
).split()
_ZH = "深度求索公司创造了这个助手今天天气很好我们一起去公园散步吧模型读取请求并渲染提示词"
_JA = "日本語のテキストですひらがなカタカナ漢字コーヒーを飲みましょう"
_EMOJI = ["😀", "👍🏽", "🎉", "👨\u200d👩\u200d👧", "🇯🇵", "❤\ufe0f", "🔥"]


def mixed_text(size: int, seed: int = 20250417) -> str:
    """About ``size`` UTF-8 bytes of mixed text, identical for the same ``size`` and ``seed``."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        kind = rng.random()
        if kind < 0.40:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(20, 80))]
            piece = " ".join(words).capitalize() + rng.choice([". ", "! ", "? ", ".\n\n"])
        elif kind < 0.65:
            lines = []
            for k in range(rng.randint(3, 12)):
                a, b, c = rng.sample(_WORDS, 3)
                indent = "    " * rng.randint(0, 3)
                lines.append(f"{indent}{a}_{k} = {b}({c!r}, {rng.randint(0, 99999)})  # {c}")
            piece = "\n".join(lines) + "\n"
        elif kind < 0.80:
            piece = "".join(rng.choice(_ZH) for _ in range(rng.randint(10, 60))) + rng.choice(["。", "，", "！", "？\n"])
        elif kind < 0.88:
            piece = "".join(rng.choice(_JA) for _ in range(rng.randint(10, 40))) + "。"
        elif kind < 0.94:
            piece = " ".join(rng.choice(_EMOJI) for _ in range(rng.randint(1, 6))) + " "
        else:
            piece = f"{rng.randint(0, 10**12)}\t{rng.random():.6f}\r\n"
        parts.append(piece)
        total += len(piece.encode("utf-8"))
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="runs per tokenizer (median reported)")
    ap.add_argument("--size", type=int, default=1_000_000, help="bytes of text to encode")
    args = ap.parse_args(argv)

    path = str(default_tokenizer_path())
    text = mixed_text(args.size)
    nbytes = len(text.encode("utf-8"))

    t0 = time.perf_counter()
    ours = load_tokenizer(path)
    build = {"recipe (tiktoken)": time.perf_counter() - t0}
    candidates: dict[str, Callable[[], list[int]]] = {"recipe (tiktoken)": lambda: ours.encode_ordinary(text)}
    try:
        import tokenizers

        t0 = time.perf_counter()
        hf = tokenizers.Tokenizer.from_file(path)
        build["HF tokenizers"] = time.perf_counter() - t0
        candidates["HF tokenizers"] = lambda: hf.encode(text, add_special_tokens=False).ids
    except ImportError:
        print("HF tokenizers not installed: skipped")
    try:
        import deepseek_recipe

        t0 = time.perf_counter()
        ds = deepseek_recipe.Tokenizer.from_file(path)
        build["deepseek_recipe.Tokenizer"] = time.perf_counter() - t0
        candidates["deepseek_recipe.Tokenizer"] = lambda: list(ds.encode(text))
    except ImportError:
        print("deepseek-recipe not installed: skipped")

    reference = candidates["recipe (tiktoken)"]()
    for name, fn in candidates.items():
        same = fn() == reference
        print(f"ids equal to recipe: {name:<28} {same}")

    print(f"\nencode {nbytes / 1e6:.2f} MB mixed text, {len(reference):,} tokens, median of {args.repeat}")
    print(f"{'tokenizer':<28} {'build s':>8} {'median s':>9} {'MB/s':>7} {'Mtok/s':>7} {'x slower than recipe':>21}")
    anchor = None
    for name, fn in candidates.items():
        med = median_seconds(fn, args.repeat)
        anchor = anchor or med
        print(f"{name:<28} {build[name]:>8.2f} {med:>9.4f} {nbytes / med / 1e6:>7.2f} {len(reference) / med / 1e6:>7.2f} {med / anchor:>21.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
