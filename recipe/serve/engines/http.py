"""What the HTTP connectors share: one httpx client per engine, an SSE ``data:`` reader, the mapping
of transport and HTTP failures to :class:`~recipe.serve.engines.base.EngineError`, and the output
constraint a connector hands to an engine.

Constraints, by the request's level (``recipe serve --constrain``, :data:`~recipe.serve.engines.base.
ConstrainLevel`): at ``full`` the connector sends the grammar of the whole turn (:func:`turn_grammar`)
in the form its engine's grammar backend takes (:data:`GRAMMAR_FORMS`: the xgrammar structural tag,
or the llguidance Lark); at ``format``, or for a constraint without a grammar, a ``response_format``
in the engine's plain JSON / regex fields (:func:`structured_output`); at ``off`` nothing. An engine
that refuses the grammar (its 400, or SGLang's in-stream refusal) fails the request with a
``bad_request`` error that says what was sent and how to change it: the client gets the API's own
400, never a 500 and never an answer silently produced without the grammar it was promised.

Read timeouts are the server's (first token, idle gap, total: :class:`recipe.serve.guard.Guard`);
the client itself only bounds connecting, writing and waiting for a pooled connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import httpx
import orjson

from recipe.serve.config import Timeouts
from recipe.serve.engines.base import EngineDelta, EngineError, EngineInfo, EngineRequest

if TYPE_CHECKING:
    from recipe.schema.turn import OutputGrammar

__all__ = ["HTTPEngine", "SSEObjects", "sse_objects", "map_status", "refusal", "error_frame", "parse_models", "structured_output",
           "token_ids", "turn_grammar", "GrammarForm", "GRAMMAR_FORMS", "DP_RANK_HEADER", "rank_headers"]

_log = logging.getLogger(__name__)

#: How a connector sends the turn grammar: ``structural_tag`` (the default: xgrammar's structural
#: tag, taken by both engines' default grammar backends — vLLM ``structured_outputs.structural_tag``
#: with its ``auto`` or ``xgrammar`` backend, SGLang ``sampling_params.structural_tag`` with its
#: default ``xgrammar``) or ``lark`` (llguidance Lark: vLLM ``structured_outputs.grammar`` with
#: ``--structured-outputs-config.backend guidance``, SGLang ``sampling_params.ebnf`` with
#: ``--grammar-backend llguidance``).
GrammarForm = Literal["structural_tag", "lark"]
GRAMMAR_FORMS: tuple[str, ...] = ("structural_tag", "lark")
#: Tool schemas longer than this (characters) have their grammar built in a worker thread, so a
#: request with many large tools never stalls the other streams (a cached grammar costs microseconds).
_INLINE_SCHEMA_CHARS = 8192


#: How vLLM and SGLang word a refusal of a prompt plus ``max_tokens`` longer than their window
#: (vLLM: "This model's maximum context length is …", "max_tokens=… cannot be greater than
#: max_model_len=…", "The decoder prompt (length …) is longer than the maximum model length of …";
#: SGLang: "… is longer than the model's context length (… tokens)").
_CONTEXT_WORDS = re.compile(r"maximum context length|max_model_len|maximum model length|context length|context window",
                            re.IGNORECASE)


def refusal(status: int, message: str) -> EngineError:
    """The EngineError for an engine's 400 / 422 refusal saying ``message``: ``context_length`` when
    it refuses the prompt plus ``max_tokens`` as longer than its window, else ``bad_request``."""
    if _CONTEXT_WORDS.search(message):
        return EngineError("context_length", f"the engine refused the request as longer than its context window "
                                             f"({status}): {message}", status)
    return EngineError("bad_request", f"the engine refused the request ({status}): {message}", status)


def error_frame(err: Any) -> EngineError:
    """The EngineError for an error object an engine sent inside a 200 stream (vLLM ``data:
    {"error": {"message", "type", "code"}}``): a refusal (``code`` 400 / 422, or a ``type`` naming a
    bad request) is :func:`refusal`'s, anything else ``failed``."""
    if isinstance(err, dict):
        message = str(err.get("message") or err)
        code = err.get("code")
        status = code if type(code) is int else None
        if status in (400, 422) or (status is None and "badrequest" in str(err.get("type", "")).lower()):
            return refusal(status or 400, message)
    else:
        message = str(err)
    return EngineError("failed", f"engine error: {message}")


