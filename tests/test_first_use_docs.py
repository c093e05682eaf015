"""The docs' commands as a new user types them.

README.md's quick start run as written (the ``recipe`` console script); every ``recipe serve`` command
line in README.md and docs/*.md parsed and built by the CLI (no engine is reached: the flags are
checked, not the hosts); the serving quick start (``recipe serve`` with the demo engine) driven by
docs/serving.md's own openai and anthropic snippets over real HTTP; fleet.md's renderer and its llm-d
container command; docs/cache-keys.md's snippet and CLI synopsis; the README's command synopses
against each subcommand's options. Servers bind 127.0.0.1 port 0 and are stopped at the end of each
test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import httpx
import pytest

import recipe
from recipe.cli.main import build_parser
from serve_support import serve_process

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _recipe_command() -> list[str]:
    """The ``recipe`` console script of this environment (what a user types), else ``python -m recipe``."""
    script = Path(sys.executable).parent / "recipe"
    return [str(script)] if script.exists() else [sys.executable, "-m", "recipe"]


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block of a Markdown text."""
    out, body, lang = [], None, ""
    for line in text.split("\n"):
        if line.startswith("```"):
            if body is None:
                body, lang = [], line[3:].strip()
            else:
                out.append((lang, "\n".join(body)))
                body = None
        elif body is not None:
            body.append(line)
    return out


def shell_commands(path: Path, program: str) -> list[str]:
    """The ``recipe …`` command lines of ``path``'s bash blocks (continuations joined, comments and a
    leading ``… &&`` dropped; ``...`` placeholders removed)."""
    out = []
    for lang, body in fenced_blocks(path.read_text(encoding="utf-8")):
        if lang != "bash":
            continue
        for line in body.replace("\\\n", " ").split("\n"):
            line = re.split(r"\s#\s", line)[0].strip()
            m = re.search(rf"(?:^|&& )({re.escape(program)}(?: .*)?)$", line)
            if m:
                out.append(m.group(1).replace(" ...", "").strip())
    return out


SERVE_COMMANDS = [(p.relative_to(ROOT).as_posix(), c) for p in DOCS for c in shell_commands(p, "recipe serve")]


def options_of(*command: str) -> set[str]:
    """The option strings of ``recipe COMMAND…`` (and the main parser's, which every command takes)."""
    import argparse

    parser = build_parser()
    opts = {o for a in parser._actions for o in a.option_strings}  # noqa: SLF001 (argparse's own fields)
    for name in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
        parser = sub.choices[name]
        opts |= {o for a in parser._actions for o in a.option_strings}  # noqa: SLF001
    return opts


@contextmanager
def recipe_serve(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """``recipe serve ARGS…`` on 127.0.0.1 port 0 as a subprocess; yields (url, its first line)."""
    cmd = [*_recipe_command(), "serve", *args, "--host", "127.0.0.1", "--port", "0"]
    with serve_process(cmd, cwd=cwd, env=env) as (url, _, line):
        yield url, line


# --------------------------------------------------------------------------------------------
# README.md
# --------------------------------------------------------------------------------------------


def test_readme_quick_start_renders_the_shipped_example():
    """The first block: make a venv, ``pip install .``, ``recipe render --example weather`` — the last
    command run as written by this environment's console script."""
    first = fenced_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[0]
    assert first[0] == "bash" and "pip install . && recipe render --example weather" in first[1]
    argv = shlex.split(shell_commands(ROOT / "README.md", "recipe")[0])
    assert argv == ["recipe", "render", "--example", "weather"]
    proc = subprocess.run([*_recipe_command(), *argv[1:]], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "FORCE_COLOR"})
    assert proc.returncode == 0, proc.stderr
    body = json.loads(resources.files("recipe").joinpath("examples/weather.json").read_text(encoding="utf-8"))
    prep = recipe.prepare(body)
    assert prep.prompt.text in proc.stdout            # the prompt, special tokens and all
    assert f"tokens {len(prep.token_ids)}" in proc.stdout.splitlines()[-1]
    assert "model deepseek-v4-pro" in proc.stdout.splitlines()[-1]


