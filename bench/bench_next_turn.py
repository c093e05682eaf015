"""The agent loop's next turn with no collection gap, recipe vs deepseek-recipe 0.2.0.

    python bench/bench_next_turn.py [--rounds N] [--turns T] [--workload coding|analyst|both]

Two workloads of bench/gen.py, a fresh conversation (seed) and a fresh ``PromptCache`` each round:

* ``coding``: a coding agent (a long system prompt, tools, ``--turns`` assistant turns with
  reasoning and calls, ~100k tokens at 50 turns); the next request adds one more assistant turn with
  an edit call and its result;
* ``analyst``: an independent check that nothing is tuned to one generator — an analyst's chat
  (``--turns`` user questions, some as content-part arrays, prose answers with reasoning on some,
  tool calls on about half the turns with results from a few bytes to tens of kilobytes: JSON
  hits, CSV rows, ticket threads, Markdown pages, log dumps; ``thinking`` switched on, 75k–190k
  tokens); the next request adds the answer to the last question and the user's follow-up.

Through the README's call path, ``recipe.prepare(body)`` with JSON text: the long request, then at
once (no ``gc.collect()``, no pause: whatever collection the first turn's young objects bring falls
on the timed call) the next request, then deepseek-recipe on the same next body
(``ChatCompletionRequest(body)``, ``convert``, ``encode``). Ids are checked identical each round.

Prints, per workload and side, the median [min–max] over the rounds of the wall time and of the
process CPU time (user + system of every thread: deepseek-recipe's encode runs in several), and the
ratios theirs / ours. Target: the next turn ≥ 20× in both columns (medians of the rounds; on a
shared machine the wall-time column moves with other work).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import anchor  # noqa: E402
import gen  # noqa: E402

import recipe  # noqa: E402
from recipe.prompt_cache import PromptCache  # noqa: E402


def _timed(fn: object) -> tuple[float, float, object]:
    """(wall seconds, process CPU seconds, result) of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()  # type: ignore[operator]
    return time.perf_counter() - w0, time.process_time() - c0, out


def _span(values: list[float], scale: float = 1e3, digits: int = 2) -> str:
    return f"{statistics.median(values) * scale:.{digits}f} [{min(values) * scale:.{digits}f}–{max(values) * scale:.{digits}f}]"


WORKLOADS = {
    "coding": (lambda turns, seed: gen.coding_agent_request(assistant_turns=turns, seed=seed), gen.coding_next_request,
               "coding agent"),
    "analyst": (lambda turns, seed: gen.analyst_chat_request(turns=turns, seed=seed), gen.analyst_next_request,
                "analyst chat with tools"),
}


def run(name: str, rounds: int, turns: int, theirs: object) -> bool:
    """Print one workload's block; True when both medians reach the target."""
    long_request, next_request, title = WORKLOADS[name]
    ours_wall, ours_cpu, theirs_wall, theirs_cpu = [], [], [], []
    tokens: list[int] = []
    for r in range(rounds):
        long_req = long_request(turns, 1000 + r)
        long_body = json.dumps(long_req, ensure_ascii=False)
        next_body = json.dumps(next_request(long_req), ensure_ascii=False)
        cache = PromptCache()
        recipe.prepare(long_body, prompt_cache=cache)
        w, c, prep = _timed(lambda: recipe.prepare(next_body, prompt_cache=cache))
        ours_wall.append(w)
        ours_cpu.append(c)
        w, c, ids = _timed(lambda: theirs(next_body))  # type: ignore[operator]
        theirs_wall.append(w)
        theirs_cpu.append(c)
        assert prep.token_ids == ids, f"{name} round {r}: ids differ"  # type: ignore[attr-defined]
        tokens.append(len(ids))  # type: ignore[arg-type]
    wall = [t / o for o, t in zip(ours_wall, theirs_wall)]
    cpu = [t / o for o, t in zip(ours_cpu, theirs_cpu)]
    met = statistics.median(cpu) >= 20 and statistics.median(wall) >= 20
    print(f"next turn of a {turns}-turn {title} ({_span(tokens, 1, 0)} tokens), fresh PromptCache, no gc gap; "
          f"{rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"  recipe ms           wall {_span(ours_wall)}  cpu {_span(ours_cpu)}")
    print(f"  deepseek-recipe ms  wall {_span(theirs_wall, digits=1)}  cpu {_span(theirs_cpu, digits=1)}")
    print(f"  ratio (theirs/ours) wall {_span(wall, 1, 1)}×  cpu {_span(cpu, 1, 1)}×  target ≥ 20× (medians, both): "
          f"{'met' if met else 'not met'}")
    return met


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--turns", type=int, default=50, help="assistant turns (coding) or user turns (analyst) in the long conversation")
    ap.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    args = ap.parse_args()
    theirs = anchor.encoder("ChatCompletionRequest", v41=False)
    for name in WORKLOADS if args.workload == "both" else [args.workload]:
        run(name, args.rounds, args.turns, theirs)


if __name__ == "__main__":
    main()
