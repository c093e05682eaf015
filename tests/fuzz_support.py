"""Shared pieces of the request fuzzers: arbitrary JSON and mutations of valid request bodies."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import strategies as st

any_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=25,
)


def paths(obj: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every location in a JSON value, as key/index tuples (the root is ``()``)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths(v, prefix + (i,))


@st.composite
def mutated(draw, bodies: st.SearchStrategy, tricky: Sequence[Any] = (), retype: Sequence[str] = ()) -> Any:
    """A body from ``bodies`` with 1-4 mutations: a field deleted, replaced by arbitrary JSON or by
    one of ``tricky``, an object's ``type`` changed to one of ``retype``, or a list item duplicated."""
    body = copy.deepcopy(draw(bodies))
    ops = ["delete", "replace", "dup"] + (["tricky"] if tricky else []) + (["retype"] if retype else [])
    for _ in range(draw(st.integers(1, 4))):
        where = [p for p in paths(body) if p]
        if not where:
            break
        path = draw(st.sampled_from(where))
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(ops))
        if op == "delete":
            del parent[path[-1]]
        elif op == "replace":
            parent[path[-1]] = draw(any_json)
        elif op == "tricky":
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(list(tricky))))
        elif op == "retype" and isinstance(parent[path[-1]], dict):
            parent[path[-1]]["type"] = draw(st.sampled_from(list(retype)))
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
    return body