#: vLLM's request header naming the data-parallel rank to run a request on (its OpenAI-compatible
#: and ``/inference/v1/generate`` routes read it: ``_get_data_parallel_rank``).
DP_RANK_HEADER = "X-data-parallel-rank"


def rank_headers(req: EngineRequest) -> dict[str, str] | None:
    """``{DP_RANK_HEADER: rank}`` for a request routed to a data-parallel rank (``req.dp_rank``), else None."""
    return None if req.dp_rank is None else {DP_RANK_HEADER: str(req.dp_rank)}


def map_status(status: int, body: bytes) -> EngineError:
    """The EngineError for an HTTP error answer (the engine's own message when its body has one)."""
    message = body.decode("utf-8", "replace")[:2000]
    try:
        obj = orjson.loads(body)
        err = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message = err["message"]
        elif isinstance(err, str):
            message = err
        elif isinstance(obj, dict) and isinstance(obj.get("message"), str):
            message = obj["message"]
    except orjson.JSONDecodeError:
        pass
    if status in (429, 503):
        return EngineError("overloaded", f"engine overloaded ({status}): {message}", status)
    if status in (400, 422):
        return refusal(status, message)
    return EngineError("failed", f"engine error ({status}): {message}", status)


def parse_models(body: bytes) -> EngineInfo:
    """The :class:`~recipe.serve.engines.base.EngineInfo` of an OpenAI-style ``GET /v1/models``
    answer (vLLM and SGLang: ``{"data": [{"id", "max_model_len", …}, …]}``): every entry's ``id``,
    and the smallest ``max_model_len`` given (None when no entry has one).

    Raises:
        EngineError: ``protocol`` — not that shape.
    """
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise EngineError("protocol", f"/v1/models is not JSON: {exc}") from None
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
        raise EngineError("protocol", f"/v1/models is not a model list: {body[:200]!r}")
    lens = [m["max_model_len"] for m in data if type(m.get("max_model_len")) is int and m["max_model_len"] > 0]
    return EngineInfo(tuple(m["id"] for m in data), min(lens) if lens else None)


#: After an engine's last frame: how long the rest of its body (``data: [DONE]``, the chunked
#: terminator) is waited for, so the connection goes back to the pool; past it the connection is closed.
FINISH_SECONDS = 0.25


class SSEObjects:
    """The JSON objects of an SSE stream's ``data:`` lines, until ``data: [DONE]`` or EOF (iterate
    it with ``async for``); :meth:`finish` reads what is left of the body after the last object a
    connector needs, so the engine connection is kept for the next request.

    Lines are split on the bytes (``\\n``, ``\\r\\n`` or ``\\r``, as SSE defines them), not on
    decoded text: a frame whose JSON holds U+2028, U+2029 or U+0085 unescaped (vLLM's and SGLang's
    printers leave them so) is one line. A line that is not UTF-8 is read with U+FFFD in place of
    its bad bytes.

    Raises (while iterating):
        EngineError: ``protocol`` for a data line that is not a JSON object; ``unavailable`` when
            the connection breaks.
    """

    __slots__ = ("_chunks", "_objects", "ended")

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.aiter_bytes()
        self._objects = self._read()
        self.ended = False  #: the whole body was read

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._objects

    async def _read(self) -> AsyncIterator[dict[str, Any]]:
        pending = b""
        try:
            async for chunk in self._chunks:
                if pending:
                    chunk = pending + chunk
                if b"\r" in chunk:
                    chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                lines = chunk.split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if line.startswith(b"data:"):
                        obj = _data_object(line)
                        if obj is None:
                            return
                        yield obj
            self.ended = True
            if pending.startswith(b"data:"):  # a last line without its newline
                obj = _data_object(pending)
                if obj is not None:
                    yield obj
        except httpx.TransportError as exc:
            raise EngineError("unavailable", f"engine connection broke mid-stream: {type(exc).__name__}: {exc}") from None

    async def finish(self, seconds: float = FINISH_SECONDS) -> None:
        """Read the rest of the body (at most ``seconds``), so the connection can serve the next
        request; an engine that does not end its body by then, or a broken connection, costs only
        the connection (closed when the response is). Never raises an engine's error."""
        if self.ended:
            return
        try:
            async with asyncio.timeout(seconds):
                async for _ in self._chunks:
                    pass
            self.ended = True
        except (TimeoutError, httpx.HTTPError, httpx.StreamError):
            pass


