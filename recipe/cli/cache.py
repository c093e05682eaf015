"""``recipe cache keys|diff|simulate``: prefix-cache keys, prefix stability and hit-rate replay.

:func:`register` adds the commands to the main parser. Input files are request files converted by
the ``load_prompt_ids`` callback, or JSON objects ``{"model": ..., "token_ids": [...]}`` (optional
``"boundaries": [[message index, start, end], ...]``, ``"tokenizer"``: fingerprint) read directly.
``--tokenizer PATH`` (before or after the subcommand) picks the vocabulary for request files and
the native keys' fingerprint. The key schemes load on first use (not when the command line is
parsed). Exit status: 0 ok, 1 bad input file or a rejected request (the API's error JSON on
standard output, the reason on standard error, as every command), 2 usage.
"""

from __future__ import annotations

import argparse
import math
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recipe.cli.common import Rejected, print_rejection

if TYPE_CHECKING:
    from recipe.cache.index import TraceRequest
    from recipe.cache.keys import KeySpec

__all__ = ["register", "LoadPromptIds"]

#: ``path -> (model, token ids, [(message index, start, end), ...])``; raises on a bad file. Called
#: as ``load(path)``, or ``load(path, tokenizer=PATH)`` when ``--tokenizer`` was given.
LoadPromptIds = Callable[..., "tuple[str, list[int], list]"]

#: ``--block-size`` default; equals :data:`recipe.cache.keys.DEFAULT_BLOCK_SIZE` (a test checks),
#: spelled here so that parsing the command line does not load the key schemes.
DEFAULT_BLOCK_SIZE = 64


class _Schemes:
    """``--scheme`` choices, read from :data:`recipe.cache.keys.SCHEMES` when argparse asks."""

    def _names(self) -> tuple[str, ...]:
        from recipe.cache.keys import SCHEMES

        return tuple(SCHEMES)

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


class _BadInput(Exception):
    """An input file that cannot be used (exit status 1)."""


def _ids_object(obj: Any, where: str) -> dict[str, Any] | None:
    """``obj`` if it is a direct ``{"token_ids": [...]}`` object, None if it is something else."""
    if not isinstance(obj, dict) or "token_ids" not in obj:
        return None
    ids = obj["token_ids"]
    if not isinstance(ids, list) or not all(type(i) is int and i >= 0 for i in ids):
        raise _BadInput(f"{where}: token_ids must be a list of non-negative ints")
    if not isinstance(obj.get("model", ""), str):
        raise _BadInput(f"{where}: model must be a string")
    return obj


