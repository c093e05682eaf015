"""The prepared request: what ``prepare`` hands to the engine side and to the output encoders.

Plain data only. Defined in the api layer (not in :mod:`recipe.pipeline`) so that the API output
encoders, which read it, never import the pipeline above them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from recipe.conversation import Conversation, ExtraSampling, ImageSource, OutputConstraint, ParsingOptions
from recipe.encodings.table import get_encoding
from recipe.prompt import Prompt
from recipe.tokenizer import MissingSpecialTokenError

__all__ = ["Api", "EngineParams", "PreparedRequest"]

Api = Literal["chat", "responses", "messages"]


@dataclass(frozen=True, slots=True)
class EngineParams:
    """Everything an engine needs besides the prompt ids, resolved and engine-ready.

    Attributes:
        max_tokens: completion-token limit, always set (:func:`recipe.api.common.resolve_max_tokens`).
        stop_token_ids: ids that end the output (the encoding's EOS, then the request's own
            ``stop_token_ids``); text stop sequences are not here: recipe matches them on the decoded output and ends the stream itself.
        temperature, top_p: sampling after the thinking rules (thinking forces 1.0 / the V4 top_p).
        seed: sampling seed or None.
        logprobs: alternatives per token to report (0 = only the sampled token's), None = off.
        constraint: what a constrained decoder should enforce, or None. Connectors translate it;
            the grammar of :func:`recipe.output_grammar` supersedes it once available.
        extra: the engines' further sampling fields as the request set them (``top_k``, ``min_p``,
            penalties, ``logit_bias``, ``min_tokens``, ``n``: :class:`~recipe.conversation.ExtraSampling`),
            or None; its ``stop_token_ids`` are already in :attr:`stop_token_ids`.
    """

    max_tokens: int
    stop_token_ids: tuple[int, ...]
    temperature: float
    top_p: float
    seed: int | None
    logprobs: int | None
    constraint: OutputConstraint | None
    extra: ExtraSampling | None = None


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
        ids: the prompt token ids, or None when the vocabulary lacks a special token the
            template emits (DeepSeek-V4.1 with the embedded DeepSeek-V4 vocabulary); read them
            through :attr:`token_ids`.
        parsing: how to parse the completion.
        output_constraint: what a constrained decoder should enforce, or None; its ``grammar`` is the
            whole turn's :class:`~recipe.schema.turn.OutputGrammar` (docs/constrained-decoding.md).
        stream: the client asked for a stream.
        engine: max tokens, stop token ids, sampling and the output constraint as one bundle for
            the engine (:class:`EngineParams`); None for hand-built requests and when there are no
            token ids (``ids`` is None).
        missing_special: the special token the vocabulary lacks when ``ids`` is None.
        notes: what the model was not shown as the request sent it (:mod:`recipe.api.input_notes`),
            added to the response's ``recipe.notes`` by the output driver.
    """

    api: Api
    model: str
    encoding: str
    request: Any
    conversation: Conversation
    prompt: Prompt
    ids: list[int] | None
    parsing: ParsingOptions
    output_constraint: OutputConstraint | None
    stream: bool
    engine: EngineParams | None = None
    missing_special: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def token_ids(self) -> list[int]:
        """Prompt token ids (specials only where the template put them). Always a list for a family
        whose vocabulary is complete (every DeepSeek-V4 request with the embedded vocabulary).

        Raises:
            MissingSpecialTokenError: the vocabulary lacks :attr:`missing_special` (its message
                names the token and how to supply the family's vocabulary).
        """
        if self.ids is None:
            raise MissingSpecialTokenError(self.missing_special or "", self.encoding, get_encoding(self.encoding).vocabulary_hint)
        return self.ids

    @property
    def token_ids_note(self) -> str | None:
        """Why there are no token ids (the :class:`MissingSpecialTokenError` message), or None."""
        if self.ids is not None:
            return None
        return str(MissingSpecialTokenError(self.missing_special or "", self.encoding, get_encoding(self.encoding).vocabulary_hint))

    @property
    def image_sources(self) -> tuple[ImageSource, ...]:
        """The images of the prompt's image tokens, in prompt order (V4.1; empty otherwise)."""
        return self.prompt.images

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