def _data_object(line: bytes) -> dict[str, Any] | None:
    """The JSON object of a ``data:`` line; None for ``data: [DONE]``."""
    data = line[5:].strip()
    if data == b"[DONE]":
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        text = data.decode("utf-8", "replace")
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise EngineError("protocol", f"engine sent malformed JSON: {exc}: {text[:200]!r}") from None
    if type(obj) is not dict:
        raise EngineError("protocol", f"engine sent a non-object frame: {data.decode('utf-8', 'replace')[:200]!r}")
    return obj


def sse_objects(response: httpx.Response) -> SSEObjects:
    """The JSON objects of an SSE stream's ``data:`` lines, until ``data: [DONE]`` or EOF
    (:class:`SSEObjects`: iterate with ``async for``; ``finish()`` after the last one needed).

    Raises (while iterating):
        EngineError: ``protocol`` for a data line that is not a JSON object; ``unavailable`` when the
            connection breaks.
    """
    return SSEObjects(response)


_INT = {int}


def token_ids(value: Any, engine: str) -> list[int]:
    """A choice's ``token_ids`` as the engine sent it (``[]`` for null or absent); ``engine`` names
    the engine or its API in the error.

    Raises:
        EngineError: ``protocol``, not a list of non-negative integers.
    """
    if value is None:
        return []
    # (the types' set and the minimum: two C passes over the ids, not a Python test per id)
    if type(value) is not list or (value and ({*map(type, value)} != _INT or min(value) < 0)):
        raise EngineError("protocol", f"{engine} token_ids is not a list of token ids: {str(value)[:200]}")
    return value


def count(value: Any) -> int | None:
    """A token count an engine reported (``prompt_tokens``, ``cached_tokens``): a non-negative int as
    sent, else None (not reported: a string, a float, a list … from a malformed engine is not a count)."""
    return value if type(value) is int and value >= 0 else None


def choice_list(value: Any, engine: str) -> list[dict[str, Any]]:
    """A frame's ``choices`` (``[]`` for null or absent).

    Raises:
        EngineError: ``protocol``, not a list of objects.
    """
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise EngineError("protocol", f"{engine} choices is not a list of objects: {str(value)[:200]}")
    return value


def structured_output(req: EngineRequest) -> tuple[str, str] | None:
    """A ``response_format`` in an engine's plain fields (every grammar backend takes them):
    ``("json", schema text)``, ``("json_object", "")`` or ``("regex", pattern)``; None otherwise.

    Only where it covers the whole completion: not in thinking mode (a format applied from token 0
    would forbid the reasoning) and not for tool-call constraints — those need the turn grammar
    (:func:`turn_grammar`); without it they run unconstrained, and recipe still validates the answer
    and notes a mismatch.
    """
    c = req.constraint
    if c is None or c.kind not in ("json", "regex"):
        return None
    prep = req.prepared
    if prep is not None and prep.conversation.thinking:
        return None
    if c.kind == "regex":
        return ("regex", c.schema)
    return ("json", c.schema) if c.schema else ("json_object", "")


async def turn_grammar(req: EngineRequest) -> OutputGrammar | None:
    """The grammar of the whole turn to send at the ``full`` level (``req.grammar``), or None (a
    lower level, no constraint, a family without a grammar builder, or a grammar that cannot be
    built — logged; the request then goes out with :func:`structured_output`)."""
    c = req.constraint
    if c is None or req.constrain != "full":
        return None
    try:
        if len(c.schema) > _INLINE_SCHEMA_CHARS:
            return await asyncio.to_thread(lambda: c.grammar)
        return c.grammar
    except ValueError as exc:  # never for a request prepare accepted; the request still runs
        _log.warning("request %s: no output grammar (%s); sending it without", req.request_id, exc)
        return None


