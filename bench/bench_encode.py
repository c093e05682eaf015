"""Request -> prompt token ids, recipe vs deepseek-recipe 0.2.0, measured in the same run.

    python bench/bench_encode.py            # all three cases
    python bench/bench_encode.py --quick    # fewer repetitions

Cases (issue "Foundation", benchmark): (a) a short chat request; (b) a long agentic conversation
(55 assistant turns with tool calls and results, ~100k prompt tokens), cold; (c) the agent loop's
next request, (b) plus one tool round, after (b) was encoded once (recipe's segment cache warm).
Each case checks that both libraries give identical token ids, then prints medians and the ratio
(deepseek-recipe time / recipe time: > 1 means recipe is faster). Targets: (a) >= 1, (b) >= 2, (c) >= 10.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import anchor  # noqa: E402
from gen import agentic_request, next_request, short_request  # noqa: E402
from timing import median_seconds as _median  # noqa: E402

from recipe.pipeline import prepare  # noqa: E402
from recipe.prompt import SegmentCache  # noqa: E402
from recipe.tokenizer import load_tokenizer  # noqa: E402


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:9.3f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_short, n_long = (300, 5) if args.quick else (2000, 15)

    tok = load_tokenizer()
    theirs = anchor.encoder("ChatCompletionRequest")
    short = json.dumps(short_request())
    long_req = agentic_request()
    long_body = json.dumps(long_req)
    next_body = json.dumps(next_request(long_req))

    rows = []
    # (a) short request, default segment cache (short chunks bypass it anyway)
    assert prepare(short, "chat", tokenizer=tok).token_ids == theirs(short)
    ours_a = _median(lambda: prepare(short, "chat", tokenizer=tok, cache=None), n_short)
    theirs_a = _median(lambda: theirs(short), n_short)
    rows.append(("(a) short chat request", ours_a, theirs_a, 1.0))

    # (b) long agentic conversation, cold (no segment cache)
    ids_b = prepare(long_body, "chat", tokenizer=tok, cache=None).token_ids
    assert ids_b == theirs(long_body)
    ours_b = _median(lambda: prepare(long_body, "chat", tokenizer=tok, cache=None), n_long)
    theirs_b = _median(lambda: theirs(long_body), n_long)
    rows.append((f"(b) long agentic, cold ({len(ids_b)} tokens)", ours_b, theirs_b, 2.0))

    # (c) next request after (b) was encoded once: a fresh cache warmed by (b) for every repetition
    assert prepare(next_body, "chat", tokenizer=tok, cache=SegmentCache()).token_ids == theirs(next_body)
    times = []
    for _ in range(n_long):
        cache = SegmentCache()
        prepare(long_body, "chat", tokenizer=tok, cache=cache)
        t0 = time.perf_counter()
        prepare(next_body, "chat", tokenizer=tok, cache=cache)
        times.append(time.perf_counter() - t0)
    ours_c = statistics.median(times)
    theirs_c = _median(lambda: theirs(next_body), n_long)
    rows.append(("(c) next agent request, warm", ours_c, theirs_c, 10.0))

    tracemalloc.start()
    cache = SegmentCache()
    prepare(long_body, "chat", tokenizer=tok, cache=cache)
    prepare(next_body, "chat", tokenizer=tok, cache=cache)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    print(f"{'case':44} {'recipe':>12} {'deepseek-recipe':>16} {'ratio':>8} {'target':>7}")
    for name, ours, them, target in rows:
        ratio = them / ours
        flag = "ok" if ratio >= target else "BELOW"
        print(f"{name:44} {_fmt(ours)} {_fmt(them):>16} {ratio:7.2f}x {target:5.1f}x {flag}")
    print(f"\npeak Python memory for (b)+(c) with cache: {peak / 2**20:.1f} MiB (tracemalloc); "
          f"segment cache {len(cache)} chunks; process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"medians of {n_short} (a) / {n_long} (b, c) runs; ids identical in every case")


if __name__ == "__main__":
    main()
