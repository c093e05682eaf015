"""Run the request and stream benchmarks and regenerate the docs' measurement tables.

    taskset -c 1 python bench/report.py            # run everything, print the tables
    taskset -c 1 python bench/report.py --write    # ... and replace them in the docs
    python bench/report.py --rounds 5 --write      # fewer rounds

Runs ``bench_encode.py`` (both workloads), ``bench_stream.py`` (output parser) and the three API
stream benches (``bench_chat_stream.py``, ``bench_responses_stream.py``, ``bench_messages_stream.py``),
each with ``--json``, one after the other, and renders every row as median [min–max] over the
rounds. ``--write`` replaces the text between ``<!-- bench:encode -->`` / ``<!-- /bench:encode -->``
in docs/prompt-format.md and ``<!-- bench:stream -->`` / ``<!-- /bench:stream -->`` in
docs/streaming.md, stamped with the date, the Python version and the load average.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs"
STREAM_BENCHES = ("bench_stream.py", "bench_chat_stream.py", "bench_responses_stream.py", "bench_messages_stream.py")
STREAM_TITLES = {
    "parser": "output parser alone (`bench_stream.py`: OutputParser vs StreamProcessor)",
    "chat": "Chat Completions path (`bench_chat_stream.py`: parser + encoder + SSE framing)",
    "responses": "Responses path (`bench_responses_stream.py`)",
    "messages": "Messages path (`bench_messages_stream.py`)",
}


def _run(script: str, args: list[str]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        subprocess.run([sys.executable, str(HERE / script), *args, "--json", out], check=True, cwd=HERE)
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def _span(values: list[float], digits: int) -> str:
    med, lo, hi = values
    return f"{med:.{digits}f} [{lo:.{digits}f}–{hi:.{digits}f}]"


def _ms_digits(row: dict[str, Any]) -> int:
    return 3 if row["ours_ms"][1] < 1 else 1


def _verdict(row: dict[str, Any]) -> str:
    if row.get("target") is None:
        return "—"
    return f"≥ {row['target']:g}× {'met' if row['met'] else '**not met**'}"


def encode_table(result: dict[str, Any]) -> str:
    """The markdown of a bench_encode.py result."""
    lines = []
    for name, w in result["workloads"].items():
        lines += [f"Workload `{name}` ({w['long_bytes'] / 1e3:.0f} KB long body):", "",
                  "| case | recipe ms | deepseek-recipe ms | ratio (theirs/ours) | target (every round) |",
                  "|---|---|---|---|---|"]
        for row in w["rows"]:
            d = _ms_digits(row)
            lines.append(f"| {row['name']} | {_span(row['ours_ms'], d)} | {_span(row['theirs_ms'], d)} | "
                         f"{_span(row['ratio'], 2)}× | {_verdict(row)} |")
        fl = w["floor"]
        lines += ["", f"Floor of (b): tiktoken alone on the prompt's distinct text chunks takes {_span(fl['ours_ms'], 1)} ms; "
                  f"deepseek-recipe's time over it is {_span(fl['ratio'], 2)}×, the most (b)'s ratio can reach with "
                  "this tokenizer."]
        lines += ["", f"Prompt cache after (b)+(c): {w['prompt_cache_entries']} entry, {w['prompt_cache_checkpoints']} "
                  f"checkpoints, {w['prompt_cache_estimate'] / 2**20:.1f} MiB by its own estimate "
                  f"(`stats().bytes`), {w['prompt_cache_traced'] / 2**20:.1f} MiB by tracemalloc.", ""]
    return "\n".join(lines)


def stream_table(result: dict[str, Any]) -> str:
    """The markdown of one stream bench result."""
    lines = [f"{STREAM_TITLES[result['api']]}:", "",
             "| output | push | ours ms | theirs ms | ratio (theirs/ours) | target (every round) |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        if "ratio" not in row:
            continue
        work = "" if row["equal_work"] else " (unequal work*)"
        lines.append(f"| {row['output']} ({row['tokens']:,} tokens){work} | {row['push']} | {_span(row['ours_ms'], 1)} | "
                     f"{_span(row['theirs_ms'], 1)} | {_span(row['ratio'], 2)}× | {_verdict(row)} |")
    return "\n".join(lines + [""])


def stamp(results: list[dict[str, Any]], rounds: int) -> str:
    """The line saying when and how the tables were measured."""
    loads = [r["load"][0] for r in results if "load" in r]
    return (f"Measured {datetime.date.today().isoformat()} by `python bench/report.py --write` (pinned with "
            f"`taskset -c 1`), Python {platform.python_version()}, {os.cpu_count()} cores, deepseek-recipe 0.2.0 in "
            f"the same process; {rounds} rounds per row, both sides back to back in each round; load average "
            f"{min(loads):.1f}–{max(loads):.1f} while measuring (a shared machine: read the ranges, not one number).")


def replace_block(path: Path, name: str, text: str) -> None:
    """Replace the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` in ``path``."""
    src = path.read_text()
    pattern = re.compile(rf"(<!-- bench:{name} -->\n).*?(<!-- /bench:{name} -->)", re.S)
    if not pattern.search(src):
        raise SystemExit(f"{path}: no <!-- bench:{name} --> block")
    path.write_text(pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(2), src))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15, help="rounds per row (default 15)")
    ap.add_argument("--write", action="store_true", help="replace the tables in docs/")
    args = ap.parse_args()

    encode = _run("bench_encode.py", ["--rounds", str(args.rounds), "--workload", "v4"])
    streams = [_run(s, ["--reps", str(args.rounds)] + (["--no-scaling"] if s == "bench_stream.py" else []))
               for s in STREAM_BENCHES]
    encode_md = stamp([encode], args.rounds) + "\n\n" + encode_table(encode)
    stream_md = (stamp(streams, args.rounds) + "\n\n" + "\n".join(stream_table(s) for s in streams)
                 + "\n\\* deepseek-recipe stops parsing after the first tool block, so the multi-block `tools` rows "
                 "compare unequal work; `oneblock` / `block20k` (one block of parallel calls) are the equal-work "
                 "tool-call rows.\n")
    print(encode_md)
    print(stream_md)
    if args.write:
        replace_block(DOCS / "prompt-format.md", "encode", encode_md)
        replace_block(DOCS / "streaming.md", "stream", stream_md)
        print("docs/prompt-format.md and docs/streaming.md updated")


if __name__ == "__main__":
    main()
