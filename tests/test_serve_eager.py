"""Eager task start (recipe.serve.eager) and its use by ``recipe serve``'s HTTP protocol: a request's
handler runs its first step in the callback that read the request, as its own task.

The unit tests start coroutines from a loop callback on asyncio's loop and on uvloop; the
end-to-end tests run real uvicorn servers on 127.0.0.1 (port 0) over raw sockets.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
from typing import Any

import pytest
import uvloop
from serve_support import running

from recipe.serve.eager import EAGER_START, start_eagerly
from recipe.serve.transport import uvicorn_config

pytestmark = pytest.mark.skipif(not EAGER_START, reason="this Python has no asyncio.tasks._enter_task")

LOOPS = ["asyncio", "uvloop"]
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("eager_test_var", default="unset")


def _run(loop_kind: str, main: Any) -> Any:
    loop = uvloop.new_event_loop() if loop_kind == "uvloop" else asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def _from_callback(make: Any) -> asyncio.Future:
    """Calls ``make()`` from a plain loop callback (outside any task); a future of what it returned."""
    loop = asyncio.get_running_loop()
    out = loop.create_future()
    loop.call_soon(lambda: out.set_result(make()))
    return out


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_the_first_step_runs_before_start_returns_as_the_task_in_the_given_context(loop_kind):
    seen: dict[str, Any] = {}

    async def coro() -> str:
        seen["task"] = asyncio.current_task()
        seen["var"] = VAR.get()
        VAR.set("set in the first step")
        await asyncio.sleep(0.01)
        seen["later"] = VAR.get()
        seen["task later"] = asyncio.current_task()
        return "result"

    async def main() -> None:
        ctx = contextvars.copy_context()
        ctx.run(VAR.set, "the task's")

        def make() -> Any:
            task = start_eagerly(asyncio.get_running_loop(), coro(), ctx)
            seen["ran before return"] = "task" in seen
            seen["caller's var"] = VAR.get()
            return task

        task = await _from_callback(make)
        assert await task == "result"
        assert seen["ran before return"] is True
        assert seen["task"] is task and seen["task later"] is task
        assert seen["var"] == "the task's" and seen["later"] == "set in the first step"
        assert seen["caller's var"] == "unset"  # the step ran in the task's context, not the caller's
        assert ctx[VAR] == "set in the first step"
        assert asyncio.current_task() is not task

    _run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_coroutine_that_ends_or_fails_in_its_first_step_gives_the_task_that_outcome(loop_kind):
    async def returns() -> int:
        return 7

    async def raises() -> None:
        raise LookupError("first step")

    async def raises_later() -> None:
        await asyncio.sleep(0)
        raise KeyError("later")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        t1 = await _from_callback(lambda: start_eagerly(loop, returns(), contextvars.copy_context()))
        t2 = await _from_callback(lambda: start_eagerly(loop, raises(), contextvars.copy_context()))
        t3 = await _from_callback(lambda: start_eagerly(loop, raises_later(), contextvars.copy_context()))
        assert await t1 == 7
        with pytest.raises(LookupError, match="first step"):
            await t2
        with pytest.raises(KeyError, match="later"):
            await t3
        done: list[Any] = []
        t4 = await _from_callback(lambda: start_eagerly(loop, returns(), contextvars.copy_context()))
        t4.add_done_callback(done.append)
        assert t4 in asyncio.all_tasks(loop) or t4.done()
        await t4
        await asyncio.sleep(0)
        assert done == [t4]

    _run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_cancel_before_the_tasks_first_scheduled_step_reaches_the_coroutine_where_it_waits(loop_kind):
    events: list[str] = []

    async def waits() -> str:
        events.append("first step")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            events.append("cancelled at its await")
            raise
        return "not reached"

    async def cleans_up() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "handled"
        return "not reached"

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def start_and_cancel(coro: Any) -> Any:
            task = start_eagerly(loop, coro, contextvars.copy_context())
            task.cancel()  # before the loop ran the task's first step
            return task

        t1 = await _from_callback(lambda: start_and_cancel(waits()))
        with pytest.raises(asyncio.CancelledError):
            await t1
        assert t1.cancelled() and events == ["first step", "cancelled at its await"]
        t2 = await _from_callback(lambda: start_and_cancel(cleans_up()))
        assert await t2 == "handled"

    _run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_cancel_before_the_tasks_first_scheduled_step_cancels_what_the_first_step_awaits(loop_kind):
    children: list[asyncio.Task] = []

    async def awaits_a_task() -> None:
        children.append(asyncio.get_running_loop().create_task(asyncio.sleep(0.05)))
        await children[0]

    async def awaits_a_gather() -> None:
        children.extend(asyncio.get_running_loop().create_task(asyncio.sleep(0.05)) for _ in range(2))
        await asyncio.gather(*children)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for make_coro, n in ((awaits_a_task, 1), (awaits_a_gather, 2)):
            def start_and_cancel(make_coro: Any = make_coro) -> Any:
                task = start_eagerly(loop, make_coro(), contextvars.copy_context())
                task.cancel("stop")  # before the loop ran the task's first step
                return task

            children.clear()
            task = await _from_callback(start_and_cancel)
            with pytest.raises(asyncio.CancelledError) as caught:
                await task
            assert caught.value.args == ("stop",)
            await asyncio.sleep(0.1)
            assert len(children) == n and all(c.cancelled() for c in children)  # as a task's cancel does

        other = asyncio.new_event_loop()  # a future of another loop is not this task's to cancel
        foreign = other.create_future()

        async def awaits_foreign() -> None:
            await foreign

        task = await _from_callback(lambda: start_and_cancel(awaits_foreign))
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not foreign.done()
        other.close()

    _run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_coroutine_that_ended_in_its_first_step_keeps_its_result_through_a_cancel(loop_kind):
    async def returns() -> str:
        return "kept"

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def make() -> Any:
            task = start_eagerly(loop, returns(), contextvars.copy_context())
            task.cancel()
            return task

        task = await _from_callback(make)
        assert await task == "kept"

    _run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_first_step_can_use_timeouts_and_bare_yields_and_wait_on_a_future_resolved_before_the_task_runs(loop_kind):
    async def uses_timeout() -> str:
        await asyncio.sleep(0)  # a bare yield in the first step
        try:
            await asyncio.wait_for(asyncio.sleep(10), 0.01)  # needs the current task
        except asyncio.TimeoutError:
            return "timed out"
        return "not reached"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        async def waits_on(f: asyncio.Future) -> Any:
            return await f

        def make() -> Any:
            task = start_eagerly(loop, waits_on(fut), contextvars.copy_context())
            fut.set_result("resolved before the task's first scheduled step")
            return task

        task = await _from_callback(make)
        assert await task == "resolved before the task's first scheduled step"
        t2 = await _from_callback(lambda: start_eagerly(loop, uses_timeout(), contextvars.copy_context()))
        assert await t2 == "timed out"

    _run(loop_kind, main)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_the_task_shows_its_coroutine_as_a_plainly_created_task_does(loop_kind):
    import inspect

    async def handler() -> None:
        await asyncio.sleep(0.05)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = await _from_callback(lambda: start_eagerly(loop, handler(), contextvars.copy_context()))
        await asyncio.sleep(0)
        coro = task.get_coro()
        assert "coro=<test_the_task_shows_its_coroutine_as_a_plainly_created_task_does.<locals>.handler() running at " in repr(task)
        assert [f.f_code.co_name for f in task.get_stack()] == ["handler"]
        assert inspect.getcoroutinestate(coro) == inspect.CORO_SUSPENDED and coro.cr_await is not None
        with pytest.raises(AttributeError):
            coro.gi_frame  # noqa: B018 - only a coroutine's own attributes are passed on
        await task
        assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED

    _run(loop_kind, main)


def _wrapping_factory(log: list[str]) -> Any:
    """A task factory that runs each coroutine inside one of its own (as tracing integrations do)."""

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task:
        async def wrapper() -> Any:
            log.append("wrapper")
            return await coro

        return asyncio.Task(wrapper(), loop=loop, **kwargs)

    return factory


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_on_a_loop_with_a_task_factory_the_factory_makes_the_task_and_each_step_runs_once(loop_kind):
    log: list[str] = []

    async def two_steps() -> str:
        log.append("first step")
        await asyncio.sleep(0.001)
        log.append("second step")
        return "done"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(_wrapping_factory(log))
        ctx = contextvars.copy_context()
        task = await _from_callback(lambda: start_eagerly(loop, two_steps(), ctx))
        assert await task == "done"
        assert log == ["wrapper", "first step", "second step"]
        loop.set_task_factory(None)

    _run(loop_kind, main)


def test_start_eagerly_inside_a_running_task_is_refused_by_asyncio():
    async def nothing() -> None:
        return None

    async def main() -> None:
        coro = nothing()
        with pytest.raises(RuntimeError):
            start_eagerly(asyncio.get_running_loop(), coro, contextvars.copy_context())
        await asyncio.sleep(0)
        coro.close()

    asyncio.run(main())


# ----------------------------------------------------------------------------- through uvicorn


async def _recording_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with how its task was started (``eager``/``lazy``), whether it is uvicorn's task, and
    the context variable as the request found it; ``/set`` sets it, ``/boom`` fails before any await."""
    task = asyncio.current_task()
    how = "eager" if type(task.get_coro()).__name__ == "_Resumed" else "lazy"
    found = VAR.get()
    if scope["path"] == "/boom":
        raise ValueError("the handler failed in its first step")
    if scope["path"] == "/set":
        VAR.set("leaked?")
    m = await receive()
    out = b"%s|%s|%d" % (how.encode(), found.encode(), len(m.get("body", b"")))
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


