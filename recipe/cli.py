"""The ``recipe`` command: see how a request tokenizes (contract in docs/cli.md).

Exit status: 0 ok; 1 a rejected request or unreadable input (the API's error JSON on stdout with
``--json``, a one-line reason on stderr); 2 usage errors. Never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import resources
from typing import Any


from recipe.api.errors import error_body
from recipe.errors import RequestError
from recipe.jsonfmt import dumps_wire, loads_request
from recipe.tokenizer import Tokenizer, TokenizerError, load_tokenizer

__all__ = ["main", "build_parser"]

EXAMPLES = ("weather", "hello")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("recipe")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class _Usage(Exception):
    """A usage error: exit status 2."""


class _Failure(Exception):
    """Unreadable input or a rejected request: exit status 1."""


def _read_input(arg: str | None, example: str | None) -> bytes:
    if example is not None:
        if example not in EXAMPLES:
            raise _Usage(f"unknown example {example!r}; choose from {', '.join(EXAMPLES)}")
        return resources.files("recipe.examples").joinpath(f"{example}.json").read_bytes()
    if arg is None:
        raise _Usage("give a request FILE, - for standard input, or --example NAME")
    if arg == "-":
        return sys.stdin.buffer.read()
    try:
        with open(arg, "rb") as f:
            return f.read()
    except OSError as exc:
        raise _Failure(f"cannot read {arg}: {exc.strerror}") from None


def _tokenizer(path: str | None) -> Tokenizer:
    try:
        return load_tokenizer(path)
    except TokenizerError as exc:
        raise _Failure(str(exc)) from None


def _dump(obj: Any) -> None:
    sys.stdout.buffer.write(dumps_wire(obj, indent=True) + b"\n")
    sys.stdout.flush()


class _Rejected(Exception):
    """A request the API refuses: its error body and a one-line reason."""

    def __init__(self, body: dict[str, Any], line: str) -> None:
        super().__init__(line)
        self.body, self.line = body, line


def prepare_request(raw: bytes, api: str, tokenizer: Tokenizer, model: str | None = None) -> Any:
    """Request bytes -> PreparedRequest (API detected when ``auto``; ``model`` overrides the body's).

    Raises:
        _Rejected: the request is invalid (carries the API's error body).
    """
    from recipe.pipeline import detect_api, prepare

    try:
        body = loads_request(raw)
        if not isinstance(body, dict):
            raise RequestError("invalid request body: expected a JSON object", stage="parse")
        if api == "auto":
            api = detect_api(body)
        if model:
            body = {**body, "model": model}
        return prepare(body, api, tokenizer=tokenizer)
    except RequestError as err:
        raise _Rejected(error_body(api if api != "auto" else "chat", err), f"recipe: request rejected ({err.stage}): {err}") from None


def _cmd_render(ns: argparse.Namespace) -> int:
    if ns.file is not None and ns.example is not None:
        raise _Usage("give either FILE or --example, not both")
    raw = _read_input(ns.file, ns.example)
    try:
        prep = prepare_request(raw, ns.api, _tokenizer(ns.tokenizer), model=ns.model)
    except _Rejected as rej:
        if ns.json:
            _dump(rej.body)
        print(rej.line, file=sys.stderr)
        return 1
    if ns.json:
        _dump(
            {
                "api": prep.api,
                "model": prep.model,
                "encoding": prep.encoding,
                "prompt": prep.prompt.text,
                "special_ranges": prep.prompt.special_ranges,
                "token_ids": prep.token_ids,
                "num_tokens": len(prep.token_ids),
                "conversion": prep.conversion(),
            }
        )
        return 0
    from recipe.view import print_prompt

    print_prompt(prep)
    return 0


def _cmd_tokenize(ns: argparse.Namespace) -> int:
    if ns.text is None:
        raise _Usage("give TEXT, or - to read it from standard input")
    text = sys.stdin.read() if ns.text == "-" else ns.text
    tok = _tokenizer(ns.tokenizer)
    ids = tok.encode_ordinary(text)
    pieces = [tok.token_bytes(i).decode("utf-8", "replace") for i in ids]
    if ns.json:
        _dump({"token_ids": ids, "pieces": pieces, "num_tokens": len(ids)})
        return 0
    from recipe.view import print_tokens

    print_tokens(ids, pieces)
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Usage(message)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``recipe`` command (subcommands render, tokenize, cache)."""
    p = _Parser(prog="recipe", description="DeepSeek-V4 prompts from OpenAI / Anthropic API requests.")
    p.add_argument("--tokenizer", metavar="PATH", help="tokenizer.json to use (default: the embedded DeepSeek-V4 one)")
    p.add_argument("--version", action="version", version=f"recipe {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("render", help="a request's prompt and token ids")
    r.add_argument("file", nargs="?", metavar="FILE|-", help="request JSON file, or - for standard input")
    r.add_argument("--example", choices=EXAMPLES, help="render a shipped example request instead of FILE")
    r.add_argument("--api", choices=("auto", "chat", "responses", "messages"), default="auto")
    r.add_argument("--model", help="override the request's model name")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS)
    r.set_defaults(run=_cmd_render)

    t = sub.add_parser("tokenize", help="ids and pieces of plain text (special spellings stay text)")
    t.add_argument("text", nargs="?", metavar="TEXT|-")
    t.add_argument("--json", action="store_true")
    t.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS)
    t.set_defaults(run=_cmd_tokenize)

    from recipe import cli_cache, cli_complete

    cli_complete.register(sub)
    cli_cache.register(sub, _load_prompt_ids)
    return p


def _load_prompt_ids(path: str) -> tuple[str, list[int], list[tuple[int, int, int]]]:
    """Request file -> (model, prompt token ids, message boundaries) for the cache commands."""
    from recipe.pipeline import prepare
    from recipe.prompt import message_token_spans

    raw = _read_input(path, None)
    prep = prepare(raw)
    return prep.model, prep.token_ids, message_token_spans(load_tokenizer(), prep.prompt)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``recipe`` console script; returns the exit status."""
    parser = build_parser()
    args = sys.argv[1:] if argv is None else argv
    try:
        for arg in args:
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                raise _Usage(f"argument {arg.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8") from None
        ns = parser.parse_args(args)
        if getattr(ns, "run", None) is None:
            parser.print_help(sys.stderr)
            return 2
        return ns.run(ns)
    except _Usage as exc:
        print(f"recipe: {exc}", file=sys.stderr)
        return 2
    except _Failure as exc:
        print(f"recipe: {exc}", file=sys.stderr)
        return 1
    except RequestError as exc:
        print(f"recipe: request rejected ({exc.stage}): {exc}", file=sys.stderr)
        return 1
    except TokenizerError as exc:
        print(f"recipe: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: still one line, never a traceback (RECIPE_DEBUG=1 shows it)
        if os.environ.get("RECIPE_DEBUG"):
            raise
        print(f"recipe: internal error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
