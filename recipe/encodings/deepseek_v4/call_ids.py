"""Tool-call ids in deepseek-recipe's shape: ``call_{index:02d}_{20 [A-Za-z0-9]}{4 digits}``.

:func:`make_tool_call_id` draws one id from a ``random.Random``; :class:`IdStream` is the output
parser's source (the same alphabet and uniformity, random bytes drawn in blocks so the i-th id of
a seeded stream never depends on how the output was chunked).
"""

from __future__ import annotations

import random
import re
import string

__all__ = ["IdStream", "make_tool_call_id"]

_ALNUM = string.ascii_letters + string.digits
#: byte -> alphanumeric map for call ids; bytes >= 248 are dropped so every character is uniform.
_ID_MAP = bytes(_ALNUM.encode()[b % 62] if b < 248 else 0 for b in range(256))
_ID_DROP = bytes(range(248, 256))
#: byte -> digit map; bytes >= 250 are dropped.
_DIGIT_MAP = bytes(48 + b % 10 if b < 250 else 0 for b in range(256))
_DIGIT_DROP = bytes(range(250, 256))


def make_tool_call_id(rng: random.Random, index: int) -> str:
    """A deepseek-recipe-shaped call id: ``call_{index:02d}_{20 [A-Za-z0-9]}{4 digits}``.

    Characters are uniform over ``[A-Za-z0-9]`` / ``[0-9]`` (random bytes mapped modulo 62 / 10,
    bytes that would bias the map rejected); the same ``rng`` state always gives the same id.
    """
    while True:
        raw = rng.randbytes(32)
        letters = raw[:24].translate(_ID_MAP, _ID_DROP)
        digits = raw[24:].translate(_DIGIT_MAP, _DIGIT_DROP)
        if len(letters) >= 20 and len(digits) >= 4:
            return f"call_{index:02d}_{letters[:20].decode()}{digits[:4].decode()}"


_ID_PREFIX = [f"call_{i:02d}_" for i in range(100)]
_CHUNK20 = re.compile(".{20}")
_CHUNK4 = re.compile(".{4}")


class IdStream:
    """Call ids ``call_{index:02d}_{20 [A-Za-z0-9]}{4 digits}`` drawn from buffered random bytes.

    Same alphabet and uniformity as :func:`make_tool_call_id`. Random bytes are drawn from
    ``rng`` in blocks of 32 ids, so the i-th id depends only on the seed, never on chunking.
    Call it with the call's index (0-based) to get the next id.
    """

    __slots__ = ("_pool", "_rng")

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._pool: list[str] = []

    def _refill(self) -> None:
        rnd = self._rng.randbytes
        letters = ""
        while len(letters) < 640:
            letters += rnd(720).translate(_ID_MAP, _ID_DROP).decode()
        digits = ""
        while len(digits) < 128:
            digits += rnd(144).translate(_DIGIT_MAP, _DIGIT_DROP).decode()
        pool = list(map(str.__add__, _CHUNK20.findall(letters, 0, 640), _CHUNK4.findall(digits, 0, 128)))
        pool.reverse()
        self._pool = pool

    def __call__(self, index: int) -> str:
        if not self._pool:
            self._refill()
        if index < 100:
            return _ID_PREFIX[index] + self._pool.pop()
        return f"call_{index:02d}_{self._pool.pop()}"

