"""Speed of recipe.jsonfmt on tool schemas / arguments (run: python bench/bench_jsonfmt.py).

Prints medians (µs per call) and ratios against the stdlib ``json`` anchor measured in the same run.
"""

from __future__ import annotations

import json
import statistics
import time

from recipe.jsonfmt import _py_dumps, dumps_compact, dumps_prompt, parse_json_value

SCHEMA = {
    "type": "object",
    "properties": {
        f"field_{i}": {"type": "string", "description": f"Field number {i}, with ünïcode and \"quotes\"", "enum": ["a", "b", "c"]}
        for i in range(40)
    }
    | {"n": {"type": "number", "minimum": 0.5, "maximum": 1e16}, "k": {"type": "integer", "default": 3}},
    "required": ["n"],
}
ARGS_TEXT = json.dumps({"path": "/tmp/x.py", "content": "def f():\n    return 1\n" * 200, "line": 12, "ratio": 0.25})


def median_us(fn, n: int = 2000, rounds: int = 7) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


def main() -> None:
    anchor_dump = median_us(lambda: json.dumps(SCHEMA, ensure_ascii=False))
    rows = [
        ("json.dumps (anchor)", anchor_dump),
        ("dumps_prompt", median_us(lambda: dumps_prompt(SCHEMA))),
        ("dumps_compact", median_us(lambda: dumps_compact(SCHEMA))),
        ("_py_dumps (pure Python)", median_us(lambda: _py_dumps(SCHEMA, ", ", ": "))),
    ]
    for name, us in rows:
        print(f"schema  {name:26s} {us:8.2f} µs  x{us / anchor_dump:5.2f} vs anchor")
    anchor_load = median_us(lambda: json.loads(ARGS_TEXT))
    ours = median_us(lambda: parse_json_value(ARGS_TEXT))
    print(f"args    {'json.loads (anchor)':26s} {anchor_load:8.2f} µs")
    print(f"args    {'parse_json_value':26s} {ours:8.2f} µs  x{ours / anchor_load:5.2f} vs anchor")


if __name__ == "__main__":
    main()
