"""The V3-family records as data: one :class:`TemplateFamily` row per family whose prompt is a
published chat template (DeepSeek-V3, R1, V3.1), made into its :class:`~recipe.encodings.base.Encoding`
by :func:`record`; and the parser factory and reference wrapper the pre-V4 records share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from recipe.encodings.v3_shared.constants import BARE, EOS, FENCED, SPECIAL_IDS
from recipe.prompt import encode_prompt
from recipe.tokenizer import load_v3_tokenizer

if TYPE_CHECKING:
    from recipe.conversation import Conversation, ParsingOptions
    from recipe.encodings.base import Encoding, ParserFactory
    from recipe.prompt import Prompt
    from recipe.tokenizer import Tokenizer

__all__ = ["TemplateFamily", "record", "markup_parser", "to_ids", "FENCED", "BARE"]


class TemplateFamily(NamedTuple):
    """One template family's data row.

    Attributes:
        name: the encoding name (``"deepseek_v3"``).
        label: the family's name in error messages (``"DeepSeek-V3"``).
        template: the family's ``render_messages(messages, revision, *, add_generation_prompt,
            continue_final_message, …) -> Prompt`` (its published templates, emulated).
        revision: the reference encoder's default revision.
        api_revision: the revision the API path renders.
        syntax: the output's tool-call syntax (:data:`FENCED` or :data:`BARE`).
        thinking: ``never``, ``always`` or ``switch``; with ``switch`` the API path also passes the
            request's tools (the model card's tools block) and its ``thinking`` to the template.
        parsing: where the family's output starts (``(conversation, default) -> ParsingOptions``).
        models: the API model names mapped to the family by default.
    """

    name: str
    label: str
    template: Callable[..., Prompt]
    revision: str
    api_revision: str
    syntax: str
    thinking: Literal["switch", "always", "never"]
    parsing: Callable[[Conversation, ParsingOptions], ParsingOptions]
    models: tuple[str, ...]


def _api_render(row: TemplateFamily) -> Callable[[Conversation], Prompt]:
    """The API path: ``row``'s API revision rendering the equivalent messages
    (:func:`recipe.encodings.v3_shared.api.messages_of`); a prefix assistant turn is continued."""
    from recipe.conversation import AssistantMessage
    from recipe.encodings.v3_shared.api import messages_of, openai_tools, remap_starts, request_error
    from recipe.encodings.v3_shared.segments import ChatTemplateError

    def render(conv: Conversation) -> Prompt:
        msgs, index = messages_of(conv, row.label)
        last = conv.messages[-1] if conv.messages else None
        cont = type(last) is AssistantMessage and last.prefix
        extra = {"tools": openai_tools(conv.tools) or None, "thinking": conv.thinking} if row.thinking == "switch" else {}
        try:
            prompt = row.template(msgs, row.api_revision, add_generation_prompt=not cont, continue_final_message=cont,
                                  **extra)
        except ChatTemplateError as err:
            raise request_error(err, row.label) from None
        return remap_starts(prompt, index)

    render.__doc__ = (f"The {row.label} prompt of a conversation (template {row.api_revision}). Raises RequestError "
                      "for what the format cannot express (a ``latest_reminder`` message, a template refusal).")
    return render


def record(row: TemplateFamily) -> Encoding:
    """``row``'s family record: the API path, the markup output parser with ``row.syntax``, the
    template as reference encoder (``encode_messages(messages, revision=row.revision, **kwargs)``
    -> text; ``encode_messages_to_ids`` -> token ids, ``tokenizer=`` for another vocabulary), the
    V3 vocabulary and its EOS."""
    from recipe.encodings.base import Encoding

    def prompt_of(messages: Any, revision: str = row.revision, **kwargs: Any) -> Prompt:
        return row.template(messages, revision, **kwargs)

    def encode_messages(messages: Any, revision: str = row.revision, **kwargs: Any) -> str:
        return prompt_of(messages, revision, **kwargs).text

    prompt_of.__name__ = encode_messages.__name__ = "encode_messages"
    encode_messages.__doc__ = f"The prompt text of {row.label}'s chat template ``revision`` (default {row.revision})."
    return Encoding(
        name=row.name,
        render=_api_render(row),
        new_parser=markup_parser(row.syntax),
        encode_messages=encode_messages,
        encode_messages_to_ids=to_ids(prompt_of),
        special_tokens=SPECIAL_IDS,
        stop_tokens=(EOS,),
        models=row.models,
        tokenizer=load_v3_tokenizer,
        renders_tools=row.thinking == "switch",  # (the API path passes tools to the switch templates only)
        renders_response_format=False,
        thinking=row.thinking,
        parsing=row.parsing,
    )


def markup_parser(syntax: str) -> ParserFactory:
    """A parser factory for the ``<｜tool▁calls▁begin｜>`` formats (:mod:`.output`) with ``syntax``."""
    from recipe.encodings.base import lazy

    return lazy("recipe.encodings.v3_shared.output", "OutputParser",
                f"An output parser for the {syntax} ``<｜tool▁calls▁begin｜>`` call syntax.", syntax=syntax)


def to_ids(render: Callable[..., Prompt]) -> Callable[..., list[int]]:
    """``render``'s prompt as token ids under the V3 vocabulary (``tokenizer=`` to use another)."""

    def encode(*args: Any, tokenizer: Tokenizer | None = None, **kwargs: Any) -> list[int]:
        return encode_prompt(tokenizer if tokenizer is not None else load_v3_tokenizer(), render(*args, **kwargs))

    encode.__doc__ = f"Token ids of :func:`{render.__module__}.{render.__name__}` (template specials only)."
    return encode
