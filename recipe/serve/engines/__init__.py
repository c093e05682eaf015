"""Engines: the contract (:mod:`.base`) and its implementations, chosen by a spec string.

=========================  ====================================================================
``demo``                   the built-in demo (:mod:`.demo`), the default
``replay:FILE``            scripted outputs from a JSONL file (:mod:`.replay`)
``vllm+http://HOST:PORT``  vLLM ``/v1/completions`` with token ids (:mod:`.vllm`)
``sglang+http://HOST:PORT`` SGLang ``/generate`` with ``input_ids`` (:mod:`.sglang`)
``generate+http://HOST:PORT`` the token-in/token-out ``/inference/v1/generate`` (:mod:`.generate`):
                           vLLM with ``--enable-scale-out`` or ``--tokens-only``, engines behind
                           llm-d or Dynamo that speak it
=========================  ====================================================================

An HTTP spec may end in ``?model=NAME`` (the served model name to send), ``&name=REPLICA`` and
``&grammar=structural_tag|lark`` (how the turn grammar is sent, per the engine's grammar backend:
:data:`.http.GrammarForm`; default ``structural_tag``); an SGLang spec also ``&bootstrap_port=N``
(its P/D bootstrap port). A ``vllm+`` or ``generate+`` spec may name the engine's KV-event publisher
(``--kv-events-config``) so routing reads its cache exactly (:mod:`recipe.serve.kv_events`):
``kv_events=tcp://HOST:PORT`` (its ``endpoint``), ``kv_replay=tcp://HOST:PORT`` (its
``replay_endpoint``), ``kv_topic=`` (its ``topic``) and ``kv_hash_seed=`` (the engine's
``PYTHONHASHSEED``; default vLLM's own ``vllm-none-hash``) and, for an engine running data-parallel
ranks, ``dp_size=N`` (its ``--data-parallel-size``: rank r publishes on the ports plus r, and each
request is sent to the rank holding its prefix); the engine must hash with
``--prefix-caching-hash-algo sha256_cbor``. A Python callable is an engine too (:mod:`.inprocess`).

P/D disaggregation (:mod:`.disagg`): specs tagged ``prefill=SPEC`` and ``decode=SPEC`` (all ``vllm+``,
all ``generate+`` or all ``sglang+``) make one engine that prefills each request on a prefill replica and decodes it on a
decode replica (:func:`build_engines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from recipe.serve.config import Timeouts
from recipe.serve.engines.base import Engine, EngineDelta, EngineError, EngineRequest

__all__ = ["Engine", "EngineDelta", "EngineError", "EngineRequest", "engine_from_spec", "as_engine", "build_engines"]


def engine_from_spec(spec: str, timeouts: Timeouts = Timeouts()) -> Engine:
    """The engine a spec string names (see the module docstring).

    Raises:
        ValueError: an unknown scheme, a bad URL or an unreadable replay file.
    """
    if spec == "demo":
        from recipe.serve.engines.demo import DemoEngine

        return DemoEngine()
    if spec.startswith("replay:"):
        from recipe.serve.engines.replay import ReplayEngine

        path = spec[len("replay:"):]
        if not path:
            raise ValueError("replay: needs a file, replay:FILE")
        return ReplayEngine.from_file(path)
    scheme, _, rest = spec.partition("+")
    if scheme in ("vllm", "sglang", "generate") and rest.startswith(("http://", "https://")):
        parts = urlsplit(rest)
        if not parts.hostname:
            raise ValueError(f"engine {spec!r}: no host")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        name = query.get("name") or f"{scheme}:{parts.netloc}{parts.path}"
        allowed = {"model", "name", "grammar", *(_KV_PARAMS if scheme in ("vllm", "generate") else ()),
                   *(("bootstrap_port",) if scheme == "sglang" else ())}
        unknown = sorted(set(query) - allowed)
        if unknown:
            raise ValueError(f"engine {spec!r}: unknown parameter {unknown[0]!r} (want {', '.join(sorted(allowed))})")
        events = _kv_source(spec, query)
        grammar = query.get("grammar", "structural_tag")
        if grammar not in ("structural_tag", "lark"):
            raise ValueError(f"engine {spec!r}: grammar={grammar!r}, want structural_tag or lark")
        if scheme == "generate":
            from recipe.serve.engines.generate import GenerateEngine

            engine = GenerateEngine(base, timeouts=timeouts, name=name, model=query.get("model"), grammar=grammar)
            engine.kv_events = events
            return engine
        if scheme == "vllm":
            from recipe.serve.engines.vllm import VLLMEngine

            engine = VLLMEngine(base, timeouts=timeouts, name=name, model=query.get("model"), grammar=grammar)
            engine.kv_events = events
            return engine
        from recipe.serve.engines.sglang import SGLangEngine

        sglang = SGLangEngine(base, timeouts=timeouts, name=name, model=query.get("model"), grammar=grammar)
        if "bootstrap_port" in query:
            port = query["bootstrap_port"]
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"engine {spec!r}: bootstrap_port={port!r}, want a port number")
            sglang.bootstrap_port = int(port)
        return sglang
    raise ValueError(f"unknown engine {spec!r}: use demo, replay:FILE, vllm+http://HOST:PORT, sglang+http://HOST:PORT or "
                     "generate+http://HOST:PORT")


#: The KV-event parameters of a ``vllm+`` / ``generate+`` spec.
_KV_PARAMS = ("kv_events", "kv_replay", "kv_topic", "kv_hash_seed", "dp_size")


def _kv_source(spec: str, query: dict[str, str]) -> Any:
    """The :class:`~recipe.serve.kv_events.KVEventsSource` a spec's ``kv_*`` parameters name, or None.

    Raises:
        ValueError: ``kv_replay`` / ``kv_topic`` / ``kv_hash_seed`` / ``dp_size`` without ``kv_events``, a
            bad endpoint, or a ``dp_size`` that is not a number from 1 to 1024.
    """
    if "kv_events" not in query:
        extra = [k for k in _KV_PARAMS if k in query]
        if extra:
            raise ValueError(f"engine {spec!r}: {extra[0]} needs kv_events=tcp://HOST:PORT")
        return None
    from recipe.serve.kv_events import DEFAULT_HASH_SEED, KVEventsSource

    ranks = query.get("dp_size", "1")
    if not ranks.isdigit() or not 1 <= int(ranks) <= 1024:
        raise ValueError(f"engine {spec!r}: dp_size={ranks!r}, want the engine's --data-parallel-size (1 to 1024)")
    try:
        return KVEventsSource(query["kv_events"], query.get("kv_replay"), query.get("kv_topic", ""),
                              query.get("kv_hash_seed", DEFAULT_HASH_SEED), int(ranks))
    except ValueError as exc:
        raise ValueError(f"engine {spec!r}: {exc}") from None


def as_engine(value: Any, timeouts: Timeouts = Timeouts()) -> Engine:
    """``value`` as an engine: None → the demo, a spec string, an engine, or a callable.

    Raises:
        ValueError: a bad spec. TypeError: something else.
    """
    if value is None:
        return engine_from_spec("demo", timeouts)
    if isinstance(value, str):
        return engine_from_spec(value, timeouts)
    if hasattr(value, "generate") and hasattr(value, "aclose"):
        return value
    if callable(value):
        from recipe.serve.engines.inprocess import CallableEngine

        return CallableEngine(value)
    raise TypeError(f"not an engine: {type(value).__name__}")


def _role(spec: Any) -> tuple[str | None, Any]:
    """``prefill=SPEC`` -> ("prefill", SPEC); anything else -> (None, spec)."""
    if isinstance(spec, str):
        role, sep, rest = spec.partition("=")
        if sep and role in ("prefill", "decode") and "://" not in role:
            return role, rest
    return None, spec


def build_engines(specs: Sequence[Any], timeouts: Timeouts = Timeouts(), *, index: Any = None,
                  weights: Any = None, block_size: int | None = None, metrics_interval: float = 2.0) -> list[Engine]:
    """The engines ``specs`` name (:func:`as_engine` each); specs tagged ``prefill=`` / ``decode=``
    become one :class:`~recipe.serve.engines.disagg.DisaggregatedEngine` (its prefill choice reads
    ``index`` with ``weights`` and ``block_size``; its replicas' ``/metrics`` are scraped every
    ``metrics_interval`` seconds).

    Raises:
        ValueError: a bad spec; role-tagged and untagged specs mixed; a P/D pool without a prefill or
            a decode replica, over engines other than one kind of vLLM / generate / SGLang HTTP ones, or
            with a decode spec naming a KV-event publisher (the decode choice is by load: its events
            would never be read; a prefill replica's are followed).
    """
    tagged = [_role(s) for s in specs]
    if not any(role for role, _ in tagged):
        return [as_engine(s, timeouts) for s in specs]
    if not all(role for role, _ in tagged):
        raise ValueError("P/D: either every --engine is prefill=SPEC or decode=SPEC, or none is")
    from recipe.serve.engines.disagg import DisaggregatedEngine
    from recipe.serve.engines.http import HTTPEngine

    by_role: dict[str, list[HTTPEngine]] = {"prefill": [], "decode": []}
    for role, spec in tagged:
        built = engine_from_spec(spec, timeouts)
        if not isinstance(built, HTTPEngine):
            raise ValueError(f"P/D: {spec!r} is not a vllm+http://, generate+http:// or sglang+http:// engine")
        if role == "decode" and getattr(built, "kv_events", None) is not None:  # accepted, then never read
            raise ValueError(f"P/D: {spec!r}: a decode replica's KV events are not followed (the decode replica is "
                             "chosen by load; the KV cache comes from the prefill replica): drop kv_events= and the "
                             "other kv_ parameters, or name them on a prefill= spec")
        by_role[role].append(built)  # type: ignore[index]
    extra: dict[str, Any] = {}
    if weights is not None:
        extra["weights"] = weights
    if block_size is not None:
        extra["block_size"] = block_size
    return [DisaggregatedEngine(by_role["prefill"], by_role["decode"], index=index, metrics_interval=metrics_interval,
                                **extra)]
