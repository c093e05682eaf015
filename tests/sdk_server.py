"""A real HTTP server on 127.0.0.1 that answers the three APIs with recipe, for the official SDKs.

``POST /v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` run ``prepare`` on the body and
answer with :class:`CompletionStream` SSE (one token id per push, as an engine would) or the
non-streamed :func:`response`. The model's output comes from a callback. Every request body is
recorded. One module-lifetime thread, socket timeouts, stops by itself at the end of the block.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from recipe.api.errors import error_body
from recipe.output.driver import CompletionStream, response
from recipe.errors import RequestError
from recipe.pipeline import prepare

PATHS = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}

#: (api, request body, request headers) -> (completion token ids, backend finish, per-token logprobs or None)
Model = Callable[[str, dict, Any], "tuple[list[int], str, list | None]"]


@dataclass
class Server:
    """A running server: ``url`` (no trailing slash), recorded ``requests`` as (api, body) pairs."""

    url: str
    requests: list[tuple[str, dict]] = field(default_factory=list)
    errors: list[tuple[str, dict, dict]] = field(default_factory=list)


@contextmanager
def serve(model: Model, prepare_kw: dict | None = None, **stream_kw: Any) -> Iterator[Server]:
    """Run a server for the duration of the ``with`` block.

    Args:
        model: produces the completion for a request.
        prepare_kw: extra keyword arguments for ``prepare`` (e.g. ``options``, ``store``).
        stream_kw: keyword arguments for ``CompletionStream`` / ``response`` (ids, seeds, usage).
    """
    state = Server(url="")
    after: list[Callable[[str, dict, dict], None]] = stream_kw.pop("after_response", [])

    class Handler(BaseHTTPRequestHandler):
        timeout = 10

        def _send(self, status: int, data: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            api = PATHS.get(self.path.split("?")[0])
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            state.requests.append((api, body))
            try:
                prep = prepare(body, api, **(prepare_kw or {}))
            except RequestError as err:
                payload = error_body(api, err)
                state.errors.append((api, body, payload))
                self._send(err.status, json.dumps(payload).encode(), "application/json")
                return
            ids, fin, lps = model(api, body, self.headers)
            if body.get("stream"):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                cs = CompletionStream(prep, **stream_kw)
                payloads = cs.start()
                self.wfile.write(cs.sse(payloads))
                for k, i in enumerate(ids):
                    if cs.finished:
                        break
                    out = cs.push([i], None if lps is None else lps[k : k + 1])
                    payloads += out
                    self.wfile.write(cs.sse(out))
                out = cs.finish(fin)
                payloads += out
                self.wfile.write(cs.sse(out))
                final = _final_object(api, payloads)
            else:
                final = response(prep, ids, finish=fin, logprobs=lps, **stream_kw)
                self._send(200, json.dumps(final).encode(), "application/json")
            for hook in after:
                hook(api, body, final)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _final_object(api: str, payloads: list[dict]) -> dict | None:
    """The response object a stream ends with (Responses: the last event's ``response``)."""
    if api == "responses":
        for p in reversed(payloads):
            if isinstance(p, dict) and isinstance(p.get("response"), dict):
                return p["response"]
    return None


def openai_view(obj: Any) -> dict:
    """An openai SDK object as a comparable dict: ``model_dump(mode="json", exclude_none=True)`` with
    the SDK-only parse helper fields (``parsed``, ``parsed_arguments``) dropped at every level."""
    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in ("parsed", "parsed_arguments")}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return clean(obj.model_dump(mode="json", exclude_none=True))


def by_scenario(outputs: Callable[[str], "tuple[list[int], str]"], logprobs: Callable[[list[int]], list] | None = None) -> Model:
    """A model that answers the scenario named in the ``x-scenario`` header; logprobs when the
    request asked (Chat ``logprobs``) and ``logprobs`` builds them."""

    def model(api: str, body: dict, headers: Any) -> tuple[list[int], str, list | None]:
        ids, fin = outputs(headers["x-scenario"])
        lps = logprobs(ids) if logprobs is not None and body.get("logprobs") else None
        return ids, fin, lps

    return model
