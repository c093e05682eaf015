"""``recipe complete``: what the API would answer for a given model output.

    recipe complete --request FILE (--text FILE | --ids FILE) [--finish stop|length|content_filter]
                    [--prompt-tokens N] [--cached-tokens N] [--stream] [--api auto|chat|…] [--seed N]
                    [--id ID] [--created N] [--fingerprint FP] [--check]

``--ids`` is a JSON list of completion token ids; ``--text`` is the completion as text, special tokens
spelled out (``</think>``, ``<｜end▁of▁sentence｜>``), tokenized with specials recognised. ``-`` reads
standard input. Prints the non-streamed response JSON, or with ``--stream`` the SSE byte stream the
server would send (one token id per push). ``--check`` also checks the output against the request's
output grammar (``recipe.check_output``; needs the ``constrain`` extra): the response is printed
either way, a failed check adds a one-line reason on stderr and exit status 1. Exit status: 0 ok; 1
a rejected request (the API's error JSON on stdout, a one-line reason on stderr), unreadable input
or output outside the grammar; 2 usage errors; 3 ``--check`` could not check (llguidance is not
installed, the model family has no output grammar, or the request's grammar does not compile).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from recipe.cli.common import API_HELP, TOKENIZER_HELP, Failure, Rejected, Usage, prepare_request, print_rejection, read_input, read_text, tokenizer_from

__all__ = ["register"]

FINISH_CHOICES = ("stop", "length", "content_filter")


def _ids(raw: bytes, where: str, n_vocab: int) -> list[int]:
    try:
        ids = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Failure(f"{where}: not JSON ({exc})") from None
    if not isinstance(ids, list):
        raise Failure(f"{where}: expected a JSON list of token ids in 0..{n_vocab - 1}")
    for k, i in enumerate(ids):
        if type(i) is not int or not 0 <= i < n_vocab:
            raise Failure(f"{where}: item {k}: token id {i!r} is outside the vocabulary ({n_vocab} ids: 0..{n_vocab - 1})")
    return ids


def _nonneg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {n}")
    return n


def _model_of(raw: bytes) -> str | None:
    """The request's ``model`` if the body is a JSON object naming one (no validation yet)."""
    from recipe.jsonfmt import loads_request

    try:
        body = loads_request(raw)
    except Exception:  # noqa: BLE001 - an invalid body is reported by prepare_request later
        return None
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


def _cmd_complete(ns: argparse.Namespace) -> int:
    from recipe.jsonfmt import dumps_wire
    from recipe.output.driver import ENCODERS, CompletionStream, response

    path = getattr(ns, "tokenizer", None)
    if ns.request == "-" and "-" in (ns.ids, ns.text):
        raise Usage("standard input can feed only one of --request and --text/--ids")
    raw = read_input(ns.request, None)
    tok = tokenizer_from(path, _model_of(raw))  # the model family's vocabulary unless --tokenizer
    if ns.ids is not None:
        ids = _ids(read_input(ns.ids, None), ns.ids, tok.n_vocab)
    else:
        ids = tok.encode_with_special_tokens(read_text(ns.text))
    try:
        prep = prepare_request(raw, ns.api, tok if path else None)
    except Rejected as rej:
        return print_rejection(rej)
    if prep.api not in ENCODERS:
        raise Failure(f"no output encoder for the {prep.api} API yet")
    if ns.prompt_tokens is None and prep.ids is None:  # DeepSeek-V4.1 without its vocabulary: no prompt length
        raise Failure(f"{prep.token_ids_note}; or give --prompt-tokens N for the usage counts")
    prompt = len(prep.token_ids) if ns.prompt_tokens is None else ns.prompt_tokens
    if ns.cached_tokens > prompt:
        raise Usage(f"--cached-tokens ({ns.cached_tokens}) exceeds the prompt tokens ({prompt})")
    kw: dict[str, Any] = dict(
        prompt_tokens=prompt,
        cached_tokens=ns.cached_tokens,
        response_id=ns.id,
        created=ns.created,
        seed=ns.seed,
        system_fingerprint=ns.fingerprint,
        tokenizer=tok,
    )
    out = sys.stdout.buffer
    if ns.stream:
        cs = CompletionStream(prep, **kw)
        out.write(cs.sse(cs.start()))
        for i in ids:
            if cs.finished:
                break
            data = cs.push_sse((i,))
            if data:
                out.write(data)
        out.write(cs.sse(cs.finish(ns.finish)))
    else:
        out.write(dumps_wire(response(prep, ids, finish=ns.finish, **kw), indent=True) + b"\n")
    out.flush()
    return _check(prep, ids, tok) if ns.check else 0


#: ``complete --check``'s exit status when the check cannot run (distinct from 1: outside the grammar)
CHECK_UNAVAILABLE = 3


def _check(prep: Any, ids: list[int], tok: Any) -> int:
    """``--check``: 0 when the output is inside the grammar, 1 (reason on stderr) when it is not,
    :data:`CHECK_UNAVAILABLE` when it cannot be checked."""
    from recipe.schema.constrain import check_output

    try:
        res = check_output(prep, ids, tokenizer=tok)
    except (ImportError, ValueError) as exc:  # no llguidance; a family without a grammar; a request value
        # the grammar cannot express (GrammarCompileError: an invalid regex or pattern)
        print(f"recipe: --check: {exc} (not checked)", file=sys.stderr)
        return CHECK_UNAVAILABLE
    if res.ok:
        print("recipe: output check: ok", file=sys.stderr)
        return 0
    where = f"token {res.index}: " if res.index is not None else ""
    print(f"recipe: output check failed at {where}{res.reason}", file=sys.stderr)
    return 1


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``complete`` command to the ``recipe`` command's subparsers; returns its parser."""
    c = subparsers.add_parser("complete", help="the API response (or SSE stream) for a model output")
    c.add_argument("--request", required=True, metavar="FILE", help="the request JSON (- for standard input)")
    src = c.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", metavar="FILE", help="the completion text, special tokens spelled out")
    src.add_argument("--ids", metavar="FILE", help="the completion token ids as a JSON list")
    c.add_argument("--finish", choices=FINISH_CHOICES, default="stop", help="the backend's finish reason")
    c.add_argument("--prompt-tokens", type=_nonneg, metavar="N", help="prompt tokens for usage (default: the prompt's length)")
    c.add_argument("--cached-tokens", type=_nonneg, default=0, metavar="N", help="prompt tokens served from cache")
    c.add_argument("--stream", action="store_true", help="print the SSE byte stream instead of the response JSON")
    c.add_argument("--api", choices=("auto", "chat", "responses", "messages"), default="auto", help=API_HELP)
    c.add_argument("--seed", type=int, metavar="N", help="reproducible response and tool-call ids")
    c.add_argument("--id", metavar="ID", help="the response id (default: generated)")
    c.add_argument("--created", type=_nonneg, metavar="N", help="Unix seconds for `created` (default: now)")
    c.add_argument("--fingerprint", metavar="FP", help="system_fingerprint to echo")
    c.add_argument("--check", action="store_true", help="also check the output against the request's output grammar")
    c.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS, help=TOKENIZER_HELP)
    c.set_defaults(run=_cmd_complete)
    return c
