"""A real ZeroMQ KV-event publisher speaking vLLM 0.32's protocol, and an independent oracle of the
block hashes vLLM publishes (for tests/test_kv_events.py, tests/test_serve_pd_fleet.py).

vLLM's ``ZmqEventPublisher`` (``vllm/distributed/kv_events.py``): a PUB socket sending
``(topic, seq as 8 bytes big-endian, msgpack [ts, events, data_parallel_rank])`` and a ROUTER replay
socket answering ``(b"", start seq)`` with ``(b"", topic, seq, payload)`` for every buffered batch
from there on, then ``(b"", b"", -1, b"")``. A data-parallel rank r binds the configured ports plus r.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from typing import Any

import cbor2
import msgpack
import zmq

#: The engines' PYTHONHASHSEED in these tests (a spec's ``kv_hash_seed=``).
SEED = "0"

CLEARED = {"type": "AllBlocksCleared"}


def vllm_hashes(ids: list[int], block_size: int = 16, seed: str = SEED, salt: str | None = None) -> list[int]:
    """vLLM 0.32's event hashes for a prompt (sha256_cbor with cbor2, low 64 bits; salt tagged on
    block 0), written from vLLM's definition, not from recipe's code."""
    parent = hashlib.sha256(cbor2.dumps(seed, canonical=True)).digest()
    out = []
    for b in range(len(ids) // block_size):
        extra = (("cache_salt", salt),) if salt and b == 0 else None
        block = tuple(ids[b * block_size:(b + 1) * block_size])
        parent = hashlib.sha256(cbor2.dumps((parent, block, extra), canonical=True)).digest()
        out.append(int.from_bytes(parent, "big") & ((1 << 64) - 1))
    return out


def stored(ids: list[int], hashes: list[int], parent: int | None = None, medium: str | None = "GPU",
           block_size: int = 16) -> dict[str, Any]:
    """A BlockStored event as vLLM 0.32 publishes it (msgspec's tagged map form): ``ids`` are the
    blocks' token ids, ``block_size`` per hash."""
    return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent, "token_ids": ids,
            "block_size": block_size, "lora_id": None, "medium": medium, "lora_name": None}


def removed(hashes: list[int]) -> dict[str, Any]:
    """A BlockRemoved event (medium GPU)."""
    return {"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}


class Publisher:
    """vLLM's ZmqEventPublisher protocol (see the module docstring) on 127.0.0.1: random ports, or
    ``port`` / ``replay_port``; its batches carry ``rank`` as their ``data_parallel_rank``."""

    def __init__(self, replay: bool = True, buffer: int = 1000, topic: bytes = b"kv", port: int | None = None,
                 replay_port: int | None = None, rank: int = 0) -> None:
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.port = self.pub.bind_to_random_port("tcp://127.0.0.1") if port is None else port
        if port is not None:
            self.pub.bind(f"tcp://127.0.0.1:{port}")
        self.topic, self.rank = topic, rank
        self.seq = 0
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer)
        self.replays: list[int] = []
        self.bad_answers = 0  # replay requests answered with a malformed entry first
        self.router = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if replay:
            self.router = self.ctx.socket(zmq.ROUTER)
            self.router.setsockopt(zmq.LINGER, 0)
            if replay_port is None:
                self.replay_port = self.router.bind_to_random_port("tcp://127.0.0.1")
            else:
                self.replay_port = replay_port
                self.router.bind(f"tcp://127.0.0.1:{replay_port}")
            self._thread = threading.Thread(target=self._serve, daemon=True)
            self._thread.start()

    @property
    def source(self) -> Any:
        from recipe.serve.kv_events import KVEventsSource

        return KVEventsSource(f"tcp://127.0.0.1:{self.port}",
                              f"tcp://127.0.0.1:{self.replay_port}" if self.router is not None else None,
                              self.topic.decode(), SEED)

    @property
    def spec(self) -> str:
        """The engine-spec parameters that name this publisher (``kv_events=…&kv_replay=…&kv_topic=…&kv_hash_seed=…``)."""
        replay = f"&kv_replay=tcp://127.0.0.1:{self.replay_port}" if self.router is not None else ""
        return f"kv_events=tcp://127.0.0.1:{self.port}{replay}&kv_topic={self.topic.decode()}&kv_hash_seed={SEED}"

    def _serve(self) -> None:
        assert self.router is not None
        while not self._stop.is_set():
            if not self.router.poll(20):
                continue
            client, _, start = self.router.recv_multipart()
            first = int.from_bytes(start, "big")
            self.replays.append(first)
            if self.bad_answers:
                self.bad_answers -= 1
                self.router.send_multipart([client, b"", self.topic, b"short", b""])  # a 5-byte sequence frame
            for seq, payload in list(self.buffer):
                if seq >= first:
                    self.router.send_multipart([client, b"", self.topic, seq.to_bytes(8, "big"), payload])
            self.router.send_multipart([client, b"", b"", (-1).to_bytes(8, "big", signed=True), b""])

    def publish(self, *events: dict[str, Any], send: bool = True, payload: bytes | None = None) -> int:
        """Publish one batch (``send=False``: buffered for replay only, as if the PUB frame were lost)."""
        seq = self.seq
        self.seq += 1
        data = payload if payload is not None else msgpack.packb([time.time(), list(events), self.rank])
        self.buffer.append((seq, data))
        if send:
            self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), data])
        return seq

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.pub.close(linger=0)
        if self.router is not None:
            self.router.close(linger=0)
        self.ctx.term()


def consecutive_ports(n: int) -> int:
    """The first of ``n`` consecutive free loopback ports."""
    import socket

    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        try:
            socks = []
            for k in range(n):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", first + k))
            return first
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise AssertionError("no consecutive free ports")


class DPPublishers:
    """The publishers of a replica of ``ranks`` data-parallel ranks: rank r's on the ports plus r (as
    vLLM binds them), each batch naming its rank; ``spec`` names them in an engine spec."""

    def __init__(self, ranks: int) -> None:
        port, replay = consecutive_ports(ranks), consecutive_ports(ranks)
        self.pubs = [Publisher(port=port + k, replay_port=replay + k, rank=k) for k in range(ranks)]
        self.spec = f"kv_events=tcp://127.0.0.1:{port}&kv_replay=tcp://127.0.0.1:{replay}&kv_topic=kv&kv_hash_seed={SEED}" \
                    f"&dp_size={ranks}"

    def close(self) -> None:
        for p in self.pubs:
            p.close()
