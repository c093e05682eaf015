"""recipe.api.frozen.builder: the fast constructor gives exactly what the dataclass constructor gives."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from recipe.api.frozen import builder
from recipe.api.prepared import EngineParams, PreparedRequest
from recipe.conversation import (
    Conversation,
    OutputConstraint,
    ResponseFormat,
    Sampling,
    ToolChoice,
    ToolDefinition,
    UserMessage,
)


def _same(a: object, b: object) -> None:
    assert type(a) is type(b)
    assert a == b
    for f in dataclasses.fields(a):  # type: ignore[arg-type]
        assert getattr(a, f.name) is getattr(b, f.name), f.name


def test_conversation_positional_and_by_name() -> None:
    values = dict(
        messages=(UserMessage("hi"),), tools=(ToolDefinition("f", None, {}),), tool_choice=ToolChoice("required", "f"),
        thinking=False, reasoning_effort=None, response_format=ResponseFormat("json_object"), max_tokens=7,
        stop=("x",), sampling=Sampling(0.5, 0.25, 3, True, 2), parallel_tool_calls=False,
    )
    build = builder(Conversation)
    _same(build(**values), Conversation(**values))
    _same(build(*values.values()), Conversation(**values))
    assert build(**values).max_tokens == 7 and build(**values).tool_choice.name == "f"


def test_engine_params_and_prepared_request() -> None:
    ep = dict(max_tokens=9, stop_token_ids=(1, 2), temperature=0.0, top_p=1.0, seed=None, logprobs=0,
              constraint=OutputConstraint("regex", "a+"))
    _same(builder(EngineParams)(**ep), EngineParams(**ep))
    prep = {f.name: object() for f in dataclasses.fields(PreparedRequest)}
    built = builder(PreparedRequest)(**prep)
    _same(built, PreparedRequest(**prep))
    assert built.missing_special is prep["missing_special"]


def test_the_result_stays_frozen_and_every_field_is_required() -> None:
    build = builder(Sampling)
    s = build(1.0, 1.0, None, False, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.top_p = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        build(1.0, 1.0)  # defaults are not applied: every field must be given


def test_refuses_classes_it_cannot_build_exactly() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (Mutable, NoSlots, PostInit, OutputConstraint, int):
        with pytest.raises(TypeError):
            builder(cls)