def _exchange(url: str, *requests: bytes) -> list[tuple[bytes, bytes]]:
    """Send each request on one keep-alive connection in turn; (status line, body) of each answer."""
    import socket

    host, port = url.rsplit("/", 1)[1].split(":")
    out = []
    with socket.create_connection((host, int(port)), timeout=10) as s:
        buf = b""
        for req in requests:
            s.sendall(req)
            while b"\r\n\r\n" not in buf:
                buf += _recv(s)
            head, buf = buf.split(b"\r\n\r\n", 1)
            low = head.lower()
            n = int(low.split(b"content-length: ")[1].split(b"\r\n")[0]) if b"content-length: " in low else 0
            while len(buf) < n:
                buf += _recv(s)
            out.append((head.split(b"\r\n")[0], buf[:n]))
            buf = buf[n:]
    return out


def _recv(s: Any) -> bytes:
    data = s.recv(65536)
    if not data:
        raise ConnectionError("the server closed the connection")
    return data


def _req(path: str, body: bytes = b"") -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (path.encode(), len(body)) + body


@pytest.mark.parametrize("loop_kind", LOOPS)
@pytest.mark.parametrize("impl", ["httptools", "h11"])
def test_requests_start_eagerly_with_httptools_lazily_with_h11_in_fresh_contexts_and_a_failing_first_step_is_a_500(impl, loop_kind):
    with running(_recording_app, config_of=lambda a, **kw: uvicorn_config(a, http=impl, **kw), loop=loop_kind,
                 lifespan="off") as srv:
        answers = _exchange(srv.url, _req("/set", b"abc"), _req("/get", b"x" * 5000))
        boom = _exchange(srv.url, _req("/boom"))
        other = _exchange(srv.url, _req("/get"))
    how = b"eager" if impl == "httptools" else b"lazy"
    assert answers[0] == (b"HTTP/1.1 200 OK", how + b"|unset|3")
    assert answers[1] == (b"HTTP/1.1 200 OK", how + b"|unset|5000")  # nothing leaked from /set
    assert boom[0][0] == b"HTTP/1.1 500 Internal Server Error"
    assert other == [(b"HTTP/1.1 200 OK", how + b"|unset|0")]


