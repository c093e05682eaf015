"""Bounds on the work one request's JSON Schemas can cause, checked before any of it is done.

A tool's ``parameters`` / ``input_schema`` or a response format's schema drives CPU-heavy work per
request — strict normalisation, meta-schema validation, the output grammar, the demo engine's example
values — whose cost grows with the schema's size and with the sizes it asks for (a ``minItems`` of
30,000,000 is a 30-million-item example). :class:`SchemaBudget` walks every schema of a request once
(iteratively: no recursion limit) and refuses, with a 400 naming the limit and the field path, a
request past any of :class:`~recipe.options.SchemaLimits`: schema nodes in the whole request,
properties of one object, values of one ``enum``, and the lower bounds that force a size
(``minItems``, ``minLength``, ``minProperties``, ``minContains``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recipe.errors import RequestError
from recipe.options import SchemaLimits

__all__ = ["SIZE_BOUNDS", "SchemaBudget"]

#: the keywords whose value is a size the output (or an example of it) must reach
SIZE_BOUNDS = ("minItems", "minLength", "minProperties", "minContains")


class SchemaBudget:
    """The schema limits of one request (:class:`~recipe.options.SchemaLimits`), spent across all of
    its schemas: call :meth:`check` on each before doing anything with it.

    Args:
        limits: the limits (``Options.schema_limits``).
    """

    __slots__ = ("limits", "nodes")

    def __init__(self, limits: SchemaLimits) -> None:
        self.limits = limits
        self.nodes = 0

    def check(self, schema: Any, field: str) -> None:
        """Count ``schema``'s nodes (objects and arrays) against the request's budget and check each
        object's property count, each ``enum``'s size and each size bound.

        Args:
            schema: a JSON value (a schema).
            field: its field path (``tools[0].function.parameters``), the prefix of error paths.

        Raises:
            RequestError: status 400, ``param`` the path of the offending value, the message naming
                the limit (``max_schema_nodes``, ``max_schema_properties``, ``max_enum_values``,
                ``max_size_bound``) and its value.
        """
        lim = self.limits
        # (value, path, schemas_map): schemas_map marks a mapping of names to schemas (``properties``)
        stack: list[tuple[Any, str, bool]] = [(schema, field, False)]
        while stack:
            node, path, schemas_map = stack.pop()
            if _mapping(node):
                self._count(path)
                if not schemas_map:
                    self._check_node(node, path)
                for key, value in node.items():
                    if not schemas_map and key in _DATA:
                        continue  # values, not schemas (bounded by the body size)
                    if _container(value):
                        stack.append((value, f"{path}.{key}", not schemas_map and key in _SCHEMA_MAPS))
            elif isinstance(node, list):
                self._count(path)
                for i, value in enumerate(node):
                    if _container(value):
                        stack.append((value, f"{path}.{i}", False))

    def _check_node(self, node: Mapping[str, Any], path: str) -> None:
        lim = self.limits
        props = node.get("properties")
        if _mapping(props) and len(props) > lim.max_schema_properties:
            raise _refuse(f"{path}.properties", f"{len(props)} properties", "max_schema_properties", lim.max_schema_properties)
        enum = node.get("enum")
        if isinstance(enum, list) and len(enum) > lim.max_enum_values:
            raise _refuse(f"{path}.enum", f"{len(enum)} values", "max_enum_values", lim.max_enum_values)
        for key in SIZE_BOUNDS:
            n = node.get(key)
            if isinstance(n, (int, float)) and not isinstance(n, bool) and n > lim.max_size_bound:
                raise _refuse(f"{path}.{key}", f"{key} {n}", "max_size_bound", lim.max_size_bound)

    def _count(self, path: str) -> None:
        self.nodes += 1
        if self.nodes > self.limits.max_schema_nodes:
            limit = self.limits.max_schema_nodes
            raise RequestError(f"Invalid '{path}': the request's schemas hold more than {limit} objects and arrays, "
                               f"the server's limit (max_schema_nodes).", param=path)


_DATA = frozenset({"enum", "const", "default", "examples"})
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _mapping(value: Any) -> bool:
    """A mapping: a dict by one type check; JSON's other types (a list, a scalar, None) before the
    ABC's check, which costs ~30 type checks."""
    t = type(value)
    return t is dict or (t is not list and t not in _SCALARS and isinstance(value, Mapping))


def _container(value: Any) -> bool:
    """A mapping or a list (JSON's own types by one type check, before the ABC's)."""
    t = type(value)
    return t is dict or t is list or (t not in _SCALARS and isinstance(value, (Mapping, list)))
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})


def _refuse(path: str, got: str, name: str, limit: int) -> RequestError:
    return RequestError(f"Invalid '{path}': {got}, above the server's limit of {limit} ({name}).", param=path)
