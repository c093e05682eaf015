"""``recipe serve``: run the OpenAI- and Anthropic-compatible server (docs/serving.md).

Prints one line, ``recipe serve: listening on http://HOST:PORT``, once the socket is bound (``--port
0`` picks a free port), then serves until SIGINT / SIGTERM; in-flight streams are drained (up to
``--drain-seconds``; a second SIGINT cuts them at once, each with its API's shutdown error) before
the engines and the store are closed. Exit status (the ``recipe``
command's rule: unreadable input exits 1, usage errors exit 2): 0 after a clean shutdown; 1 for a
file a flag names that cannot be read or is not valid (``--api-keys``, ``replay:FILE``,
``--tokenizer``, ``--store sqlite:PATH``); 2 for a bad flag value (an unknown engine or store
scheme, a malformed URL, an alias, a number out of range, a flag whose extra is not installed) or a
port it cannot listen on. Either way
one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

__all__ = ["register", "build"]

#: ``--store-ttl``'s default (recipe.store.conversations.DEFAULT_TTL: 30 days).
DEFAULT_TTL_TEXT = "30d"


def _default_store() -> str:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return f"sqlite:{Path(state) / 'recipe' / 'responses.sqlite3'}"


def _seconds(text: str) -> float | None:
    """argparse type: seconds > 0, or 0 / ``off`` for no timeout."""
    if text in ("0", "off", "none"):
        return None
    value = float(text)
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: want seconds > 0, or 0 / off")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _ttl(text: str) -> float | None:
    """argparse type: a retention time — seconds, or a number with ``s`` / ``m`` / ``h`` / ``d``
    (``30d``); 0 / ``off`` / ``none``: kept until deleted."""
    if text in ("0", "off", "none"):
        return None
    unit = _UNITS.get(text[-1:], None)
    try:
        value = float(text[:-1] if unit else text) * (unit or 1)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: want a time > 0 (seconds, or 12h, 30d …), or 0 / off")
    return value


def _count_or_none(text: str) -> int | None:
    """argparse type: an integer >= 1, or 0 / ``none`` for no limit."""
    if text in ("0", "none", "off"):
        return None
    return _positive(text)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: want an integer >= 1")
    return value


def _port(text: str) -> int:
    """argparse type: a TCP port, 0 (a free one) to 65535."""
    value = int(text) if text.isdigit() else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: want a port from 0 (a free one) to 65535")
    return value


def _grace(text: str) -> float:
    """argparse type: seconds >= 0 (0: at once)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: want seconds >= 0")
    return value