def _load(path: str, load_prompt_ids: LoadPromptIds | None, tokenizer: str | None = None) -> tuple[str, list[int], list, str | None]:
    """(model, ids, boundaries, tokenizer fingerprint or None) of an input file."""
    try:
        obj = json.loads(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        if load_prompt_ids is None:
            raise _BadInput(f"{path}: {exc}") from None
        obj = None
    direct = _ids_object(obj, path)
    if direct is not None:
        return direct.get("model", ""), direct["token_ids"], direct.get("boundaries") or [], direct.get("tokenizer")
    if load_prompt_ids is None:
        raise _BadInput(f"{path}: not a {{\"token_ids\": [...]}} object")
    try:
        model, ids, boundaries = load_prompt_ids(path) if tokenizer is None else load_prompt_ids(path, tokenizer=tokenizer)
    except Rejected as rej:  # a request the API refuses: reported as every command reports one
        raise Rejected(rej.body, f"{rej.line} [{path}]") from None
    except Exception as exc:  # the callback's own errors: a bad request file
        raise _BadInput(f"{path}: {exc}") from None
    return model, list(ids), list(boundaries or []), None


def _tokenizer_path(ns: argparse.Namespace) -> str | None:
    return getattr(ns, "tokenizer", None)


def _fingerprint(given: str | None, ns: argparse.Namespace, model: str = "") -> str:
    """The vocabulary fingerprint in the keys: the input's own, else ``--tokenizer``'s, else that of
    ``model``'s family (V3 … V3.2 models and V4 models get different keys)."""
    if given is not None:
        return given
    from recipe.cli.common import family_tokenizer
    from recipe.tokenizer import TokenizerError, load_tokenizer

    path = _tokenizer_path(ns)
    try:
        return load_tokenizer(path).fingerprint if path is not None else family_tokenizer(model).fingerprint
    except TokenizerError as exc:
        raise _BadInput(str(exc)) from None


def _spec(ns: argparse.Namespace, model: str, tokenizer: str | None) -> KeySpec:
    from recipe.cache.keys import KeySpec

    if ns.scheme == "vllm" and ns.hash_seed is None:
        raise _Usage("--scheme vllm needs --hash-seed: the engine's PYTHONHASHSEED (vLLM 0.32 started without "
                     "one roots its hashes in the seed vllm-none-hash)")
    if ns.tagged_extras and ns.scheme != "vllm":
        raise _Usage("--tagged-extras is for --scheme vllm")
    if ns.block_size < 1:
        raise _Usage("--block-size must be >= 1")
    native = ns.scheme != "vllm"
    return KeySpec(ns.scheme, ns.block_size, model if native else "", _fingerprint(tokenizer, ns, model) if native else "",
                   ns.salt, ns.hash_seed, tagged_extras=ns.tagged_extras)


class _Usage(Exception):
    """A usage error found after parsing (exit status 2)."""


def _cmd_keys(ns: argparse.Namespace, load: LoadPromptIds | None) -> int:
    from recipe.cache.keys import block_keys

    model, ids, _, tok = _load(ns.file, load, _tokenizer_path(ns))
    spec = _spec(ns, model, tok)
    ks = block_keys(ids, spec)
    if ns.json:
        print(json.dumps({**ks.to_json(), "model": model, "num_tokens": len(ids)}))
    else:
        print(f"{ks.scheme}  block_size={ks.block_size}  tokens={len(ids)}  full blocks={len(ks.keys)}")
        for i, k in enumerate(ks.hex()):
            print(f"{i:6d}  {k}")
    return 0


def _cmd_diff(ns: argparse.Namespace, load: LoadPromptIds | None) -> int:
    from recipe.cache.diff import first_divergence

    if ns.block_size < 1:
        raise _Usage("--block-size must be >= 1")
    model, a, _, _ = _load(ns.a, load, _tokenizer_path(ns))
    _, b, boundaries, _ = _load(ns.b, load, _tokenizer_path(ns))
    try:
        d = first_divergence(a, b, boundaries)
    except ValueError as exc:
        raise _BadInput(f"{ns.b}: {exc}") from None
    report = {
        "shared_tokens": d.shared, "len_a": d.len_a, "len_b": d.len_b, "extends": d.extends,
        "shared_blocks": d.shared_blocks(ns.block_size), "block_size": ns.block_size,
        "token_a": d.token_a, "token_b": d.token_b, "message_index": d.message_index,
    }
    if not d.extends:
        report.update(_texts_at_break(a, b, d.shared, model, _tokenizer_path(ns)))
    if ns.json:
        print(json.dumps(report))
    elif d.extends:
        print(f"B extends A: all {d.len_a} tokens shared ({report['shared_blocks']} blocks of {ns.block_size})")
    else:
        where = "" if d.message_index is None else f" in message {d.message_index}"
        print(f"shared prefix: {d.shared} tokens ({report['shared_blocks']} blocks of {ns.block_size}); "
              f"breaks at token {d.shared}{where}: A has {d.token_a}, B has {d.token_b}")
        if "text_a" in report:
            print(f"  before: …{report['text_before']!r}")
            print(f"  A then: {report['text_a']!r}…")
            print(f"  B then: {report['text_b']!r}…")
    return 0


#: tokens of text shown on each side of the break by ``cache diff``
_DIFF_WINDOW = 12


def _texts_at_break(a: list[int], b: list[int], at: int, model: str, tokenizer: str | None) -> dict[str, str]:
    """The text of the shared tokens just before the break and of each side's tokens from it (a
    window of :data:`_DIFF_WINDOW` ids, decoded with the model family's vocabulary or ``--tokenizer``;
    special tokens spelled out); empty when the ids are not all in that vocabulary."""
    from recipe.cli.common import Failure, tokenizer_from

    try:
        tok = tokenizer_from(tokenizer, model or None)
        return {"text_before": tok.decode(a[max(0, at - _DIFF_WINDOW):at]),
                "text_a": tok.decode(a[at:at + _DIFF_WINDOW]), "text_b": tok.decode(b[at:at + _DIFF_WINDOW])}
    except (Failure, KeyError, ValueError):
        return {}


def _trace(path: str, load: LoadPromptIds | None, tokenizer: str | None = None) -> Iterator[TraceRequest]:
    from recipe.cache.index import TraceRequest
    from recipe.jsonfmt import jsonl_values

    try:
        values = jsonl_values(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise _BadInput(f"{path}: {exc}") from None
    for n, obj in values:  # (a line that is not JSON: a ValueError naming it)
        where = f"{path}:{n}"
        if not isinstance(obj, dict):
            raise _BadInput(f"{where}: each line must be a JSON object")
        if isinstance(obj.get("file"), str):  # a request file, relative to the trace
            model, ids, _, _ = _load(str(Path(path).parent / obj["file"]), load, tokenizer)
        elif _ids_object(obj, where) is not None:
            model, ids = obj.get("model", ""), obj["token_ids"]
        else:
            raise _BadInput(f"{where}: want \"token_ids\" or \"file\"")
        salt, t = obj.get("salt"), obj.get("time")
        if salt is not None and not isinstance(salt, str) or t is not None and not isinstance(t, (int, float)):
            raise _BadInput(f"{where}: salt must be a string and time a number")
        yield TraceRequest(ids, model, salt, t)


def _cmd_simulate(ns: argparse.Namespace, load: LoadPromptIds | None) -> int:
    from recipe.cache.index import simulate

    if ns.max_entries < 1 or ns.ttl is not None and ns.ttl <= 0:
        raise _Usage("--max-entries must be >= 1 and --ttl > 0")
    spec = _spec(ns, "", "")
    report = simulate(_trace(ns.trace, load, _tokenizer_path(ns)), spec, hit_price=ns.hit_price, miss_price=ns.miss_price,
                      max_entries=ns.max_entries, ttl=ns.ttl)
    out = report.to_json()
    if ns.json:
        print(json.dumps(out))
    else:
        print(f"requests {report.requests}  prompt tokens {report.prompt_tokens}  hit {report.hit_tokens}  "
              f"miss {report.miss_tokens}  hit rate {report.hit_rate:.1%}")
        print(f"cost ${report.cost:.6f} (without cache ${report.cost_without_cache:.6f}; "
              f"hit ${ns.hit_price}/M, miss ${ns.miss_price}/M)")
    return 0


def _key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheme", choices=_Schemes(), default="native", metavar="SCHEME",
                   help="cache-key scheme: %(choices)s (default %(default)s; docs/cache-keys.md)")
    p.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
                   help="tokens per cache block (default %(default)s; the engine's block size)")
    p.add_argument("--hash-seed", metavar="S",
                   help="vllm: the engine's PYTHONHASHSEED (vLLM 0.32 started without one: vllm-none-hash)")
    p.add_argument("--salt", metavar="S", help="tenant salt (native root / vLLM cache_salt)")
    p.add_argument("--tagged-extras", action="store_true",
                   help="vllm: hash the extra keys (the --salt) tagged with their source, as vLLM 0.32 does; "
                        "without a salt the keys are the same either way")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _tokenizer_option(p)


