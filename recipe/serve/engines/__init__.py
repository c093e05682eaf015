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
:data:`.http.GrammarForm`; default ``structural_tag``). A Python callable is an engine too
(:mod:`.inprocess`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from recipe.serve.config import Timeouts
from recipe.serve.engines.base import Engine, EngineDelta, EngineError, EngineRequest

__all__ = ["Engine", "EngineDelta", "EngineError", "EngineRequest", "engine_from_spec", "as_engine"]


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
        unknown = sorted(set(query) - {"model", "name", "grammar"})
        if unknown:
            raise ValueError(f"engine {spec!r}: unknown parameter {unknown[0]!r} (want model, name, grammar)")
        grammar = query.get("grammar", "structural_tag")
        if grammar not in ("structural_tag", "lark"):
            raise ValueError(f"engine {spec!r}: grammar={grammar!r}, want structural_tag or lark")
        if scheme == "generate":
            from recipe.serve.engines.generate import GenerateEngine

            return GenerateEngine(base, timeouts=timeouts, name=name, model=query.get("model"), grammar=grammar)
        if scheme == "vllm":
            from recipe.serve.engines.vllm import VLLMEngine

            return VLLMEngine(base, timeouts=timeouts, name=name, model=query.get("model"), grammar=grammar)
        from recipe.serve.engines.sglang import SGLangEngine

        return SGLangEngine(base, timeouts=timeouts, name=name, model=query.get("model"), grammar=grammar)
    raise ValueError(f"unknown engine {spec!r}: use demo, replay:FILE, vllm+http://HOST:PORT, sglang+http://HOST:PORT or "
                     "generate+http://HOST:PORT")


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