def _schema_limit(text: str) -> tuple[str, int]:
    """argparse type: ``NAME=N``, one field of :class:`recipe.options.SchemaLimits` and a positive integer."""
    from dataclasses import fields

    from recipe.options import SchemaLimits

    name, sep, value = text.partition("=")
    names = [f.name for f in fields(SchemaLimits)]
    if not sep or name not in names:
        raise argparse.ArgumentTypeError(f"{text!r}: want NAME=N with NAME one of {', '.join(names)}")
    return name, _positive(value)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``serve`` to the ``recipe`` command."""
    p = subparsers.add_parser("serve", help="run the OpenAI / Anthropic compatible server over an engine")
    p.add_argument("--engine", action="append", metavar="SPEC",
                   help="demo (default), replay:FILE, vllm+http://HOST:PORT, sglang+http://HOST:PORT, "
                        "generate+http://HOST:PORT; repeat for a replica pool. P/D disaggregation: tag each "
                        "replica prefill=SPEC or decode=SPEC (all vllm+, all generate+ or all sglang+; an "
                        "SGLang prefill spec "
                        "may end in ?bootstrap_port=N, default 8998): each request is prefilled on the cheapest "
                        "prefill replica (uncached prompt tokens plus load) and decoded on the least loaded "
                        "decode replica, through vLLM's kv_transfer_params or SGLang's bootstrap fields "
                        "(docs/fleet.md). A vLLM spec (not a decode= one) may name its KV-event "
                        "publisher, ?kv_events=tcp://HOST:PORT[&kv_replay=tcp://HOST:PORT][&kv_topic=T]"
                        "[&kv_hash_seed=S][&dp_size=N], so routing reads its cache exactly (vLLM's --kv-events-config with "
                        "--prefix-caching-hash-algo sha256_cbor; needs dsrecipe[fleet]); other replicas are routed on "
                        "an estimate: the requests sent to them")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: every interface)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default 8000; 0 picks a free port)")
    p.add_argument("--api-keys", metavar="FILE", help="API keys -> tenants (default: open server)")
    p.add_argument("--store", metavar="URL", default=None,
                   help="conversation store: sqlite:PATH (default $XDG_STATE_HOME/recipe/responses.sqlite3, else "
                        "~/.local/state/recipe/responses.sqlite3), redis://HOST:PORT/DB, redis+cluster://HOST:PORT "
                        "(a Redis Cluster), or memory")
    p.add_argument("--store-ttl", type=_ttl, default=DEFAULT_TTL_TEXT, metavar="TIME",
                   help="how long stored responses are kept, from their creation: seconds or 12h, 30d … "
                        "(default 30d, as OpenAI keeps them); 0 or off: until deleted")
    p.add_argument("--index", metavar="URL", default="memory",
                   help="prefix index for routing: memory, or redis://… / redis+cluster://… to share it with the "
                        "fleet's other frontends")
    p.add_argument("--shared-load", metavar="URL", default=None,
                   help="share each replica's requests in flight with the fleet's other frontends through Redis "
                        "(redis://… or redis+cluster://…), so routing counts theirs too (default: this server's own)")
    p.add_argument("--shared-load-interval", type=float, default=0.1, metavar="S",
                   help="seconds between syncs of the shared in-flight counts (default 0.1)")
    p.add_argument("--shared-load-ttl", type=float, default=3.0, metavar="S",
                   help="seconds a frontend's shared counts outlive its last sync, so a frontend that dies "
                        "leaves none behind (default 3; more than the interval)")
    p.add_argument("--routing", choices=("cost", "prefix"), default="cost",
                   help="replica pool routing: cost (default: uncached prefill tokens plus load) or prefix "
                        "(the longest cached prefix)")
    p.add_argument("--metrics-interval", type=float, default=2.0, metavar="S",
                   help="seconds between scrapes of the engines' /metrics for their load (default 2; 0: off)")
    p.add_argument("--max-concurrency", type=_positive, metavar="N", help="requests in flight; more get 429 / 529")
    p.add_argument("--alias", action="append", default=[], metavar="NAME=TARGET[:thinking|:chat]",
                   help="another model name (repeatable)")
    p.add_argument("--max-body-bytes", type=_positive, metavar="N", help="request body limit (default 8 MiB)")
    p.add_argument("--schema-limit", action="append", default=[], type=_schema_limit, metavar="NAME=N",
                   help="raise or lower one bound on a request's JSON Schemas (repeatable): max_schema_nodes "
                        "(default 20000), max_schema_properties (1000), max_enum_values (1000), max_size_bound "
                        "(10000), max_grammar_bytes (4194304); a request past one is a 400 naming it")
    p.add_argument("--connect-timeout", type=_seconds, default=10.0, metavar="S",
                   help="seconds to open a connection to an engine (default 10; 0 or off: none)")
    p.add_argument("--first-token-timeout", type=_seconds, default=600.0, metavar="S",
                   help="seconds from sending a request to the engine's first delta, prefill included (default 600)")
    p.add_argument("--idle-timeout", type=_seconds, default=120.0, metavar="S",
                   help="longest gap between deltas in seconds (default 120)")
    p.add_argument("--total-timeout", type=_seconds, default=3600.0, metavar="S",
                   help="seconds a whole generation may take (default 3600)")
    p.add_argument("--constrain", choices=("off", "format", "full"), default="full",
                   help="what engines enforce: full (default) the grammar of the whole turn (reasoning, tool "
                        "calls, response_format), format response_format only, off nothing")
    p.add_argument("--render-only", action="store_true",
                   help="a tokenizer service for fleet routers: only vLLM's render / derender routes (and the "
                        "informational ones), no engine")
    p.add_argument("--max-model-len", type=_positive, metavar="N",
                   help="the engines' context window in tokens (default: the smallest max_model_len the engines "
                        "report at GET /v1/models); requests without max_tokens get the room it leaves")
    p.add_argument("--vocabulary", choices=("v4", "v3"), default=None,
                   help="the vocabulary the engines run: v4 (DeepSeek-V4, V4.1) or v3 (DeepSeek-V3, R1, V3.1, V3.2); "
                        "only its families' models are served (default: learned from vLLM's /tokenize at start, "
                        "else every family)")
    p.add_argument("--drain-seconds", type=_grace, default=30.0, metavar="S",
                   help="seconds in-flight streams may run on after SIGTERM / SIGINT (default 30); then each ends "
                        "with its API's shutdown error")
    p.add_argument("--head-timeout", type=_seconds, default=10.0, metavar="S",
                   help="seconds a connection has to send a complete request head (after connecting or after the "
                        "previous response); then 408 and closed (0 or none: no deadline)")
    p.add_argument("--max-client-connections", type=_count_or_none, default=256, metavar="N",
                   help="connections one client address may hold open; the next gets 503 and is closed "
                        "(0 or none: no cap; raise it behind a proxy, whose connections share one address)")
    p.add_argument("--probe-seconds", type=_seconds, default=2.0, metavar="S",
                   help="how often each engine is probed for /health/ready and to readmit an ejected replica "
                        "(0 or none: never)")
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"))
    # SUPPRESS: a value given before the subcommand (the main parser's option) is kept
    p.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS,
                   help="the model's tokenizer.json (default: the embedded DeepSeek-V4 one; DeepSeek-V4.1 needs its own)")
    p.set_defaults(run=_run)


class _Bad(Exception):
    """A flag or file the server cannot start with.

    Attributes:
        status: the exit status: 2 for a bad flag value (a usage error), 1 for a file a flag names
            that cannot be read or is not valid (unreadable input).
    """

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def _store(url: str, ttl: float | None = None) -> Any:
    from recipe.cache.redis_client import is_redis_url
    from recipe.store.conversations import MemoryStore, SQLiteStore, StoreUnavailable

    if url == "memory":
        return MemoryStore(ttl=ttl)
    if url.startswith("sqlite:"):
        try:
            return SQLiteStore(url[len("sqlite:"):], ttl=ttl)
        except Exception as exc:  # sqlite3.Error, OSError: the file cannot be created, opened or read
            raise _Bad(f"--store {url}: {exc}", 1) from None
    if is_redis_url(url):
        from recipe.store.redis_store import RedisStore

        try:
            return RedisStore.from_url(url, ttl=ttl)
        except ValueError as exc:  # a malformed URL (the server is reached only by requests)
            raise _Bad(f"--store {url}: {exc}") from None
        except StoreUnavailable as exc:  # redis-py is not installed (the extra)
            raise _Bad(f"--store {url}: {exc}") from None
    raise _Bad(f"--store {url!r}: want sqlite:PATH, redis://…, redis+cluster://… or memory")


def _index(url: str) -> Any:
    from recipe.cache.redis_client import is_redis_url

    if url == "memory":
        return None
    if is_redis_url(url):
        from recipe.cache.index import PrefixIndexUnavailable, RedisPrefixIndex

        try:
            return RedisPrefixIndex.from_url(url, ttl=3 * 86400, socket_connect_timeout=1.0, socket_timeout=1.0)
        except (ValueError, PrefixIndexUnavailable) as exc:  # a malformed URL; redis-py not installed
            raise _Bad(f"--index {url}: {exc}") from None
    raise _Bad(f"--index {url!r}: want memory, redis://… or redis+cluster://…")


def _shared_load(url: str | None, interval: float, ttl: float) -> Any:
    from recipe.cache.redis_client import is_redis_url

    if url is None:
        return None
    if not is_redis_url(url):
        raise _Bad(f"--shared-load {url!r}: want redis://… or redis+cluster://…")
    from recipe.serve.shared_load import SharedLoad, SharedLoadUnavailable

    try:
        return SharedLoad.from_url(url, interval=interval, ttl=ttl)
    except (ValueError, SharedLoadUnavailable) as exc:  # a malformed URL, a value out of range; no redis-py
        raise _Bad(f"--shared-load {url}: {exc}") from None


def _engine(spec: str) -> Any:
    """``spec``, or for ``replay:FILE`` the replay engine read from FILE (an unreadable or invalid
    file exits 1; every other spec is checked by the app, and a bad one exits 2)."""
    if spec.startswith("replay:") and spec != "replay:":
        from recipe.serve.engines.replay import ReplayEngine

        try:
            return ReplayEngine.from_file(spec[len("replay:"):])
        except ValueError as exc:
            raise _Bad(_naming("replay file ", str(exc)), 1) from None
    return spec


def _naming(what: str, message: str) -> str:
    """``message`` starting with ``what`` (``"api keys file "``…), so a line error (``FILE:N: …``)
    says which kind of file it is about."""
    return message if message.startswith(what) else what + message


def build(ns: argparse.Namespace) -> Any:
    """The ASGI app the flags describe.

    Raises:
        _Bad: a bad flag value (status 2) or a file that cannot be read or is not valid (status 1).
    """
    from recipe.options import DEFAULT_OPTIONS, parse_alias
    from recipe.serve.config import ServeConfig, Timeouts
    from recipe.serve.server import app
    from recipe.serve.tenants import Tenants
    from recipe.tokenizer import TokenizerError

    options = DEFAULT_OPTIONS
    try:
        for spec in ns.alias:
            name, alias = parse_alias(spec)
            options = options.with_alias(name, alias.target, alias.thinking)
        if ns.max_body_bytes:
            from dataclasses import replace

            options = replace(options, max_body_bytes=ns.max_body_bytes)
        limits = None
        if ns.schema_limit:
            from recipe.options import SchemaLimits

            limits = SchemaLimits(**dict(ns.schema_limit))
        timeouts = Timeouts(ns.connect_timeout, ns.first_token_timeout, ns.idle_timeout, ns.total_timeout)
        config = ServeConfig(timeouts=timeouts, max_concurrency=ns.max_concurrency, drain_seconds=ns.drain_seconds,
                             constrain=ns.constrain, probe_seconds=ns.probe_seconds,
                             render_only=ns.render_only, routing=ns.routing,
                             metrics_interval=ns.metrics_interval, max_model_len=ns.max_model_len,
                             vocabulary=ns.vocabulary, schema_limits=limits)
    except ValueError as exc:
        raise _Bad(str(exc)) from None
    try:
        tenants = Tenants.from_file(ns.api_keys) if ns.api_keys else None
    except ValueError as exc:  # unreadable, a bad line, a key listed twice
        raise _Bad(_naming("api keys file ", str(exc)), 1) from None
    if ns.render_only and ns.engine:
        raise _Bad("--render-only serves no generation: it takes no --engine")
    engines = [_engine(spec) for spec in ns.engine or ["demo"]]
    index = _index(ns.index)
    shared_load = _shared_load(ns.shared_load, ns.shared_load_interval, ns.shared_load_ttl)
    store = _store(ns.store or _default_store(), getattr(ns, "store_ttl", None))
    try:
        return app(engines=engines, options=options, config=config, store=store, index=index, tenants=tenants,
                   tokenizer=getattr(ns, "tokenizer", None), shared_load=shared_load)
    except TokenizerError as exc:
        raise _Bad(str(exc), 1) from None
    except ValueError as exc:
        raise _Bad(str(exc)) from None


def _run(ns: argparse.Namespace) -> int:
    from recipe.serve.runner import Server, uvicorn_config

    try:
        application = build(ns)
    except _Bad as exc:
        print(f"recipe serve: {exc}", file=sys.stderr)
        return exc.status
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in ns.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((ns.host, ns.port))
        sock.listen(2048)  # connections queue from now on, so the line below means "connectable"
    except OSError as exc:
        print(f"recipe serve: cannot listen on {ns.host}:{ns.port}: {exc.strerror}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    # the app cuts what still generates at --drain-seconds with each API's own error; uvicorn's grace,
    # a little longer, only catches a connection that still has not finished by then
    config = uvicorn_config(application, log_level=ns.log_level, timeout_graceful_shutdown=max(ns.drain_seconds, 0.0) + 2.0,
                            lifespan="on", head_timeout=ns.head_timeout, max_client_connections=ns.max_client_connections)
    drain = application.state.recipe.drain

    class _Server(Server):
        async def shutdown(self, sockets: Any = None) -> None:
            drain.start(ns.drain_seconds)
            await super().shutdown(sockets)
            if self.force_exit:
                # a second SIGINT stopped uvicorn's wait and skipped the app's shutdown: cut what
                # still generates now, with each API's own error, rather than leave it to the loop's
                # teardown (a cancelled handler's traceback, a body cut without its last chunk),
                # then close the engines and the store as a clean shutdown does
                drain.start(0)
                if self.server_state.tasks:
                    await asyncio.wait(list(self.server_state.tasks), timeout=1.0)
                await self.lifespan.shutdown()

    server = _Server(config)
    if ns.render_only:
        serving = "render only: no engine"
    else:
        serving = "engines: " + ", ".join(r.name for r in application.state.recipe.pool.replicas)
    print(f"recipe serve: listening on http://{shown}:{port} ({serving})", flush=True)
    # uvicorn drains on SIGINT / SIGTERM, then re-raises the signal to the handler it found: make
    # that a no-op, so a clean shutdown exits 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    server.run(sockets=[sock])
    return 0