def _tokenizer_option(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: a value given before the subcommand (the main parser's option) is kept
    p.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS,
                   help="tokenizer.json for request files and the native fingerprint (default: the model "
                        "family's embedded vocabulary); also accepted before the command")


def _finite(text: str) -> float:
    """argparse type: a finite number (prices and TTLs; NaN or infinity would poison the report)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _runner(cmd: Callable[[argparse.Namespace, LoadPromptIds | None], int], load: LoadPromptIds | None):
    def run(ns: argparse.Namespace) -> int:
        try:
            return cmd(ns, load)
        except Rejected as rej:
            return print_rejection(rej)
        except (_BadInput, ValueError) as exc:  # ValueError: ids or sizes the key schemes refuse
            print(f"recipe cache: {exc}", file=sys.stderr)
            return 1
        except _Usage as exc:
            print(f"recipe cache: {exc}", file=sys.stderr)
            return 2

    return run


def register(subparsers: argparse._SubParsersAction, load_prompt_ids: LoadPromptIds | None = None) -> None:
    """Add ``cache keys``, ``cache diff`` and ``cache simulate`` to ``subparsers``.

    ``load_prompt_ids(path) -> (model, token_ids, boundaries)`` converts request files; JSON files
    holding ``token_ids`` are read directly. Each command's ``run(namespace)`` returns the exit status.
    """
    cache = subparsers.add_parser("cache", help="prefix-cache keys, prefix stability, hit-rate simulation")
    cache.set_defaults(run=lambda ns: (cache.print_help(sys.stderr), 2)[1])
    sub = cache.add_subparsers(dest="cache_command", metavar="CACHE_COMMAND")

    k = sub.add_parser("keys", help="block keys of a prompt")
    k.add_argument("file", metavar="FILE", help="a request JSON, or a JSON object with token_ids")
    _key_options(k)
    k.set_defaults(run=_runner(_cmd_keys, load_prompt_ids))

    d = sub.add_parser("diff", help="shared prefix of two prompts and where it breaks")
    d.add_argument("a", metavar="A", help="the earlier request (JSON file, or an object with token_ids)")
    d.add_argument("b", metavar="B", help="the next request of the conversation")
    d.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
                   help="tokens per cache block (default %(default)s)")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    _tokenizer_option(d)
    d.set_defaults(run=_runner(_cmd_diff, load_prompt_ids))

    s = sub.add_parser("simulate", help="replay a JSONL trace through an in-memory prefix index")
    s.add_argument("trace", metavar="TRACE.jsonl",
                   help="one request per line: {\"file\": REQUEST.json} or {\"token_ids\": [...]}, with optional "
                        "model, salt, time (docs/cache-keys.md)")
    _key_options(s)
    s.add_argument("--hit-price", type=_finite, default=0.14, metavar="USD", help="per million cached tokens")
    s.add_argument("--miss-price", type=_finite, default=0.55, metavar="USD", help="per million uncached tokens")
    s.add_argument("--max-entries", type=int, default=1_000_000, metavar="N",
                   help="blocks the simulated cache holds (default %(default)s; least recently used go first)")
    s.add_argument("--ttl", type=_finite, default=3 * 86400, metavar="SECONDS",
                   help="how long a block stays cached (default %(default)s: three days)")
    s.set_defaults(run=_runner(_cmd_simulate, load_prompt_ids))
