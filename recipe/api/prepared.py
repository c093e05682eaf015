"""The prepared request: what ``prepare`` hands to the engine side and to the output encoders.

Plain data only. Defined in the api layer (not in :mod:`recipe.pipeline`) so that the API output
encoders, which read it, never import the pipeline above them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from recipe.conversation import Conversation, OutputConstraint, ParsingOptions
from recipe.prompt import Prompt

__all__ = ["Api", "PreparedRequest"]

Api = Literal["chat", "responses", "messages"]


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
        output_constraint: what a constrained decoder should enforce, or None.
        stream: the client asked for a stream.
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