def _synopses(text: str) -> list[tuple[list[str], set[str]]]:
    """(subcommand path, --options) of each ``recipe …`` synopsis in a list item or CLI block."""
    out = []
    for m in re.finditer(r"`recipe ([a-z]+(?: [a-z]+)*)([^`]*)`", text):
        out.append((m.group(1).split(), set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(2)))))
    return out


def test_readme_synopses_name_only_options_the_commands_take():
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## CLI", 1)[1].split("\n## ", 1)[0]
    checked = 0
    for words, flags in _synopses(text):
        command = [w for w in words if w in ("render", "tokenize", "complete", "grammar", "cache", "models", "serve",
                                              "keys", "diff", "simulate")]
        if not command or not flags:
            continue
        assert flags <= options_of(*command), (command, sorted(flags - options_of(*command)))
        checked += 1
    assert checked >= 6


# --------------------------------------------------------------------------------------------
# Every documented `recipe serve` command line
# --------------------------------------------------------------------------------------------


def test_the_docs_show_serve_commands():
    files = {f for f, _ in SERVE_COMMANDS}
    assert {"docs/serving.md", "docs/fleet.md"} <= files and len(SERVE_COMMANDS) >= 10


@pytest.mark.parametrize("where, command", SERVE_COMMANDS, ids=[f"{f}:{i}" for i, (f, _) in enumerate(SERVE_COMMANDS)])
def test_documented_serve_command_parses_and_builds(where, command, tmp_path, monkeypatch):
    """Every flag and engine spec the docs show is one ``recipe serve`` takes: parsed and the app
    built (no socket is opened, no engine or Redis is reached; the store defaults to memory here
    unless the command names one, and a keys file it names is made)."""
    from recipe.cli.serve import build

    argv = shlex.split(command)[1:]
    if "--api-keys" in argv:
        (tmp_path / argv[argv.index("--api-keys") + 1]).write_text("key-1 alice\n", encoding="utf-8")
    if "--store" not in argv:
        argv += ["--store", "memory"]
    monkeypatch.chdir(tmp_path)
    ns = build_parser().parse_args(argv)
    application = build(ns)
    replicas = application.state.recipe.pool.replicas
    if ns.render_only:
        assert not ns.engine
    elif not any(s.startswith(("prefill=", "decode=")) for s in ns.engine or ()):  # a P/D pool is one replica
        assert len(replicas) == len(ns.engine or ["demo"])


def test_the_llm_d_container_command_is_a_render_only_server():
    text = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    command = json.loads(re.search(r'command: (\["recipe", "serve".*?\])', text).group(1))
    ns = build_parser().parse_args(command[1:])
    assert ns.render_only and ns.port == 8000 and ns.host == "0.0.0.0"


# --------------------------------------------------------------------------------------------
# docs/serving.md "Quick start without an engine", and fleet.md's renderer
# --------------------------------------------------------------------------------------------


def _section(path: Path, title: str) -> str:
    return path.read_text(encoding="utf-8").split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_serving_quick_start_with_the_sdks_as_written(tmp_path):
    """``recipe serve`` (the demo engine, its default SQLite store under a fresh HOME), then the
    section's openai and anthropic snippets, each run as written with only the port changed."""
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    section = _section(ROOT / "docs" / "serving.md", "Quick start without an engine")
    blocks = fenced_blocks(section)
    assert blocks[0][0] == "bash" and shlex.split(shell_commands_in(blocks[0][1])) == ["recipe", "serve"]
    snippets = [b for lang, b in blocks if lang == "python"]
    assert len(snippets) == 2 and all("127.0.0.1:8000" in s for s in snippets)
    with recipe_serve(cwd=tmp_path, env={"HOME": str(tmp_path), "XDG_STATE_HOME": ""}) as (url, line):
        assert line.rstrip().endswith("(engines: demo)")
        for snippet in snippets:
            code = snippet.replace("http://127.0.0.1:8000", url)
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr[-3000:]
        import anthropic

        client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
        msg = client.messages.create(model="deepseek-v4-pro", max_tokens=1024, messages=[{"role": "user", "content": "Hi"}])
        assert [b.type for b in msg.content] == ["thinking", "text"] and msg.stop_reason == "end_turn"
        off = client.messages.create(model="deepseek-v4-pro", max_tokens=1024, thinking={"type": "disabled"},
                                     messages=[{"role": "user", "content": "Hi"}])
        assert [b.type for b in off.content] == ["text"] and off.content[0].text == msg.content[1].text
    # the default store (docs/serving.md: ~/.local/state/recipe/responses.sqlite3)
    assert (tmp_path / ".local" / "state" / "recipe" / "responses.sqlite3").is_file()


