"""P/D disaggregation: each request is prefilled on one replica and decoded on another.

``recipe serve --engine prefill=vllm+http://P1 --engine prefill=vllm+http://P2 --engine
decode=vllm+http://D1 …`` makes one :class:`DisaggregatedEngine` of the role-tagged replicas (all
``vllm+``, all ``generate+`` or all ``sglang+``). Per request it picks

- a **prefill** replica by the cost rule of :mod:`recipe.serve.routing`: the prompt tokens that
  replica would have to prefill (its cached prefix taken off: what its KV events say it holds when
  its spec names ``kv_events=``, else the prefix index's estimate of the prompts routed there) plus
  its load (requests in flight, the engine's own running and waiting requests and KV usage, scraped
  from its ``/metrics``);
- a **decode** replica by load alone (the same rule with no cache credit: the KV cache arrives from
  the prefill replica): requests in flight or running there, and its KV usage;

and drives the engines' own disaggregation protocol (requests in flight count this frontend's and,
with a shared load, ``--shared-load``, every frontend's: the server syncs both pools' counts,
:attr:`DisaggregatedEngine.pools`):

**vLLM** (a KV connector that hands blocks over by ``kv_transfer_params``: NixlConnector, Mooncake,
LMCache's; ``--kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'`` on
every replica; vLLM's ``examples/online_serving/disaggregated_serving`` proxy does the same): the
prefill replica gets the request with ``kv_transfer_params: {"do_remote_decode": true,
"do_remote_prefill": false, "remote_engine_id": null, "remote_block_ids": null, "remote_host":
null, "remote_port": null}``, ``stream: false`` and ``max_tokens: 1``; its answer's
``kv_transfer_params`` (``do_remote_prefill: true``, ``remote_engine_id``, ``remote_block_ids``,
``remote_host``, ``remote_port``, …, as its connector wrote them) go unchanged into the decode
request, which is the request itself, streamed; the decode replica is chosen when the prefill is
done (its load then). A prefill answer without ``kv_transfer_params`` (a
replica started without a KV connector) is an engine error, not a silent local prefill.
``generate+http://`` replicas (vLLM's ``/inference/v1/generate``, which passes a
``GenerateRequest``'s ``kv_transfer_params`` to the engine and answers them) take the same
exchange, ``max_tokens`` 1 inside the prefill's ``sampling_params``.

**SGLang** (``--disaggregation-mode prefill`` / ``decode``; its ``mini_lb`` and router do the same):
both replicas get the request with the same ``bootstrap_host`` (the prefill replica's host),
``bootstrap_port`` (its ``--disaggregation-bootstrap-port``: the prefill spec's
``&bootstrap_port=``, default 8998) and ``bootstrap_room`` (a random 63-bit integer, one per
request), at the same time; the prefill replica answers whole (``stream: false``), the decode
replica streams the output. A prefill failure while the decode replica waits for its KV ends the
request.

An error at either stage is the engine error the API answers with its own error (502, or the
API's 400 for an engine's refusal); a replica whose connection is refused is ejected for a backoff
(vLLM: and the request tried on another replica of that role). The prompt's cached-token count in the usage
is the prefill replica's (where the prefix cache is).

``n`` > 1 (Chat Completions) is ``n`` one-choice P/D requests at once, each choice on the replicas the
rule picks for it, seeded ``seed + k`` for choice k as vLLM seeds its own parallel samples (a
prefill's KV cache is handed over to one decode request, so each choice has its own prefill).
The usage's cached count is the first choice's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import orjson

from recipe.cache.index import PrefixIndex
from recipe.cache.keys import DEFAULT_BLOCK_SIZE
from recipe.serve.engines.base import EngineDelta, EngineError, EngineRequest
from recipe.serve.engines.http import HTTPEngine, rank_headers, turn_grammar
from recipe.serve.pool import Replica, ReplicaPool
from recipe.serve.routing import Candidate, RoutingWeights, pick

if TYPE_CHECKING:
    from recipe.schema.turn import OutputGrammar

__all__ = ["DisaggregatedEngine", "ROLES", "PREFILL_TRANSFER", "SGLANG_BOOTSTRAP_PORT"]

_log = logging.getLogger(__name__)

#: The roles an engine spec may carry (``prefill=SPEC``, ``decode=SPEC``).
ROLES = ("prefill", "decode")
#: The ``kv_transfer_params`` a vLLM prefill request carries.
PREFILL_TRANSFER: Mapping[str, Any] = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                                       "remote_block_ids": None, "remote_host": None, "remote_port": None}
#: SGLang's default ``--disaggregation-bootstrap-port``.
SGLANG_BOOTSTRAP_PORT = 8998


def _protocol(engines: Sequence[Any]) -> str:
    from recipe.serve.engines.generate import GenerateEngine
    from recipe.serve.engines.sglang import SGLangEngine
    from recipe.serve.engines.vllm import VLLMEngine

    for kind, name in ((VLLMEngine, "vllm"), (GenerateEngine, "generate"), (SGLangEngine, "sglang")):
        if all(isinstance(e, kind) for e in engines):
            return name
    raise ValueError("a P/D pool's replicas must all be vllm+http://, all generate+http:// or all sglang+http:// "
                     "(one disaggregation protocol)")


class DisaggregatedEngine:
    """Prefill replicas and decode replicas behind one engine (see the module docstring).

    Args:
        prefill: the prefill replicas (HTTP connectors of one kind: vLLM, generate or SGLang).
        decode: the decode replicas (the same protocol).
        index: the prefix index the prefill choice reads and records (default: in memory).
        weights: the cost's weights (:class:`~recipe.serve.routing.RoutingWeights`).
        block_size: tokens per block of the prefix keys.
        metrics_interval: seconds between scrapes of every replica's ``/metrics`` (0: none; started
            with the first request).
        name: the engine's name.

    Raises:
        ValueError: no prefill or no decode replica, or mixed protocols.
    """

    serves_n = True

    def __init__(self, prefill: Sequence[HTTPEngine], decode: Sequence[HTTPEngine], *, index: PrefixIndex | None = None,
                 weights: RoutingWeights = RoutingWeights(), block_size: int = DEFAULT_BLOCK_SIZE,
                 metrics_interval: float = 2.0, name: str = "pd") -> None:
        if not prefill or not decode:
            raise ValueError("a P/D pool needs at least one prefill=… and one decode=… engine")
        self.protocol = _protocol([*prefill, *decode])
        self.name = name
        self.weights = weights
        self.prefill = ReplicaPool(prefill, index, block_size=block_size, routing="cost", weights=weights)
        self.decode = ReplicaPool(decode, routing="cost", weights=weights, reads_cache=False)
        both = {r.name for r in self.prefill.replicas} & {r.name for r in self.decode.replicas}
        if both:
            raise ValueError(f"P/D: replica {sorted(both)[0]!r} is both prefill=… and decode=… (each replica has one "
                             "role; give it another &name= if two specs name one server)")
        self.metrics_interval = metrics_interval
        self._scraper: asyncio.Task[None] | None = None

    @property
    def members(self) -> list[Any]:
        """Every replica's engine, prefill first (the server reads their served models and window)."""
        return [r.engine for r in (*self.prefill.replicas, *self.decode.replicas)]

    @property
    def pools(self) -> tuple[ReplicaPool, ReplicaPool]:
        """The prefill and decode pools: the server follows the prefill replicas' KV events
        (:meth:`ReplicaPool.follow_events <recipe.serve.pool.ReplicaPool.follow_events>`) and shares
        both pools' in-flight counts with the fleet's other frontends (``--shared-load``)."""
        return self.prefill, self.decode

    def pick_decode(self, prompt_tokens: int) -> Replica:
        """The decode replica for a prompt: the least cost with no cache credit (load and KV usage)."""
        candidates = self.decode.available()
        cands = [Candidate(0, r.requests, r.served, r.load) for r in candidates]
        return candidates[pick(prompt_tokens, cands, self.weights, time.monotonic())]

    def health(self, now: float | None = None) -> dict[str, list[dict[str, Any]]]:
        """Each role's replicas as ``/health`` lists them: ``{"prefill": [{name, reachable, ejected,
        in_flight, in_flight_others, view}, …], "decode": […]}`` (``in_flight_others``: the fleet's other
        frontends' requests there, with a shared load; ``view``, prefill replicas only: ``events`` when
        their cache is read from their KV events, else ``estimate``)."""
        now = time.monotonic() if now is None else now
        return {role: [{"name": r.name, "reachable": r.reachable is not False, "ejected": r.ejected(now),
                        "in_flight": r.in_flight, "in_flight_others": r.others,
                        **({"view": "events" if r.exact else "estimate"} if pool.reads_cache else {})}
                       for r in pool.replicas]
                for role, pool in (("prefill", self.prefill), ("decode", self.decode))}

    async def ping(self, timeout: float = 2.0) -> bool:
        """Probe every replica (readmitting those that answer again); True when some prefill and some
        decode replica answer."""
        await asyncio.gather(self.prefill.probe(), self.decode.probe())
        return self.prefill.ready() and self.decode.ready()

    def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Prefill ``request`` on one replica and decode it on another (see the module docstring).

        Raises:
            EngineError: either stage's failure (the prefill's named as such).
        """
        return self._generate(request)

    async def _generate(self, req: EngineRequest) -> AsyncIterator[EngineDelta]:
        n = req.extra.n if req.extra is not None else 1
        it = self._one(req) if n <= 1 else self._several(req, n)
        try:
            async for delta in it:
                yield delta
        finally:
            await it.aclose()

    async def _several(self, req: EngineRequest, n: int) -> AsyncIterator[EngineDelta]:
        """``n`` choices of one prompt: ``n`` one-choice P/D requests at once (choice k: request id
        ``<id>-k``, seed ``seed + k`` as vLLM seeds its parallel samples), their deltas tagged with
        ``index`` k as they come; the prompt's cached count is the first choice's. The first failure
        ends them all; closing the stream closes every one."""
        assert req.extra is not None
        queue: asyncio.Queue[tuple[int, EngineDelta | BaseException | None]] = asyncio.Queue(maxsize=64)

        async def one(k: int) -> None:
            sub = replace(req, request_id=f"{req.request_id}-{k}", seed=None if req.seed is None else req.seed + k,
                          extra=replace(req.extra, n=1))
            it = self._one(sub)
            try:
                async for delta in it:
                    await queue.put((k, replace(delta, index=k, cached_tokens=delta.cached_tokens if k == 0 else None)))
                await queue.put((k, None))
            except Exception as exc:  # handed to the request's task
                await queue.put((k, exc))
            finally:
                await it.aclose()

        tasks = [asyncio.ensure_future(one(k)) for k in range(n)]
        try:
            left = n
            while left:
                _, item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if item is None:
                    left -= 1
                    continue
                yield item
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task

    async def _one(self, req: EngineRequest) -> AsyncIterator[EngineDelta]:
        """One choice: a prefill replica and a decode replica (see the module docstring)."""
        self._start_scraping()
        grammar = await turn_grammar(req)
        model = req.prepared.model if req.prepared is not None else ""
        route = await self.prefill.route(req.token_ids, req.cache_salt, model)
        if self.protocol == "sglang":  # both replicas at once
            it = self._sglang(req, grammar, route.replica, self.pick_decode(len(req.token_ids)))
        else:  # the decode replica once the prefill is done: its load then
            it = self._vllm(req, grammar, route.replica, route.dp_rank)
        try:
            async for delta in it:
                yield delta
        finally:
            await it.aclose()

    async def _claim(self, pool: ReplicaPool, first: Replica, attempt: Any) -> tuple[Replica, Any]:
        """``await attempt(replica)`` on ``first``, then, while a connection is refused, on another
        replica of ``pool`` (each tried once); counts the request in flight on the one that answers."""
        tried: set[str] = set()
        r = first
        r.in_flight += 1
        r.served += 1
        while True:
            tried.add(r.name)
            try:
                result = await attempt(r)
            except EngineError as err:
                nxt = pool.failover(r, err, tried)
                if nxt is None:
                    r.in_flight -= 1
                    raise
                r = nxt
                continue
            except BaseException:
                r.in_flight -= 1
                raise
            pool.succeeded(r)
            return r, result

    async def _prefill_vllm(self, r: Replica, req: EngineRequest, grammar: OutputGrammar | None) -> dict[str, Any]:
        e = r.engine
        if self.protocol == "generate":  # a GenerateRequest: the sampling fields inside sampling_params
            from recipe.serve.engines.generate import generate_body

            body = generate_body(req, grammar, form=e.grammar_form, model=e.model, stream=False)
            body["sampling_params"].pop("min_tokens", None)
            body["sampling_params"]["max_tokens"] = 1
            body["kv_transfer_params"] = dict(PREFILL_TRANSFER)
        else:
            from recipe.serve.engines.vllm import vllm_body

            body = vllm_body(req, e.model, grammar, e.grammar_form)
            for key in ("stream_options", "min_tokens", "n"):
                body.pop(key, None)
            body.update(stream=False, max_tokens=1, kv_transfer_params=dict(PREFILL_TRANSFER))
        async with e.stream(e.path, body, rank_headers(req)) as response:
            try:
                data = orjson.loads(await response.aread())
            except (orjson.JSONDecodeError, httpx.TransportError) as exc:
                raise EngineError("protocol", f"prefill replica {r.name}: unreadable answer: {exc}") from None
        if not isinstance(data, dict):
            raise EngineError("protocol", f"prefill replica {r.name}: the answer is not an object")
        err = data.get("error")
        if err:
            message = err.get("message") if isinstance(err, dict) else str(err)
            raise EngineError("failed", f"prefill replica {r.name}: {message}")
        return data

    async def _vllm(self, req: EngineRequest, grammar: OutputGrammar | None, p: Replica,
                    rank: int | None = None) -> AsyncIterator[EngineDelta]:
        routed = p  # (the rank holding the prompt's prefix is that replica's; another one picks its own)
        p, data = await self._claim(self.prefill, p, lambda r: self._prefill_vllm(
            r, replace(req, dp_rank=rank if r is routed else None), grammar))
        p.in_flight -= 1  # the prefill is done; the KV cache waits on it for the decode replica to read
        params = data.get("kv_transfer_params")
        if not isinstance(params, dict) or not params:
            raise EngineError("failed", f"prefill replica {p.name} answered without kv_transfer_params: start every "
                                        "replica with a KV connector (--kv-transfer-config, e.g. NixlConnector)")
        cached = _cached(data.get("usage"))

        async def open_decode(r: Replica) -> tuple[AsyncIterator[EngineDelta], EngineDelta | None]:
            stream = r.engine.attempt(req, grammar, {"kv_transfer_params": params})
            try:
                return stream, await stream.__anext__()
            except StopAsyncIteration:
                return stream, None
            except BaseException:
                await stream.aclose()
                raise

        d, (it, first) = await self._claim(self.decode, self.pick_decode(len(req.token_ids)), open_decode)
        try:
            delta = first
            while delta is not None:
                yield _with_cached(delta, cached)
                try:
                    delta = await it.__anext__()
                except StopAsyncIteration:
                    delta = None
        finally:
            d.in_flight -= 1
            await it.aclose()

    async def _prefill_sglang(self, r: Replica, req: EngineRequest, grammar: OutputGrammar | None,
                              fields: Mapping[str, Any]) -> dict[str, Any]:
        from recipe.serve.engines.sglang import sglang_body

        e = r.engine
        body = sglang_body(req, grammar, e.grammar_form)
        body.update(fields, stream=False)
        async with e.stream(e.path, body) as response:
            try:
                data = orjson.loads(await response.aread())
            except (orjson.JSONDecodeError, httpx.TransportError) as exc:
                raise EngineError("protocol", f"prefill replica {r.name}: unreadable answer: {exc}") from None
        data = data[0] if isinstance(data, list) and data else data
        if not isinstance(data, dict):
            raise EngineError("protocol", f"prefill replica {r.name}: the answer is not an object")
        err = data.get("error")
        meta = data.get("meta_info") if isinstance(data.get("meta_info"), dict) else {}
        fin = meta.get("finish_reason")
        kind = fin.get("type") if isinstance(fin, dict) else fin
        if err or kind == "abort":
            message = (err.get("message") if isinstance(err, dict) else err) or (fin.get("message") if isinstance(fin, dict) else kind)
            raise EngineError("failed", f"prefill replica {r.name}: {message}")
        return data

    async def _sglang(self, req: EngineRequest, grammar: OutputGrammar | None, p: Replica, d: Replica) -> AsyncIterator[EngineDelta]:
        host = urlsplit(p.engine.base_url).hostname or ""
        port = getattr(p.engine, "bootstrap_port", None) or SGLANG_BOOTSTRAP_PORT
        fields = {"bootstrap_host": host, "bootstrap_port": port, "bootstrap_room": secrets.randbits(63)}
        p.in_flight += 1
        p.served += 1
        d.in_flight += 1
        d.served += 1
        prefill = asyncio.ensure_future(self._prefill_sglang(p, req, grammar, fields))
        queue: asyncio.Queue[EngineDelta | BaseException | None] = asyncio.Queue(maxsize=64)

        async def decode() -> None:  # iterates (and closes) the decode stream in one task of its own
            try:
                async for delta in d.engine.attempt(req, grammar, fields):
                    await queue.put(delta)
                await queue.put(None)
            except Exception as exc:  # handed to the request's task
                await queue.put(exc)

        decoding = asyncio.ensure_future(decode())
        getting: asyncio.Future[Any] | None = None
        try:
            while True:
                getting = asyncio.ensure_future(queue.get())
                waits: set[asyncio.Future[Any]] = {getting} if prefill.done() else {getting, prefill}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if prefill.done() and not getting.done() and prefill.exception() is not None:
                    getting.cancel()
                    self._failed(self.prefill, p, prefill.exception())
                    raise prefill.exception()  # type: ignore[misc]
                item = await getting
                if isinstance(item, BaseException):
                    self._failed(self.decode, d, item)
                    raise item
                if item is None:
                    if prefill.done() and prefill.exception() is None:
                        self.prefill.succeeded(p)
                    return
                cached = None
                if prefill.done() and prefill.exception() is None:
                    cached = _cached(prefill.result().get("meta_info"), key="cached_tokens")
                yield _with_cached(item, cached)
        finally:
            p.in_flight -= 1
            d.in_flight -= 1
            if getting is not None and not getting.done():
                getting.cancel()
            for task in (decoding, prefill):
                if not task.done():
                    task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    def _failed(self, pool: ReplicaPool, r: Replica, err: BaseException | None) -> None:
        if isinstance(err, EngineError):
            pool.failed(r, err)

    def _start_scraping(self) -> None:
        if self._scraper is None and self.metrics_interval > 0:
            self._scraper = asyncio.ensure_future(self._scrape_forever())

    async def _scrape_forever(self) -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(max(self.metrics_interval, 0.1))) as client:
            while True:
                await asyncio.gather(self.prefill.scrape(client), self.decode.scrape(client))
                await asyncio.sleep(self.metrics_interval)

    async def aclose(self) -> None:
        """Stop scraping and close every replica's connections."""
        if self._scraper is not None:
            self._scraper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scraper
        await self.prefill.aclose()
        await self.decode.aclose()


def _cached(usage: Any, key: str | None = None) -> int | None:
    """The prompt's cached-token count in an answer's ``usage`` (vLLM ``prompt_tokens_details.cached_tokens``)
    or ``meta_info`` (SGLang ``cached_tokens``), or None."""
    if not isinstance(usage, dict):
        return None
    if key is not None:
        value = usage.get(key)
    else:
        details = usage.get("prompt_tokens_details")
        value = details.get("cached_tokens") if isinstance(details, dict) else None
    return value if type(value) is int and value >= 0 else None


def _with_cached(delta: EngineDelta, cached: int | None) -> EngineDelta:
    """``delta`` with the prefill replica's cached count where the decode replica reports one, and on
    the finishing delta."""
    if cached is None or (delta.cached_tokens is None and delta.finish is None):
        return delta
    return replace(delta, cached_tokens=cached)
