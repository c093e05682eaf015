"""What the assistant turn may contain (:class:`TurnSpec`) and its grammar (:class:`OutputGrammar`).

Family-neutral records: :func:`turn_spec` reads a conversation and its parsing options into a
:class:`TurnSpec`; a model family's grammar builder (the ``grammar`` field of its
:class:`~recipe.encodings.base.Encoding` record, :class:`GrammarBuilder`) turns the spec into a
:class:`~recipe.schema.grammar_ir.Grammar`; :mod:`recipe.schema.constrain` prints, caches and wraps
the result into an :class:`OutputGrammar`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from recipe.conversation import Conversation, ParsingOptions
from recipe.schema.strict import normalize_strict_response_schema

if TYPE_CHECKING:
    from recipe.schema.grammar_ir import Grammar
    from recipe.tokenizer import Tokenizer

__all__ = ["Args", "GrammarBuilder", "GrammarParts", "OutputGrammar", "ToolSpec", "TurnSpec", "turn_spec"]

#: How tool arguments are constrained: ``schema`` (each tool's JSON Schema), ``syntax`` (any
#: well-formed parameters), ``auto`` (schema for ``strict`` tools, syntax for the others).
Args = Literal["auto", "schema", "syntax"]
StartsIn = Literal["reasoning", "answer", "tool_block"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the turn may call: its name, its parameters schema, and whether arguments follow it."""

    name: str
    parameters: Any
    schema_args: bool


@dataclass(frozen=True, slots=True)
class TurnSpec:
    """The assistant turn the model is about to write, starting where the prompt ends.

    Attributes:
        starts_in: ``reasoning`` (the prompt ends inside the reasoning block), ``answer`` (after it,
            or thinking off), ``tool_block`` (the prompt opened the tool-call block).
        continuation: the answer continues an assistant prefix (its format cannot be enforced).
        tools: the tools that may be called (empty: no calls).
        calls: ``none`` | ``auto`` (content or calls) | ``required`` (calls only).
        named: one tool is forced (``tools`` holds only it).
        parallel: more than one call per turn is allowed.
        answer: ``text`` | ``json`` | ``regex`` — the format of a content answer.
        answer_schema: the JSON Schema of a ``json`` answer (``{"type": "object"}`` for json_object).
        answer_regex: the pattern of a ``regex`` answer.
    """

    starts_in: StartsIn
    continuation: bool
    tools: tuple[ToolSpec, ...]
    calls: Literal["none", "auto", "required"]
    named: bool
    parallel: bool
    answer: Literal["text", "json", "regex"]
    answer_schema: Any = None
    answer_regex: str | None = None

    @property
    def mode(self) -> str:
        """``content`` | ``json`` | ``regex`` | ``tools_auto`` | ``tools_required`` | ``tools_named`` |
        ``tools_or_json``."""
        if self.calls == "none":
            return "content" if self.answer == "text" else self.answer
        if self.calls == "required":
            return "tools_named" if self.named else "tools_required"
        return "tools_or_json" if self.answer == "json" else "tools_auto"

    def canonical(self) -> bytes:
        """Every field as compact JSON (key order kept: property order is part of the grammar); the
        cache key's input."""
        fields = [self.starts_in, self.continuation, [[t.name, t.parameters, t.schema_args] for t in self.tools],
                  self.calls, self.named, self.parallel, self.answer, self.answer_schema, self.answer_regex]
        try:
            return orjson.dumps(fields, default=repr)
        except TypeError:  # an integer beyond 64 bits in a schema
            return json.dumps(fields, ensure_ascii=False, separators=(",", ":"), default=repr).encode()


@dataclass(frozen=True, slots=True)
class GrammarParts:
    """What a family's grammar builder returns: the grammar and what it could not enforce."""

    grammar: Grammar
    unenforced: tuple[str, ...] = ()


#: ``builder(spec, tokenizer) -> GrammarParts`` (the ``grammar`` field of an Encoding record).
GrammarBuilder = Callable[["TurnSpec", "Tokenizer"], GrammarParts]


