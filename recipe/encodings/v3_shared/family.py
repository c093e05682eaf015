"""The V3-family records as data: one :class:`TemplateFamily` row per family whose prompt is a
published chat template (DeepSeek-V3, R1, V3.1: :data:`ROWS`), made into its
:class:`~recipe.encodings.base.Encoding` by :func:`record`; their thinking rules; and the parser
factory and reference wrapper the pre-V4 records share. A row names its template module, which is
imported with the family's package (``recipe.encodings.deepseek_v3`` …), not with this table."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from dataclasses import replace

from recipe.encodings.v3_shared.constants import BARE, FENCED, SPECIAL_IDS
from recipe.prompt import encode_prompt
from recipe.tokenizer import load_v3_tokenizer

if TYPE_CHECKING:
    from recipe.conversation import Conversation, ParsingOptions
    from recipe.encodings.base import Encoding, ParserFactory
    from recipe.prompt import Prompt
    from recipe.tokenizer import Tokenizer

__all__ = ["TemplateFamily", "ROWS", "record", "markup_parser", "to_ids", "FENCED", "BARE"]


class TemplateFamily(NamedTuple):
    """One template family's data row.

    Attributes:
        name: the encoding name (``"deepseek_v3"``).
        label: the family's name in error messages (``"DeepSeek-V3"``).
        template: the module whose ``render_messages(messages, revision, *, add_generation_prompt,
            continue_final_message, …) -> Prompt`` emulates the family's published templates.
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
    template: str
    revision: str
    api_revision: str
    syntax: str
    thinking: Literal["switch", "always", "never"]
    parsing: Callable[[Conversation, ParsingOptions], ParsingOptions]
    models: tuple[str, ...]


def _template(row: TemplateFamily) -> Callable[..., Prompt]:
    import importlib

    return importlib.import_module(row.template).render_messages  # type: ignore[no-any-return]


def _api_render(row: TemplateFamily) -> Callable[[Conversation], Prompt]:
    """The API path: ``row``'s API revision rendering the equivalent messages
    (:func:`recipe.encodings.v3_shared.api.messages_of`); a prefix assistant turn is continued."""
    from recipe.conversation import AssistantMessage
    from recipe.encodings.v3_shared.api import messages_of, openai_tools, remap_starts, request_error
    from recipe.encodings.v3_shared.segments import ChatTemplateError

    template = _template(row)

    def render(conv: Conversation) -> Prompt:
        msgs, index = messages_of(conv, row.label)
        last = conv.messages[-1] if conv.messages else None
        cont = type(last) is AssistantMessage and last.prefix
        extra = {"tools": openai_tools(conv.tools) or None, "thinking": conv.thinking} if row.thinking == "switch" else {}
        try:
            prompt = template(msgs, row.api_revision, add_generation_prompt=not cont, continue_final_message=cont,
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
    from recipe.encodings.base import family_record

    template = _template(row)

    def prompt_of(messages: Any, revision: str = row.revision, **kwargs: Any) -> Prompt:
        return template(messages, revision, **kwargs)

    def encode_messages(messages: Any, revision: str = row.revision, **kwargs: Any) -> str:
        return prompt_of(messages, revision, **kwargs).text

    prompt_of.__name__ = encode_messages.__name__ = "encode_messages"
    encode_messages.__doc__ = f"The prompt text of {row.label}'s chat template ``revision`` (default {row.revision})."
    return family_record(
        f"recipe.encodings.{row.name}", _api_render(row), markup_parser(row.syntax), SPECIAL_IDS, load_v3_tokenizer,
        row.models, encode_messages=encode_messages, encode_messages_to_ids=to_ids(prompt_of), thinking=row.thinking,
        renders_tools=row.thinking == "switch",  # (the API path passes tools to the switch templates only)
        renders_response_format=False, parsing=row.parsing,
    )


def no_thinking(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """DeepSeek-V3: output is never reasoning, and the prompt never opens a tool-call block."""
    return replace(default, thinking_stage=None, starts_in_tool_calls=False)


def always_thinking(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """DeepSeek-R1: output starts in its reasoning (the model writes ``<think>`` itself), whatever the
    request said; a prefix turn continues the reasoning when its rendered text (cut after its last
    ``</think>``) has an open ``<think>``, else the answer. The prompt never opens a tool-call block."""
    from recipe.conversation import AssistantMessage

    stage = "reasoning"
    last = conv.messages[-1] if conv.messages else None
    if type(last) is AssistantMessage and last.prefix:
        shown = (last.content or "").split("</think>")[-1]
        stage = "reasoning_continuation" if "<think>" in shown else "content_continuation"
    return replace(default, thinking_stage=stage, starts_in_tool_calls=False)


def thinking_switch(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """DeepSeek-V3.1: reasoning only when the prompt ends ``<｜Assistant｜><think>`` (thinking on, not
    after a tool result: the template adds no generation prompt there and the model answers without
    thinking); a prefix turn continues its reasoning in thinking mode (the template writes its
    content after ``<think>``) and its answer otherwise."""
    from recipe.conversation import AssistantMessage, ToolMessage

    last = conv.messages[-1] if conv.messages else None
    stage = None
    if type(last) is AssistantMessage and last.prefix:
        after_user = len(conv.messages) < 2 or type(conv.messages[-2]) is not ToolMessage
        stage = "reasoning_continuation" if conv.thinking and after_user else None
    elif conv.thinking and type(last) is not ToolMessage:
        stage = "reasoning"
    return replace(default, thinking_stage=stage, starts_in_tool_calls=False)


#: The template families' rows, by encoding name (each family's package makes its record from its row).
ROWS: dict[str, TemplateFamily] = {row.name: row for row in (
    TemplateFamily("deepseek_v3", "DeepSeek-V3", "recipe.encodings.deepseek_v3.template", "V3-0324", "V3-0324", FENCED,
                   "never", no_thinking,
                   ("deepseek-v3", "deepseek-v3-0324", "DeepSeek-V3", "DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3",
                    "deepseek-ai/DeepSeek-V3-0324")),
    TemplateFamily("deepseek_r1", "DeepSeek-R1", "recipe.encodings.deepseek_r1.template", "R1-0528", "R1-0528", FENCED,
                   "always", always_thinking,
                   ("deepseek-r1", "deepseek-r1-0528", "DeepSeek-R1", "DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1",
                    "deepseek-ai/DeepSeek-R1-0528")),
    # V3.2-Exp shares V3.1's format; the API path renders its revision (a new assistant turn after
    # every turn but a tool result, where the first V3.1 template adds none after an assistant turn)
    TemplateFamily("deepseek_v3_1", "DeepSeek-V3.1", "recipe.encodings.deepseek_v3_1.template", "V3.1", "V3.2-Exp", BARE,
                   "switch", thinking_switch,
                   ("deepseek-v3.1", "deepseek-v3.1-terminus", "deepseek-v3.2-exp", "DeepSeek-V3.1",
                    "DeepSeek-V3.1-Terminus", "DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.1",
                    "deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek-ai/DeepSeek-V3.2-Exp")),
)}


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
