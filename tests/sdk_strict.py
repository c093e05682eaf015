"""The openai SDK's own pydantic models validate every Responses payload the tests produce.

The SDK parses server responses leniently (``construct``: missing or mistyped fields pass); a client
that validates, or a later SDK, does not. So for the whole test session every event the Responses
encoder returns (``open``, ``on_events``, ``close``) is checked with the event's model
(``ResponseCompletedEvent.model_validate`` …, picked by ``type``) and every non-streamed response
with ``Response.model_validate``: a missing required field (``usage.input_tokens_details
.cache_write_tokens`` in openai 3.57) or a wrong type fails the test that produced it. The
encoder's results are returned unchanged.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

_EVENT_MODELS: dict[str, Any] = {}


def event_models() -> dict[str, Any]:
    """Event ``type`` -> the openai SDK's model class for it (from the ``ResponseStreamEvent`` union)."""
    if not _EVENT_MODELS:
        from openai.types.responses import ResponseStreamEvent

        union = typing.get_args(ResponseStreamEvent)[0]
        for cls in typing.get_args(union):
            for t in typing.get_args(cls.model_fields["type"].annotation):
                _EVENT_MODELS[t] = cls
    return _EVENT_MODELS


def validate_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validate each event with its SDK model (raises pydantic's ValidationError); returns ``events``."""
    models = event_models()
    for e in events:
        models[e["type"]].model_validate(e)
    return events


def validate_response(resp: dict[str, Any]) -> dict[str, Any]:
    """Validate a ``response`` object with the SDK's ``Response`` model; returns ``resp``."""
    from openai.types.responses import Response

    Response.model_validate(resp)
    return resp


def strict_responses_encoder() -> Iterator[None]:
    """Wrap ``ResponsesEncoder``'s payload methods with the validators while the generator is suspended."""
    from recipe.api.responses_output import ResponsesEncoder

    names = ("open", "on_events", "close", "response")
    orig = {n: getattr(ResponsesEncoder, n) for n in names}
    check = {"open": validate_events, "on_events": validate_events, "close": validate_events,
             "response": validate_response}

    def wrap(name: str) -> Any:
        method = orig[name]

        def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            return check[name](method(self, *args, **kwargs))

        checked.__doc__ = method.__doc__
        return checked

    for n in names:
        setattr(ResponsesEncoder, n, wrap(n))
    try:
        yield
    finally:
        for n in names:
            setattr(ResponsesEncoder, n, orig[n])