@dataclass(frozen=True, slots=True)
class OutputGrammar:
    """The grammar of one assistant turn, in the formats engines accept (frozen; cached by ``key``).

    Attributes:
        lark: llguidance Lark for the completion after the prompt (special tokens as ``<[id]>``;
            ends with EOS). vLLM's ``guidance`` backend takes it as ``structured_outputs.grammar``.
        structural_tag: xgrammar structural-tag JSON text (``{"type":"structural_tag","format":…}``,
            markers as ``token`` formats by id), for vLLM's ``structured_outputs.structural_tag`` and
            SGLang's ``structural_tag``. The turn's end is the engine's stop token (EOS).
        mode: see :attr:`TurnSpec.mode`.
        starts_in: where the prompt left off (:attr:`TurnSpec.starts_in`).
        key: hex SHA-256 of the spec, the encoding, the vocabulary and the grammar version.
        encoding: the model family (``deepseek_v4``).
        args: how arguments were constrained (``auto`` | ``schema`` | ``syntax``).
        tool_names: the tools the turn may call.
        stop_token_ids: the ids that end the turn (EOS).
        unenforced: schema keywords the grammar does not enforce (``tool/path: keyword``).
    """

    lark: str
    structural_tag: str
    mode: str
    starts_in: str
    key: str
    encoding: str
    args: str
    tool_names: tuple[str, ...]
    stop_token_ids: tuple[int, ...]
    unenforced: tuple[str, ...] = ()

    def structural_tag_dict(self) -> dict[str, Any]:
        """:attr:`structural_tag` as a new dict."""
        return json.loads(self.structural_tag)

    def engine_fields(self, engine: Literal["vllm", "vllm-guidance", "sglang"] = "vllm") -> dict[str, Any]:
        """The request fields that carry this grammar to an engine (merge them into its body).

        ``vllm``: ``{"structured_outputs": {"structural_tag": …}, "stop_token_ids": […]}`` (xgrammar
        backend); ``vllm-guidance``: the Lark as ``structured_outputs.grammar`` (guidance backend);
        ``sglang``: ``{"structural_tag": …, "stop_token_ids": […]}`` for ``sampling_params``.

        Raises:
            ValueError: an unknown engine name.
        """
        stops = list(self.stop_token_ids)
        if engine == "vllm":
            return {"structured_outputs": {"structural_tag": self.structural_tag}, "stop_token_ids": stops}
        if engine == "vllm-guidance":
            return {"structured_outputs": {"grammar": self.lark}, "stop_token_ids": stops}
        if engine == "sglang":
            return {"structural_tag": self.structural_tag, "stop_token_ids": stops}
        raise ValueError(f"unknown engine {engine!r}; expected vllm, vllm-guidance or sglang")


_STARTS = {"reasoning": "reasoning", "reasoning_continuation": "reasoning", "content_continuation": "answer", None: "answer"}


def turn_spec(conv: Conversation, parsing: ParsingOptions, args: Args = "auto") -> TurnSpec:
    """The :class:`TurnSpec` of ``conv``'s next assistant turn (as prepared: tools already filtered by
    the tool choice, thinking resolved). ``args`` picks schema or syntax arguments per tool.

    Raises:
        ValueError: ``args`` is not ``auto``, ``schema`` or ``syntax``.
    """
    if args not in ("auto", "schema", "syntax"):
        raise ValueError(f"args must be 'auto', 'schema' or 'syntax', not {args!r}")
    starts: StartsIn = _STARTS.get(parsing.thinking_stage, "answer")  # type: ignore[assignment]
    if parsing.starts_in_tool_calls and conv.tools:
        starts = "tool_block"
    tools = tuple(
        ToolSpec(t.name, t.parameters if t.enforced is None else t.enforced, args == "schema" or (args == "auto" and bool(t.strict)))
        for t in conv.tools
    )
    calls = "none" if not tools else ("required" if conv.tool_choice.mode == "required" else "auto")
    continuation = parsing.thinking_stage == "content_continuation"
    rf = conv.response_format
    answer, schema, regex = "text", None, None
    if not continuation:
        if rf.type == "json_object":
            answer, schema = "json", {"type": "object"}
        elif rf.type == "json_schema":
            answer = "json"
            if rf.enforced is not None:
                schema = rf.enforced
            else:
                schema = normalize_strict_response_schema(rf.schema) if rf.strict else rf.schema
        elif rf.type == "regex" and rf.regex is not None:
            answer, regex = "regex", rf.regex
    return TurnSpec(
        starts_in=starts,
        continuation=continuation,
        tools=tools,
        calls=calls,  # type: ignore[arg-type]
        named=calls == "required" and conv.tool_choice.name is not None,
        parallel=conv.parallel_tool_calls,
        answer=answer,  # type: ignore[arg-type]
        answer_schema=schema,
        answer_regex=regex,
    )