class HTTPEngine:
    """Base of the HTTP connectors: the client, POSTing a streamed request, error mapping, and the
    turn grammar (:meth:`generate`). A subclass implements :meth:`attempt` (one upstream request).

    Args:
        base_url: ``http://HOST:PORT`` (a path prefix is kept).
        timeouts: the server's timeouts (``connect`` bounds the connection).
        name: the replica name.
        model: the engine's served model name to send, or None.
        headers: extra request headers (e.g. ``Authorization`` for a vLLM ``--api-key``).
        grammar: how the turn grammar is sent (:data:`GrammarForm`), per the engine's grammar backend.

    Attributes:
        grammar_refusals: requests carrying the grammar that this engine refused (the first is logged
            as a warning).
        info: what the engine last said it serves (:class:`~recipe.serve.engines.base.EngineInfo`:
            served model names, context window), read by :meth:`refresh`; None until then, or when
            the engine does not answer ``GET /v1/models``.

    Raises:
        ValueError: an unknown ``grammar`` form.
    """

    #: seconds between two tries to read an unreachable engine's info (:attr:`stale`)
    info_retry_seconds = 1.0
    #: where the engine publishes its KV events (a :class:`~recipe.serve.kv_events.KVEventsSource`,
    #: set from a spec's ``kv_events=``), or None
    kv_events: Any = None

    def __init__(self, base_url: str, *, timeouts: Timeouts = Timeouts(), name: str | None = None,
                 model: str | None = None, headers: dict[str, str] | None = None,
                 grammar: str = "structural_tag") -> None:
        if grammar not in GRAMMAR_FORMS:
            raise ValueError(f"grammar={grammar!r}: want structural_tag or lark")
        self.base_url = base_url.rstrip("/")
        self.name = name or self.base_url
        self.model = model
        self.grammar_form = grammar
        self.grammar_refusals = 0
        self.info: EngineInfo | None = None
        self._unread = True  # the info is to be read (never read, or the connection was refused / broke since)
        self._next_read = 0.0  # loop time before which an unreachable engine's info is not tried again
        self._reading: asyncio.Task[EngineInfo | None] | None = None
        self._watchers: list[Callable[[HTTPEngine, EngineInfo], None]] = []
        self._unreachable_logged = False
        connect = timeouts.connect
        self._info_timeout = connect or 10.0
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers,
            timeout=httpx.Timeout(None, connect=connect, write=connect, pool=connect),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
        )

    def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Stream ``request`` from the engine, with the turn grammar at the ``full`` level.

        Raises:
            EngineError: as :meth:`attempt`; an engine's refusal (``bad_request``) of a request that
                carried the grammar names the form sent and the ways to change it.
        """
        return self._generate(request)

    async def _generate(self, req: EngineRequest) -> AsyncIterator[EngineDelta]:
        grammar = await turn_grammar(req)
        it = self.attempt(req, grammar)
        produced = False
        try:
            async for delta in it:
                produced = True
                yield delta
        except EngineError as err:
            if err.kind == "unavailable":
                self._unread = True  # refused or broken: read the info again once it answers
            if grammar is None or produced or err.kind != "bad_request":
                raise
            self.grammar_refusals += 1
            if self.grammar_refusals == 1:
                _log.warning("engine %s refused a request carrying the output grammar (%s): %s", self.name,
                             self.grammar_form, err.message)
            raise EngineError("bad_request", f"{err.message} (recipe sent the {grammar.mode} output grammar as "
                              f"{self.grammar_form}: if this engine's grammar backend does not take that form, set "
                              f"the engine spec's &grammar= (structural_tag or lark), or run recipe serve with "
                              f"--constrain format or off)", err.engine_status) from None
        finally:
            await it.aclose()

    @property
    def stale(self) -> bool:
        """True when :meth:`refresh` has something to do: the info was never read, or a connection
        was refused or broke since (and the last try, if it failed, is ``info_retry_seconds`` old)."""
        if not self._unread:
            return False
        try:
            return asyncio.get_running_loop().time() >= self._next_read
        except RuntimeError:
            return True

    def watch(self, callback: Callable[[HTTPEngine, EngineInfo], None]) -> None:
        """Call ``callback(engine, info)`` each time :meth:`refresh` reads the engine's info."""
        self._watchers.append(callback)

    async def refresh(self) -> EngineInfo | None:
        """Read the engine's served models and context window (``GET /v1/models``, which vLLM and
        SGLang both answer with each model's ``max_model_len``) into :attr:`info` and tell the
        watchers (:meth:`watch`). Concurrent calls share one read. Never raises: an engine that
        cannot be reached is tried again after ``info_retry_seconds`` (:attr:`stale`); one that
        answers without a model list keeps :attr:`info` None (logged once).

        Returns:
            the info read, or None.
        """
        if self._reading is None or self._reading.done():
            self._unread = False
            self._reading = asyncio.ensure_future(self._read_info())
        return await asyncio.shield(self._reading)

    async def _read_info(self) -> EngineInfo | None:
        try:
            response = await self._client.get("/v1/models", timeout=self._info_timeout)
        except httpx.HTTPError as exc:
            self._unread = True
            self._next_read = asyncio.get_running_loop().time() + self.info_retry_seconds
            if self._unreachable_logged:
                return None
            self._unreachable_logged = True
            _log.warning("engine %s: cannot read its served models and context window (GET /v1/models: %s: %s); "
                         "they are read when it answers", self.name, type(exc).__name__, exc)
            return None
        try:
            if response.status_code >= 400:
                raise map_status(response.status_code, response.content)
            info = parse_models(response.content)
            info = dataclasses.replace(info, probe_ids=await self.probe_ids(info))
        except EngineError as err:
            _log.warning("engine %s: GET /v1/models did not give its models and context window: %s", self.name,
                         err.message)
            return None
        self.info = info
        self._unreachable_logged = False
        for callback in self._watchers:
            callback(self, info)
        return info

    async def probe_ids(self, info: EngineInfo) -> tuple[int, ...] | None:
        """The engine's token ids for :data:`~recipe.serve.engines.base.VOCABULARY_PROBE`, or None
        when it does not tokenize on request (this default; vLLM's connector asks its ``/tokenize``).
        Never raises."""
        return None

    def attempt(self, req: EngineRequest, grammar: OutputGrammar | None) -> AsyncIterator[EngineDelta]:
        """One upstream request for ``req`` carrying ``grammar`` (None: the plain format fields, if any).

        Raises:
            EngineError: the engine's failures (:meth:`stream`, :func:`map_status`, the stream's own).
        """
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def stream(self, path: str, body: dict[str, Any],
                     headers: Mapping[str, str] | None = None) -> AsyncIterator[httpx.Response]:
        """POST ``body`` to ``path`` (with ``headers`` besides the client's) and yield the streaming
        response (2xx only).

        Raises:
            EngineError: connection refused / unreachable (``unavailable``), connect timeout
                (``timeout``), an HTTP error status (:func:`map_status`).
        """
        request = self._client.build_request("POST", path, content=orjson.dumps(body),
                                             headers={"content-type": "application/json", **(headers or {})})
        try:
            response = await self._client.send(request, stream=True)
        except httpx.ConnectTimeout as exc:
            raise EngineError("timeout", f"engine {self.name}: connect timeout: {exc}", connect_failed=True) from None
        except httpx.ConnectError as exc:  # refused or unreachable: nothing was sent
            raise EngineError("unavailable", f"engine {self.name} unreachable: {type(exc).__name__}: {exc}",
                              connect_failed=True) from None
        except httpx.TransportError as exc:
            raise EngineError("unavailable", f"engine {self.name} unreachable: {type(exc).__name__}: {exc}") from None
        try:
            if response.status_code >= 400:
                try:
                    data = await response.aread()
                except httpx.TransportError:
                    data = b""
                raise map_status(response.status_code, data)
            yield response
        finally:
            await response.aclose()

    async def post(self, path: str, body: dict[str, Any], timeout: float = 2.0) -> None:
        """Fire a small POST (e.g. an abort); failures are ignored."""
        try:
            await self._client.post(path, content=orjson.dumps(body), headers={"content-type": "application/json"},
                                    timeout=timeout)
        except httpx.HTTPError:
            pass

    async def ping(self, timeout: float = 2.0) -> bool:
        """Whether the engine answers ``GET /health`` (vLLM and SGLang serve it) with a status below
        500 within ``timeout`` seconds. Going through the client's pool also closes the pooled
        connections the engine has closed (else they sit in CLOSE-WAIT until reused)."""
        try:
            response = await self._client.get("/health", timeout=timeout)
        except httpx.HTTPError:
            return False
        return response.status_code < 500

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.aclose()