def shell_commands_in(body: str) -> str:
    """The ``recipe …`` part of a one-line bash block (after ``… &&``, before a comment)."""
    line = re.split(r"\s#\s", body.strip())[0]
    return line.split("&&")[-1].strip()


def test_fleet_renderer_as_written(tmp_path):
    """fleet.md's ``recipe serve --render-only --host 0.0.0.0 --port 8000`` (bound to loopback, port
    0, here): it says it runs no engine, is ready for the readiness probe, answers the render routes
    llm-d and Dynamo call with recipe's ids, and serves no generation."""
    command = shell_commands(ROOT / "docs" / "fleet.md", "recipe serve")[0]
    assert shlex.split(command) == ["recipe", "serve", "--render-only", "--host", "0.0.0.0", "--port", "8000"]
    with recipe_serve("--render-only", "--store", "memory", cwd=tmp_path) as (url, line):
        assert line.rstrip().endswith("(render only: no engine)")
        assert httpx.get(url + "/health", timeout=30).status_code == 200
        chat = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}]}
        msgs = {**chat, "max_tokens": 64}
        for path, body, api in (("/v1/chat/completions/render", chat, "chat"), ("/v1/messages/render", msgs, "messages")):
            r = httpx.post(url + path, json=body, timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["token_ids"] == recipe.prepare(body, api).token_ids
        assert httpx.post(url + "/v1/chat/completions", json=chat, timeout=30).status_code == 404


# --------------------------------------------------------------------------------------------
# recipe serve: what a first run trips on
# --------------------------------------------------------------------------------------------

_WITHOUT_REDIS = """
import sys
sys.modules["redis"] = None     # as on a machine without the [redis] extra
from recipe.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("flag", ["--index", "--store", "--shared-load"])
def test_a_redis_flag_without_redis_py_names_the_extra(flag):
    url = "redis://127.0.0.1:1/0"   # never reached: the flag is refused before
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_REDIS, "serve", flag, url, "--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"recipe serve: {flag} {url}: ") and "pip install 'dsrecipe[redis]'" in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("argv, message", [
    (["--port", "99999"], "--port: '99999': want a port from 0 (a free one) to 65535"),
    (["--port", "http"], "--port: 'http': want a port from 0 (a free one) to 65535"),
    (["--drain-seconds", "-5"], "--drain-seconds: '-5': want seconds >= 0"),
])
def test_serve_values_out_of_range_are_usage_errors(argv, message, capsys):
    from recipe.cli.main import main

    assert main(["serve", *argv]) == 2
    assert message in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# docs/cache-keys.md
# --------------------------------------------------------------------------------------------


def test_cache_keys_snippet_runs_and_prints_what_its_comments_say():
    code = [b for lang, b in fenced_blocks((ROOT / "docs" / "cache-keys.md").read_text(encoding="utf-8"))
            if lang == "python"][0]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = [line.split("#", 1)[1].split(":")[0].split("(")[0].strip() for line in code.splitlines()
            if line.startswith("print(") and "#" in line]
    assert proc.stdout.splitlines() == said


def test_cache_cli_synopsis_names_only_options_the_commands_take():
    section = _section(ROOT / "docs" / "cache-keys.md", "CLI")
    lines = [ln for lang, b in fenced_blocks(section) for ln in b.splitlines() if ln.startswith("recipe cache ")]
    assert [ln.split()[2] for ln in lines] == ["keys", "diff", "simulate"]
    for ln in lines:
        flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", ln))
        assert flags and flags <= options_of("cache", ln.split()[2]), (ln, flags - options_of("cache", ln.split()[2]))
