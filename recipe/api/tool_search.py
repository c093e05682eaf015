"""Responses tool search on DeepSeek-V4.1, as deepseek-recipe 0.2.0's V4.1 conversion reads it
(observed; V4 ignores these items):

- a ``tool_search_call`` item is a call of the tool ``tool_search`` whose arguments are the item's
  ``arguments`` (compact JSON);
- its ``tool_search_output`` is that call's result: the tools found, as compact JSON in
  deepseek-recipe's shape (:func:`result_text`: functions with ``description`` / ``parameters`` /
  ``strict``, a namespace's functions each carrying ``{"namespace": {"name", "description"}}``,
  ``custom`` tools by name, ``web_search`` with its two settings; other hosted tools are refused);
- the functions found join the request's tools as deferred tools, announced by a system message
  after the turn's results (the adapter does that part, :mod:`recipe.api.responses`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recipe.api.responses_wire import CustomTool, FunctionTool, NamespaceTool, ToolSearchCallItem, WebSearchTool
from recipe.conversation import ToolCall
from recipe.errors import RequestError
from recipe.jsonfmt import dumps_compact

__all__ = ["TOOL_SEARCH_NAME", "search_call", "result_text"]

TOOL_SEARCH_NAME = "tool_search"
_LOCATION_KEYS = ("city", "country", "region", "timezone")


def search_call(item: ToolSearchCallItem) -> ToolCall:
    """The ``tool_search`` call of a ``tool_search_call`` item."""
    return ToolCall(item.call_id, TOOL_SEARCH_NAME, dumps_compact(item.arguments))


def _function(t: FunctionTool) -> dict[str, Any]:
    return {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": t.strict}


def _entries(i: int, t: Any) -> list[dict[str, Any]]:
    if isinstance(t, FunctionTool):
        return [_function(t)]
    if isinstance(t, CustomTool):
        return [{"type": "custom", "name": t.name}]
    if isinstance(t, NamespaceTool):
        ns = {"name": t.name, "description": t.description or ""}
        return [{**_function(f), "namespace": ns} for f in t.tools if isinstance(f, FunctionTool)]
    if isinstance(t, WebSearchTool):
        loc = t.user_location
        location = None if loc is None else {k: loc.get(k) for k in _LOCATION_KEYS}
        return [{"type": "web_search", "search_context_size": t.search_context_size, "user_location": location}]
    raise RequestError(f"input[{i}]: the enum variant ResponsesTool::Unsupported cannot be serialized", param=f"input[{i}].tools")


def result_text(i: int, tools: Sequence[Any]) -> str:
    """The result text of the ``tool_search_output`` item ``input[i]``.

    Raises:
        RequestError: a hosted tool other than ``web_search`` (deepseek-recipe's serialisation error).
    """
    return dumps_compact([e for t in tools for e in _entries(i, t)])
