"""Tenants: ``--api-keys FILE`` maps API keys to tenants, each with a prefix-cache salt.

A tenant's salt reaches its block keys (the prefix index namespace and routing) and the engine's
``cache_salt``, and its stored responses live under its own scope, so no tenant ever hits another's
cache or reads another's response. Without a key file the server is open: no key is checked, no salt
is used, one shared scope.

The file is JSON — ``{"KEY": "tenant"}`` or ``{"KEY": {"tenant": "t", "salt": "s"}}`` — or text,
one ``KEY TENANT [SALT]`` per line (``#`` starts a comment). Several keys may share a tenant; a key
listed twice (with the same tenant or not) is an error naming both lines (JSON: both entries), never
the key itself. A tenant without a salt gets one derived from its name (43 base64url characters of SHA-256, the form
vLLM recommends for ``cache_salt``); a salt given in the file must be one the engines take
(:func:`salt_problem`: at most 128 characters, no ``@``, ``/``, ``\\`` or NUL), else the file is refused.
Keys are read from ``Authorization: Bearer KEY`` (OpenAI, and
Anthropic SDKs 2.x) or ``x-api-key: KEY`` (Anthropic 0.x).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Tenant", "Tenants", "derive_salt", "salt_problem", "MAX_SALT_CHARS", "OPEN"]


@dataclass(frozen=True, slots=True)
class Tenant:
    """One tenant: its name (the store scope) and its cache salt (None: no salt, the open server)."""

    name: str
    salt: str | None


#: The tenant of every request on an open server (no key file).
OPEN = Tenant("", None)


def derive_salt(tenant: str) -> str:
    """The default cache salt of ``tenant``: 43 base64url characters (256 bits) of SHA-256."""
    digest = hashlib.sha256(b"recipe/tenant-salt\x00" + tenant.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


#: The longest ``cache_salt`` the engines take (vLLM 0.32 refuses a longer one with a 400).
MAX_SALT_CHARS = 128
#: Characters the engines refuse in a ``cache_salt`` (vLLM 0.32: ``@``, ``/``, ``\``, NUL).
SALT_FORBIDDEN = frozenset("@/\\\x00")


def salt_problem(salt: str) -> str | None:
    """Why an engine would refuse ``salt`` as a ``cache_salt`` (every request of its tenant a 400),
    or None when it takes it: longer than :data:`MAX_SALT_CHARS` characters, or holding one of
    :data:`SALT_FORBIDDEN`. The salt itself is never in the answer. A derived salt
    (:func:`derive_salt`: base64url) always passes."""
    if len(salt) > MAX_SALT_CHARS:
        return f"is {len(salt)} characters long; engines take at most {MAX_SALT_CHARS} (vLLM refuses a longer cache_salt)"
    bad = sorted({c for c in salt if c in SALT_FORBIDDEN})
    if bad:
        names = ", ".join("NUL" if c == "\x00" else repr(c) for c in bad)
        return f"holds {names}, which engines refuse in a cache_salt (vLLM: no '@', '/', '\\' or NUL)"
    return None


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """``json.loads``'s ``object_pairs_hook``: the object as a dict, refusing a name given twice.

    Raises:
        ValueError: a repeated name (its entry numbers, 1-based, in the message; not the name, which
            may be a key).
    """
    first: dict[str, int] = {}
    for n, (name, _) in enumerate(pairs, 1):
        if name in first:
            raise ValueError(f"entries {first[name]} and {n} of an object have the same name (a key listed twice?); "
                             f"list each key once")
        first[name] = n
    return dict(pairs)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class Tenants:
    """API key -> :class:`Tenant` (keys held only as SHA-256 digests).

    Args:
        keys: key -> tenant; None makes the server open.

    Raises:
        ValueError: a tenant's salt the engines would refuse (:func:`salt_problem`).
    """

    def __init__(self, keys: Mapping[str, Tenant] | None = None) -> None:
        for t in (keys or {}).values():
            if t.salt is not None and (why := salt_problem(t.salt)) is not None:
                raise ValueError(f"the salt of tenant {t.name!r} {why}")
        self.open = keys is None
        self._by_digest = {_digest(k): t for k, t in (keys or {}).items()}

    def __len__(self) -> int:
        return len(self._by_digest)

    @classmethod
    def from_file(cls, path: str | Path) -> Tenants:
        """Read a key file (see the module docstring).

        Raises:
            ValueError: unreadable file, bad JSON shape, a bad line, an empty key or tenant, a key
                listed twice (``FILE:N: … first listed on line M``; JSON: its entry numbers), or no key.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"api keys file {path}: {exc}") from None
        keys: dict[str, Tenant] = {}
        if text.lstrip().startswith("{"):
            try:
                data = json.loads(text, object_pairs_hook=_unique_pairs)
            except ValueError as exc:
                raise ValueError(f"api keys file {path}: {exc}") from None
            for key, value in data.items():
                if isinstance(value, str):
                    name, salt = value, None
                elif isinstance(value, dict) and isinstance(value.get("tenant"), str):
                    name, salt = value["tenant"], value.get("salt")
                else:
                    raise ValueError(f"api keys file {path}: key entries are a tenant name or {{\"tenant\", \"salt\"}}")
                keys[key] = cls._tenant(path, key, name, salt)
        else:
            first_line: dict[str, int] = {}
            for n, line in enumerate(text.splitlines(), 1):
                fields = line.split("#", 1)[0].split()
                if not fields:
                    continue
                if len(fields) not in (2, 3):
                    raise ValueError(f"{path}:{n}: want KEY TENANT [SALT]")
                if fields[0] in first_line:
                    raise ValueError(f"{path}:{n}: this key was first listed on line {first_line[fields[0]]}; "
                                     f"list each key once")
                first_line[fields[0]] = n
                keys[fields[0]] = cls._tenant(f"{path}:{n}", fields[0], fields[1], fields[2] if len(fields) == 3 else None)
        if not keys:
            raise ValueError(f"api keys file {path}: no keys")
        return cls(keys)

    @staticmethod
    def _tenant(where: object, key: str, name: str, salt: object) -> Tenant:
        if not key or not name or salt is not None and (not isinstance(salt, str) or not salt):
            raise ValueError(f"{where}: keys and tenants must be non-empty strings, salts non-empty strings")
        if isinstance(salt, str) and (why := salt_problem(salt)) is not None:
            raise ValueError(f"{where}: the salt of tenant {name!r} {why}")
        return Tenant(name, salt if isinstance(salt, str) else derive_salt(name))

    def authenticate(self, authorization: str | None, x_api_key: str | None) -> Tenant | None:
        """The tenant of a request's key (:data:`OPEN` on an open server), None for a missing or
        unknown key."""
        if self.open:
            return OPEN
        key = x_api_key
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() == "bearer" and value.strip():
                key = value.strip()
        if not key:
            return None
        return self._by_digest.get(_digest(key))
