"""What the ``recipe`` subcommands share: exit-status exceptions, reading inputs, printing JSON,
preparing a request file.

Exit status contract (docs in :mod:`recipe.cli.main`): :class:`Usage` → 2, :class:`Failure` and
:class:`Rejected` → 1.
"""

from __future__ import annotations

import sys
from importlib import resources
from typing import Any

from recipe.errors import RequestError
from recipe.jsonfmt import dumps_wire, loads_request
from recipe.tokenizer import Tokenizer, TokenizerError, load_tokenizer

__all__ = ["EXAMPLES", "Usage", "Failure", "Rejected", "read_input", "tokenizer_from", "dump",
           "prepare_request", "load_prompt_ids"]

#: Names of the shipped example requests (``recipe/examples/NAME.json``).
EXAMPLES = ("weather", "hello")


class Usage(Exception):
    """A usage error: exit status 2."""


class Failure(Exception):
    """Unreadable input or a rejected request: exit status 1."""


class Rejected(Exception):
    """A request the API refuses: its error body (``body``, the API's own JSON) and a one-line reason
    (``line``)."""

    def __init__(self, body: dict[str, Any], line: str) -> None:
        super().__init__(line)
        self.body, self.line = body, line


def read_input(arg: str | None, example: str | None) -> bytes:
    """The bytes of a shipped example (``example``), of standard input (``arg == "-"``) or of a file.

    Raises:
        Usage: an unknown example, or neither a file nor an example given.
        Failure: the file cannot be read.
    """
    if example is not None:
        if example not in EXAMPLES:
            raise Usage(f"unknown example {example!r}; choose from {', '.join(EXAMPLES)}")
        return resources.files("recipe.examples").joinpath(f"{example}.json").read_bytes()
    if arg is None:
        raise Usage("give a request FILE, - for standard input, or --example NAME")
    if arg == "-":
        return sys.stdin.buffer.read()
    try:
        with open(arg, "rb") as f:
            return f.read()
    except OSError as exc:
        raise Failure(f"cannot read {arg}: {exc.strerror}") from None


def tokenizer_from(path: str | None) -> Tokenizer:
    """The vocabulary at ``path`` (a ``tokenizer.json``), or the embedded default when None.

    Raises:
        Failure: the file is missing or not a usable vocabulary.
    """
    try:
        return load_tokenizer(path)
    except TokenizerError as exc:
        raise Failure(str(exc)) from None


def dump(obj: Any) -> None:
    """Print ``obj`` as indented wire JSON (one object, newline-terminated) on standard output."""
    sys.stdout.buffer.write(dumps_wire(obj, indent=True) + b"\n")
    sys.stdout.flush()


def prepare_request(raw: bytes, api: str, tokenizer: Tokenizer, model: str | None = None) -> Any:
    """Request bytes -> :class:`~recipe.api.prepared.PreparedRequest` (API detected when ``auto``;
    ``model`` overrides the body's).

    Raises:
        Rejected: the request is invalid (carries the API's error body).
    """
    from recipe.api.errors import error_body
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
        raise Rejected(error_body(api if api != "auto" else "chat", err), f"recipe: request rejected ({err.stage}): {err}") from None


def load_prompt_ids(path: str) -> tuple[str, list[int], list[tuple[int, int, int]]]:
    """Request file -> (model, prompt token ids, message boundaries) for the cache commands.

    Raises:
        Failure / Usage: the file cannot be read; RequestError: the request is invalid.
    """
    from recipe.pipeline import prepare
    from recipe.prompt import message_token_spans

    raw = read_input(path, None)
    prep = prepare(raw)
    return prep.model, prep.token_ids, message_token_spans(load_tokenizer(), prep.prompt)
