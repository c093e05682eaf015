"""The prepared request: what ``prepare`` hands to the engine side and to the output encoders.

Plain data only. Defined in the api layer (not in :mod:`recipe.pipeline`) so that the API output
encoders, which read it, never import the pipeline above them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from recipe.conversation import Conversation, OutputConstraint, ParsingOptions
from recipe.prompt import Prompt

__all__ = ["Api", "EngineParams", "PreparedRequest"]

Api = Literal["chat", "responses", "messages"]


@dataclass(frozen=True, slots=True)
class EngineParams:
    """Everything an engine needs besides the prompt ids, resolved and engine-ready.

    Attributes:
        max_tokens: completion-token limit, always set (:func:`recipe.api.common.resolve_max_tokens`).
        stop_token_ids: ids that end the output (the encoding's EOS); text stop sequences are not
            here: recipe matches them on the decoded output and ends the stream itself.
        temperature, top_p: sampling after the thinking rules (thinking forces 1.0 / the V4 top_p).
        seed: sampling seed or None.
        logprobs: alternatives per token to report (0 = only the sampled token's), None = off.
        constraint: what a constrained decoder should enforce, or None. Connectors translate it;
            the grammar of :func:`recipe.output_grammar` supersedes it once available.
    """

    max_tokens: int
    stop_token_ids: tuple[int, ...]
    temperature: float
    top_p: float
    seed: int | None
    logprobs: int | None
    constraint: OutputConstraint | None


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A request ready for the engine.

    Attributes:
        api: which API the body was read as.
        model: the requested model name.
        encoding: encoding name from the model table (``deepseek_v4``).
        request: the validated pydantic request model.
        conversation: the API-neutral conversation.
        prompt: rendered segments (``prompt.text`` is the prompt string).
        token_ids: prompt token ids (specials only where the template put them).
        parsing: how to parse the completion.
        output_constraint: what a constrained decoder should enforce, or None; its ``grammar`` is the
            whole turn's :class:`~recipe.schema.turn.OutputGrammar` (docs/constrained-decoding.md).
        stream: the client asked for a stream.
        engine: max tokens, stop token ids, sampling and the output constraint as one bundle for
            the engine (:class:`EngineParams`); None only for hand-built requests.
    """

    api: Api
    model: str
    encoding: str
    request: Any
    conversation: Conversation
    prompt: Prompt
    token_ids: list[int]
    parsing: ParsingOptions
    output_constraint: OutputConstraint | None
    stream: bool
    engine: EngineParams | None = None

    def conversion(self) -> dict[str, Any]:
        """The conversion settings as a JSON-ready dict (the keys of the parity vectors' ``conversion``):
        encoding, thinking, reasoning_effort, tool_choice, response_format, output_constraint
        (``{"kind", "schema"}`` or None), parse flags, stop_sequences, max_tokens and sampling."""
        conv, oc = self.conversation, self.output_constraint
        return {
            "encoding": self.encoding,
            "thinking": conv.thinking,
            "reasoning_effort": conv.reasoning_effort,
            "tool_choice": conv.tool_choice.mode,
            "response_format": conv.response_format.type,
            "output_constraint": None if oc is None else {"kind": oc.kind, "schema": oc.schema},
            "parse_tool_calls": self.parsing.parse_tool_calls,
            "starts_in_tool_calls": self.parsing.starts_in_tool_calls,
            "parse_json_output": self.parsing.parse_json_output,
            "thinking_stage": self.parsing.thinking_stage,
            "stop_sequences": list(conv.stop),
            "max_tokens": conv.max_tokens,
            "temperature": conv.sampling.temperature,
            "top_p": conv.sampling.top_p,
            "logprobs": conv.sampling.logprobs,
            "top_logprobs": conv.sampling.top_logprobs,
            "seed": conv.sampling.seed,
        }