async def _app_setting_a_task_factory(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Sets a wrapping task factory at lifespan startup; a request's answer awaits a timer first."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                asyncio.get_running_loop().set_task_factory(_wrapping_factory([]))
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    m = await receive()
    await asyncio.sleep(0.001)
    out = b"ok|%d" % len(m.get("body", b""))
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_an_app_that_sets_a_task_factory_is_answered_as_plain_uvicorn_answers_it(loop_kind):
    with running(_app_setting_a_task_factory, config_of=lambda a, **kw: uvicorn_config(a, http="httptools", **kw),
                 loop=loop_kind, lifespan="on") as srv:
        answers = _exchange(srv.url, _req("/", b"abc"), _req("/", b"de") + _req("/", b"f"))
    assert answers == [(b"HTTP/1.1 200 OK", b"ok|3"), (b"HTTP/1.1 200 OK", b"ok|2")]


async def _app_with_a_job_after_its_answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers ``ok``; ``/linger`` keeps its task running for a second after the answer."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})
    if scope["path"] == "/linger":
        await asyncio.sleep(1.0)


def _until_closed(s: Any, limit: float = 3.0) -> bytes:
    """What the server sends until it closes the connection (or ``limit`` seconds pass)."""
    import socket

    s.settimeout(limit)
    buf = b""
    try:
        while data := s.recv(65536):
            buf += data
    except socket.timeout:
        pass
    return buf


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_limit_concurrency_counts_a_request_started_in_the_same_read_as_uvicorn_does(loop_kind):
    # two tasks outlive their connections; a third connection's first request makes three tasks,
    # so the request pipelined behind it is over limit_concurrency=3: 503, as under uvicorn's own start
    import socket
    import time

    with running(_app_with_a_job_after_its_answer, config_of=lambda a, **kw: uvicorn_config(a, http="httptools", **kw),
                 loop=loop_kind, lifespan="off", limit_concurrency=3) as srv:
        host, port = srv.url.rsplit("/", 1)[1].split(":")
        for _ in range(2):
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(b"GET /linger HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                assert _until_closed(s).endswith(b"ok")
        time.sleep(0.2)  # both connections closed; their tasks still run
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
            buf = _until_closed(s, 0.5)  # the 503 closes the connection
    assert re.findall(rb"HTTP/1\.1 (\d+)", buf) == [b"200", b"503"]
