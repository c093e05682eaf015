"""Request -> prompt token ids through the README's call path, recipe vs deepseek-recipe 0.2.0.

    python bench/bench_encode.py                 # both workloads, 15 rounds
    python bench/bench_encode.py --rounds 5      # fewer rounds
    python bench/bench_encode.py --json FILE     # also write the results as JSON (bench/report.py)

recipe is called exactly as the README shows it: ``recipe.prepare(body)``, no tokenizer, cache or
API argument (the default vocabulary, segment cache and prompt cache). deepseek-recipe runs
``ChatCompletionRequest(body).convert(options)`` then ``encode`` with the same vocabulary, in the
same process. Two workloads of bench/gen.py, each with three cases:

* ``agentic``: today's generator (55 assistant turns with reasoning and tool calls, code and prose
  tool results, ~112k tokens); ``coding``: a coding agent (long system prompt, Zipf English, 50
  turns, numbered file reads, many small tool results, CJK, several user turns, ~100k tokens);
* (a) a short request, given as a dict (as in the README); (b) the long conversation as JSON text,
  cold: a conversation this process never saw (a fresh seed each round, recipe's caches cleared
  first); (c) the agent's next request (JSON text: the long one plus one tool round) after the long
  one was prepared (caches warm, as in an agent loop). Between the two turns of a real agent loop
  the model generates for seconds, and the process's garbage collector runs many young
  collections meanwhile; so before (c) the bench runs ``gc.collect()`` (as it does before (b)),
  instead of timing (c) while the long request's fresh containers (its 100k-id tuple, once) are
  still young. ``--no-gap`` times (c) straight after the long request, that collection included
  when one runs during the call (≈ 1.5 ms on this machine; in most rounds none does, the next
  request reusing the earlier one's validated messages allocates little).

Each round runs every case once per side, back to back, alternating which side goes first, and
yields one ratio (deepseek-recipe time / recipe time) per case; (a) times 200 calls per side per
round and takes their medians. The table prints median [min–max] over the rounds; a target counts
as met only if every round reaches it. Token ids are checked identical for every body. Then the
memory the prompt cache holds after (b)+(c): its own estimate and tracemalloc's count, and the floor
of (b): tiktoken alone on the prompt's distinct text chunks (deepseek-recipe's time over it is the
most (b)'s ratio can reach with this tokenizer).
Every workload runs for DeepSeek-V4 (the default model) and for DeepSeek-V4.1 (``--families``; the
bodies name ``deepseek-v4.1-flash``, both sides use the synthetic V4.1-shaped vocabulary, since no
V4.1 tokenizer.json is public, and deepseek-recipe runs its V4.1 path); a V4.1 row's ratio should
be at least its V4 row's, printed per case with the same condition in times (recipe's
V4.1/V4 time must not exceed deepseek-recipe's: a cost both families share cannot change it).
Targets: (a) >= 3, (b) >= 3, (c) >= 20. Pin it (``taskset -c 1``) on a shared machine.

Earlier generations (``--workload earlier`` runs just these, ``v4`` just the two above):
the agentic workload's short request and long conversation sent as ``deepseek-r1`` and
``deepseek-v3.2``, against transformers' ``apply_chat_template`` on the R1-0528 template + HF
``tokenizers`` (R1), and the V3.2 reference prompt + transformers' tokenizer call (V3.2;
``anchor_hf.py``), rounds interleaved as above, ids checked identical. Targets: short >= 1, long
cold >= 5.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import anchor  # noqa: E402
import gen  # noqa: E402
from timing import Row, print_rows, times  # noqa: E402

import recipe  # noqa: E402
from recipe.pipeline import default_segment_cache  # noqa: E402
from recipe.prompt_cache import default_prompt_cache  # noqa: E402


@dataclass(frozen=True)
class Workload:
    """A workload: its short request, its long conversation by seed, and the next request."""

    name: str
    short: Callable[[], dict[str, Any]]
    long: Callable[[int], dict[str, Any]]
    next: Callable[[dict[str, Any]], dict[str, Any]]


WORKLOADS = {
    "agentic": Workload("agentic", gen.short_request, lambda seed: gen.agentic_request(seed=seed), gen.next_request),
    "coding": Workload("coding", gen.coding_short_request, lambda seed: gen.coding_agent_request(seed=seed), gen.coding_next_request),
}


def clear_caches() -> None:
    """Forget every conversation this process has seen (recipe's default caches)."""
    default_segment_cache().clear()
    default_prompt_cache().clear()


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@dataclass(frozen=True)
class Family:
    """A model family as the bench runs it: the model named in the bodies (None: the body's own, the
    default DeepSeek-V4) and the vocabulary passed to ``prepare`` (None: the default)."""

    name: str
    model: str | None
    v41: bool


FAMILIES = {"V4": Family("V4", None, False), "V4.1": Family("V4.1", "deepseek-v4.1-flash", True)}


def run(workload: Workload, rounds: int, n_short: int, family: Family = FAMILIES["V4"], gap: bool = True) -> tuple[list[Row], dict[str, Any]]:
    """The three rows of ``workload`` for ``family`` and its facts (token counts, memory); ``gap``:
    collect garbage between the long request and the next one (module docstring)."""
    theirs = anchor.encoder("ChatCompletionRequest", v41=family.v41)
    tok = recipe.load_tokenizer(anchor.synthetic_v41_path()) if family.v41 else None
    model = family.model

    def named(body: dict[str, Any]) -> dict[str, Any]:
        return body if model is None else {**body, "model": model}

    def prepare(body: Any) -> Any:
        return recipe.prepare(body) if tok is None else recipe.prepare(body, tokenizer=tok)

    w = workload  # the same workload with the family's model name in every body
    workload = Workload(w.name, lambda: named(w.short()), lambda seed: named(w.long(seed)), lambda b: named(w.next(b)))
    short = workload.short()
    long0 = workload.long(1000)
    long_body = json.dumps(long0, ensure_ascii=False)
    next_body = json.dumps(workload.next(long0), ensure_ascii=False)
    assert prepare(short).token_ids == theirs(short), "short: ids differ"
    n_long = len(prepare(long_body).token_ids)
    assert prepare(long_body).token_ids == theirs(long_body), "long: ids differ"
    n_next = len(prepare(next_body).token_ids)
    assert prepare(next_body).token_ids == theirs(next_body), "next: ids differ"

    rows = [
        Row(f"(a) short request ({len(prepare(short).token_ids)} tokens, dict)", 3.0),
        Row(f"(b) long, cold ({n_long} tokens, JSON)", 3.0),
        Row(f"(c) next request, warm ({n_next} tokens)", 20.0),
    ]
    floor = Row("tiktoken alone on (b)'s text")
    encode = (tok or recipe.load_tokenizer()).encode_ordinary
    for r in range(rounds):
        first_ours = r % 2 == 0
        # (a)
        pair = [lambda: statistics.median(times(lambda: prepare(short), n_short)),
                lambda: statistics.median(times(lambda: theirs(short), n_short))]
        a = [f() for f in (pair if first_ours else pair[::-1])]
        rows[0].add(*(a if first_ours else a[::-1]))
        # (b) a fresh conversation each round, recipe's caches cleared
        body = json.dumps(workload.long(r), ensure_ascii=False)
        clear_caches()
        gc.collect()
        if first_ours:
            o = _timed(lambda: prepare(body))
            t = _timed(lambda: theirs(body))
        else:
            t = _timed(lambda: theirs(body))
            clear_caches()
            o = _timed(lambda: prepare(body))
        rows[1].add(o, t)
        # the floor of (b): tiktoken alone on the prompt's distinct text chunks (the least encoding work)
        chunks = list(dict.fromkeys(text for special, text in prepare(body).prompt.chunks() if not special))
        floor.add(_timed(lambda: [encode(c) for c in chunks]), t)
        # (c) the next request after the long one
        prepare(long_body)
        if gap:
            gc.collect()  # the model's generation between two turns (module docstring)
        if first_ours:
            o = _timed(lambda: prepare(next_body))
            t = _timed(lambda: theirs(next_body))
        else:
            t = _timed(lambda: theirs(next_body))
            o = _timed(lambda: prepare(next_body))
        rows[2].add(o, t)

    # memory held by the prompt cache after (b)+(c) of one conversation
    clear_caches()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    prepare(long_body)
    prepare(next_body)
    gc.collect()
    prompt_stats = default_prompt_cache().stats()
    default_segment_cache().clear()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    facts = {"floor": floor.as_dict(), "long_tokens": n_long, "next_tokens": n_next, "long_bytes": len(long_body.encode()),
             "prompt_cache_estimate": prompt_stats.bytes, "prompt_cache_traced": held,
             "prompt_cache_entries": prompt_stats.entries, "prompt_cache_checkpoints": prompt_stats.checkpoints}
    return rows, facts


def _template_messages(req: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages as a transformers pipeline passes them (``content: None`` as ``""``,
    which R1-0528's template needs)."""
    return [{**m, "content": "" if m.get("content") is None else m["content"]} for m in req["messages"]]


def earlier(rounds: int, n_short: int) -> list[Row]:
    """Short and long-cold rows for DeepSeek-R1 and V3.2 against transformers + HF tokenizers."""
    import anchor_hf

    from recipe.encodings.deepseek_v3_2.reference import encode_messages

    r1 = anchor_hf.tokenizer("R1-0528")
    v32 = anchor_hf.tokenizer()

    def r1_side(req: dict[str, Any]) -> tuple[str, Callable[[], object], Callable[[], list[int]]]:
        body = json.dumps({**req, "model": "deepseek-r1"}, ensure_ascii=False)
        msgs = _template_messages(req)
        return body, lambda: recipe.prepare(body), lambda: anchor_hf.chat_ids(r1, msgs)

    def v32_side(req: dict[str, Any]) -> tuple[str, Callable[[], object], Callable[[], list[int]]]:
        body = json.dumps({**req, "model": "deepseek-v3.2"}, ensure_ascii=False)
        ref = _template_messages(req)
        if req.get("tools"):
            ref[0] = {**ref[0], "tools": req["tools"]}
        return body, lambda: recipe.prepare(body), lambda: anchor_hf.text_ids(v32, encode_messages(ref, "thinking"))

    short, long0 = gen.short_request(), gen.agentic_request(seed=1000)
    rows = []
    for fam, side in (("R1", r1_side), ("V3.2", v32_side)):
        for label, req in (("short", short), ("long agentic, cold", long0)):
            body, ours, theirs = side(req)
            ids = recipe.prepare(body).token_ids
            assert ids == theirs(), f"{fam} {label}: ids differ"
            rows.append(Row(f"{fam} {label} ({len(ids)} tokens)", 1.0 if label == "short" else 5.0))
    for r in range(rounds):
        first_ours = r % 2 == 0
        long_r = gen.agentic_request(seed=r)  # a conversation this process never saw
        for k, side in enumerate((r1_side, v32_side)):
            _, ours, theirs = side(short)
            pair = [lambda: statistics.median(times(ours, n_short)), lambda: statistics.median(times(theirs, n_short))]
            a = [f() for f in (pair if first_ours else pair[::-1])]
            rows[2 * k].add(*(a if first_ours else a[::-1]))
            _, ours, theirs = side(long_r)
            clear_caches()
            gc.collect()
            if first_ours:
                o, t = _timed(ours), _timed(theirs)
            else:
                t, o = _timed(theirs), _timed(ours)
            rows[2 * k + 1].add(o, t)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--short-calls", type=int, default=200, help="calls per side per round in (a)")
    ap.add_argument("--workload", choices=[*WORKLOADS, "v4", "earlier", "all"], default="all",
                    help="v4: agentic and coding; earlier: the R1 / V3.2 rows; all: both")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--families", default="V4,V4.1", help="comma-separated: V4, V4.1")
    ap.add_argument("--no-gap", action="store_true",
                    help="time (c) straight after the long request, no garbage collection between the turns")
    args = ap.parse_args()

    names = list(WORKLOADS) if args.workload in ("all", "v4") else [] if args.workload == "earlier" else [args.workload]
    families = [FAMILIES[f] for f in args.families.split(",")]
    out: dict[str, Any] = {"rounds": args.rounds, "load": os.getloadavg(), "workloads": {}}
    print(f"{args.rounds} rounds per case, sides interleaved; load average {os.getloadavg()[0]:.1f} at start"
          + ("; (c) straight after the long request (--no-gap)" if args.no_gap else ""))
    for name, family in ((n, f) for n in names for f in families):
        rows, facts = run(WORKLOADS[name], args.rounds, args.short_calls, family, gap=not args.no_gap)
        key = name if family.model is None else f"{name} {family.name}"
        print_rows(rows, f"\nworkload {key} ({facts['long_bytes'] / 1e3:.0f} KB long body)")
        if family.model is not None and name in out["workloads"]:  # the V4 rows of this workload ran first
            for r4, r in zip(out["workloads"][name]["rows"], rows):
                d = r.as_dict()
                mine = d["ratio"][0]
                # the same condition in times: recipe's V4.1/V4 time must not exceed deepseek-recipe's
                ours, theirs = d["ours_ms"][0] / r4["ours_ms"][0], d["theirs_ms"][0] / r4["theirs_ms"][0]
                print(f"  {r.name.split(' (')[0]}: {family.name} ratio {mine:.2f} vs V4 ratio {r4['ratio'][0]:.2f} -> "
                      f"{'ok' if mine >= r4['ratio'][0] else 'BELOW'} ({family.name}/V4 time: recipe {ours:.2f}, "
                      f"deepseek-recipe {theirs:.2f})")
        fl = facts["floor"]
        print(f"  floor of (b): tiktoken alone on its distinct text chunks {fl['ours_ms'][0]:.1f} ms "
              f"[{fl['ours_ms'][1]:.1f}–{fl['ours_ms'][2]:.1f}]; deepseek-recipe / tiktoken alone = {fl['ratio'][0]:.2f} "
              f"[{fl['ratio'][1]:.2f}–{fl['ratio'][2]:.2f}], the most (b)'s ratio can reach with this tokenizer")
        print(f"  prompt cache after (b)+(c): {facts['prompt_cache_entries']} entry, {facts['prompt_cache_checkpoints']} "
              f"checkpoints, estimate {facts['prompt_cache_estimate'] / 2**20:.1f} MiB, traced "
              f"{facts['prompt_cache_traced'] / 2**20:.1f} MiB (tracemalloc)")
        out["workloads"][key] = {"rows": [r.as_dict() for r in rows], **facts}
    if args.workload in ("all", "earlier"):
        rows = earlier(args.rounds, max(1, args.short_calls // 4))
        print_rows(rows, "\nearlier generations (anchor: transformers apply_chat_template + HF tokenizers)",
                   anchor="transformers + HF ms")
        out["earlier"] = [r.as_dict() for r in rows]
    out["load_end"] = os.getloadavg()
    print(f"\nload average {os.getloadavg()[0]:.1f} at end; ids identical for every body")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
