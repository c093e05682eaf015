"""What the ``recipe`` subcommands share: exit-status exceptions, reading inputs, printing JSON and
rejections, preparing a request file.

Exit status contract (docs in :mod:`recipe.cli.main`): :class:`Usage` → 2, :class:`Failure` and
:class:`Rejected` → 1. Text inputs (``tokenize -``, ``complete --text``) must be UTF-8: invalid
bytes are refused with their offset, never replaced (a request file is checked by the JSON parser
with the same rule).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recipe.errors import RequestError
from recipe.jsonfmt import dumps_wire, loads_request, utf8_error
from recipe.tokenizer import Tokenizer, TokenizerError, load_tokenizer

__all__ = ["API_HELP", "TOKENIZER_HELP", "EXAMPLES", "Usage", "Failure", "Rejected", "read_input", "read_text", "tokenizer_from", "family_tokenizer", "dump",
           "print_rejection", "prepare_request", "load_prompt_ids", "ambiguous_chat"]

#: Names of the shipped example requests (``recipe/examples/NAME.json``).
EXAMPLES = ("weather", "hello")
#: ``--api`` and ``--tokenizer`` help, the same for every command that takes them
API_HELP = ("which API the body is: auto (default: detected from its fields; README, --api auto), "
            "chat, responses or messages")
TOKENIZER_HELP = ("tokenizer.json to use (default: the model family's embedded vocabulary: DeepSeek-V4's, or "
                  "DeepSeek-V3's for V3 … V3.2); also accepted before the command")
#: Where they are (package data, read as files like the embedded V3 vocabulary in ``recipe/data``).
EXAMPLES_DIR = Path(__file__).parent.parent / "examples"


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
        return (EXAMPLES_DIR / f"{example}.json").read_bytes()
    if arg is None:
        raise Usage("give a request FILE, - for standard input, or --example NAME")
    if arg == "-":
        return sys.stdin.buffer.read()
    try:
        with open(arg, "rb") as f:
            return f.read()
    except OSError as exc:
        raise Failure(f"cannot read {arg}: {exc.strerror}") from None


def read_text(arg: str) -> str:
    """The text of a file or of standard input (``-``), which must be UTF-8.

    Raises:
        Failure: unreadable, or not UTF-8 (the message names the first invalid byte and its offset).
    """
    data = read_input(arg, None)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = "standard input" if arg == "-" else arg
        raise Failure(f"{where}: {utf8_error(exc)}") from None


def tokenizer_from(path: str | None, model: str | None = None) -> Tokenizer:
    """The vocabulary at ``path`` (a ``tokenizer.json``); else the default vocabulary of ``model``'s
    family (the V3 one for DeepSeek-V3 … V3.2), else the embedded DeepSeek-V4 default.

    Raises:
        Failure: the file is missing or not a usable vocabulary.
    """
    try:
        if path is None and model is not None:
            return family_tokenizer(model)
        return load_tokenizer(path)
    except TokenizerError as exc:
        raise Failure(str(exc)) from None


def family_tokenizer(model: str) -> Tokenizer:
    """The default vocabulary of ``model``'s family in the default model table (V4's for unknown names)."""
    from recipe.encodings.table import MODELS, get_encoding

    encoding = MODELS.get(model)
    return get_encoding(encoding).tokenizer() if encoding is not None else load_tokenizer()


def dump(obj: Any) -> None:
    """Print ``obj`` as indented wire JSON (one object, newline-terminated) on standard output."""
    sys.stdout.buffer.write(dumps_wire(obj, indent=True) + b"\n")
    sys.stdout.flush()


def print_rejection(rej: Rejected, body: bool = True) -> int:
    """Report a rejected request the one way every command does: the API's error body as indented
    JSON on standard output (when ``body``), the one-line reason on standard error. Returns 1."""
    if body:
        dump(rej.body)
    print(rej.line, file=sys.stderr)
    return 1


#: Top-level fields only a Chat Completions body has (a body with none of them, and no other Chat
#: sign, is also a valid Anthropic Messages body).
_CHAT_ONLY_KEYS = frozenset(
    "response_format max_completion_tokens n logprobs top_logprobs stream_options frequency_penalty "
    "presence_penalty seed parallel_tool_calls reasoning_effort logit_bias user modalities prediction audio "
    "store web_search_options functions function_call stop prompt_cache_key safety_identifier verbosity".split()
)
_CHAT_ONLY_MESSAGE_KEYS = frozenset({"tool_calls", "tool_call_id", "name", "reasoning_content", "prefix", "refusal"})
_CHAT_ONLY_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})


def ambiguous_chat(body: Mapping[str, Any]) -> bool:
    """True when a body that API detection read as Chat Completions carries no sign of Chat only —
    e.g. ``{"model", "messages": [{"role": "user", "content": "Hi"}]}`` is valid Anthropic Messages
    too — so the CLI says which API it assumed."""
    if any(k in body for k in _CHAT_ONLY_KEYS) or body.get("tools") or isinstance(body.get("tool_choice"), str):
        return False
    for m in body.get("messages") or ():
        if not isinstance(m, Mapping) or m.get("role") not in ("user", "assistant") or _CHAT_ONLY_MESSAGE_KEYS & m.keys():
            return False
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") in _CHAT_ONLY_PARTS for p in content):
            return False
    return True


def prepare_request(raw: bytes, api: str, tokenizer: Tokenizer | None, model: str | None = None) -> Any:
    """Request bytes -> :class:`~recipe.api.prepared.PreparedRequest` (API detected when ``auto``;
    ``model`` overrides the body's; ``tokenizer`` None: the model family's vocabulary). When detection had to guess (a body valid as Chat and as
    Messages, see :func:`ambiguous_chat`), one line on standard error says which API was assumed.

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
            if api == "chat" and ambiguous_chat(body):
                print("recipe: read as a Chat Completions request (--api auto); its shape fits the Messages API "
                      "too: pass --api messages to read it as one", file=sys.stderr)
        if model:
            body = {**body, "model": model}
        return prepare(body, api, tokenizer=tokenizer)
    except RequestError as err:
        raise Rejected(error_body(api if api != "auto" else "chat", err), f"recipe: request rejected ({err.stage}): {err}") from None


def load_prompt_ids(path: str, tokenizer: str | None = None) -> tuple[str, list[int], list[tuple[int, int, int]]]:
    """Request file -> (model, prompt token ids, message boundaries) for the cache commands, on the
    vocabulary at ``tokenizer`` (default: the model family's).

    Raises:
        Failure / Usage: the file cannot be read; Rejected: the request is invalid (the API's error body).
    """
    from recipe.prompt import message_token_spans

    tok = tokenizer_from(tokenizer) if tokenizer is not None else None
    prep = prepare_request(read_input(path, None), "auto", tok)
    tok = tok if tok is not None else family_tokenizer(prep.model)
    return prep.model, prep.token_ids, message_token_spans(tok, prep.prompt)
