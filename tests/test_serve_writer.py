"""FrameWriter: the first frame goes out at once, a burst is joined into one write, a paused stream
still gets what was held (within two windows), order is kept, and window 0 never holds."""

from __future__ import annotations

import asyncio
import time

from recipe.serve.writer import FrameWriter


def _run(window: float, script):
    sent: list[tuple[float, bytes]] = []

    async def send(message):
        if message.get("body") or not message.get("more_body", False):
            sent.append((time.perf_counter(), message.get("body", b"")))

    async def main():
        w = FrameWriter(send, window)
        t0 = time.perf_counter()
        await script(w)
        await w.close()
        return t0

    t0 = asyncio.run(main())
    return [(t - t0, b) for t, b in sent]


def test_first_frame_at_once_then_a_burst_is_one_write():
    async def script(w):
        for i in range(10):
            await w.write(b"%d," % i)

    sent = _run(0.05, script)
    assert [b for _, b in sent] == [b"0,", b"1,2,3,4,5,6,7,8,9,"]  # the rest at close, joined, with the end


def test_a_paused_stream_gets_its_held_frames_within_two_windows():
    async def script(w):
        await w.write(b"a")
        await w.write(b"b")  # held: the window has not passed
        await asyncio.sleep(0.3)  # the engine pauses
        await w.write(b"c")

    sent = _run(0.05, script)
    assert [b for _, b in sent] == [b"a", b"b", b"c", b""]
    assert 0.05 <= sent[1][0] < 0.25  # the timer sent "b" during the pause, not at "c"


def test_frames_spaced_wider_than_the_window_are_never_held():
    async def script(w):
        for i in range(4):
            await w.write(b"%d" % i)
            await asyncio.sleep(0.03)

    sent = _run(0.01, script)
    assert [b for _, b in sent] == [b"0", b"1", b"2", b"3", b""]
    gaps = [b[0] - a[0] for a, b in zip(sent, sent[1:4])]
    assert all(g >= 0.025 for g in gaps)


def test_window_zero_sends_every_frame():
    async def script(w):
        for i in range(5):
            await w.write(b"%d" % i)

    assert [b for _, b in _run(0.0, script)] == [b"0", b"1", b"2", b"3", b"4", b""]


def test_close_sends_what_is_held_and_the_last_frame_with_the_end_in_one_message():
    messages = []

    async def send(message):
        messages.append((message["body"], message["more_body"]))

    async def main():
        w = FrameWriter(send, 0.05)
        await w.write(b"a")  # at once
        await w.write(b"b")  # held
        await w.close(b"c")

    asyncio.run(main())
    assert messages == [(b"a", True), (b"bc", False)]

    messages.clear()

    async def not_ended():
        w = FrameWriter(send, 0.05)
        await w.write(b"a")
        await w.close(b"b", end=False)  # sent, the body left open

    asyncio.run(not_ended())
    assert messages == [(b"a", True), (b"b", True)]


def test_a_busy_loop_widens_the_window_and_keeps_every_byte_in_order():
    bodies = []

    async def send(message):
        bodies.append(message["body"])

    async def main():
        w = FrameWriter(send, 0.005)
        for i in range(40):
            await w.write(b"%d," % i)
            time.sleep(0.008)  # a CPU-bound server: the loop is late, frames come 8 ms apart (> the window)
            await asyncio.sleep(0)  # the loop turns: the lag probe fires, late
        await w.close()

    asyncio.run(main())
    frames = [b for b in bodies if b]
    assert b"".join(frames) == b"".join(b"%d," % i for i in range(40))
    # a fixed 5 ms window would send all 40 on their own; twice the ~8 ms lag joins frames
    assert len(frames) <= 30
    assert frames[0] == b"0,"  # the first frame is never held
