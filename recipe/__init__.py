"""recipe: OpenAI / Anthropic API requests -> DeepSeek prompt token ids, and model output back.

The small public surface::

    import recipe
    prep = recipe.prepare(body)            # Chat Completions body -> PreparedRequest
    prep.token_ids, prep.prompt.text        # what the model sees
    recipe.error_body("chat", err)          # a RequestError in the API's own error shape
    cs = recipe.CompletionStream(prep)      # model output ids -> stream payloads: cs.push(ids), cs.finish()
    recipe.response(prep, ids)              # ... or the whole non-streamed response
    recipe.encode_messages(msgs, "thinking")  # DeepSeek's reference encoder semantics
    recipe.output_grammar(prep).lark        # the turn's grammar for a constraining engine
    recipe.OutputMatcher(prep).mask()       # ... or a token mask on recipe's vocabulary (llguidance)
    recipe.apply_chat_template(msgs, template="R1-0528")  # any DeepSeek template revision

Each name is imported from its package on first use (PEP 562), so ``import recipe`` stays cheap and
a process loads only the parts it touches. Packages, top to bottom (docs/architecture.md):
``cli``, ``serve`` → ``pipeline``, ``output.driver`` → ``api`` → ``encodings``, ``schema``, ``cache``, ``store``
→ ``conversation``, ``prompt``, ``tokenizer``, ``jsonfmt``, ``options``, ``errors``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS = {
    "prepare": "recipe.pipeline",
    "PreparedRequest": "recipe.api.prepared",
    "CompletionStream": "recipe.output.driver",
    "response": "recipe.output.driver",
    "Options": "recipe.options",
    "DEFAULT_OPTIONS": "recipe.options",
    "RequestError": "recipe.errors",
    "error_body": "recipe.api.errors",
    "Conversation": "recipe.conversation",
    "Prompt": "recipe.prompt",
    "SegmentCache": "recipe.prompt",
    "Tokenizer": "recipe.tokenizer",
    "IncrementalDecoder": "recipe.tokenizer",
    "load_tokenizer": "recipe.tokenizer",
    "Encoding": "recipe.encodings.base",
    "get_encoding": "recipe.encodings.table",
    "encode_messages": "recipe.encodings.deepseek_v4.reference",
    "encode_messages_to_ids": "recipe.encodings.deepseek_v4.reference",
    "output_grammar": "recipe.schema.constrain",
    "OutputGrammar": "recipe.schema.turn",
    "OutputMatcher": "recipe.schema.constrain",
    "OutputCheck": "recipe.schema.constrain",
    "check_output": "recipe.schema.constrain",
    "apply_chat_template": "recipe.encodings.chat_template",
    "ChatTemplateError": "recipe.encodings.chat_template",
    "load_v3_tokenizer": "recipe.tokenizer",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:  # for type checkers and IDEs; at run time each name loads on first use
    from recipe.api.errors import error_body
    from recipe.api.prepared import PreparedRequest
    from recipe.conversation import Conversation
    from recipe.encodings.base import Encoding
    from recipe.encodings.chat_template import ChatTemplateError, apply_chat_template
    from recipe.encodings.deepseek_v4.reference import encode_messages, encode_messages_to_ids
    from recipe.encodings.table import get_encoding
    from recipe.errors import RequestError
    from recipe.options import DEFAULT_OPTIONS, Options
    from recipe.output.driver import CompletionStream, response
    from recipe.pipeline import prepare
    from recipe.prompt import Prompt, SegmentCache
    from recipe.schema.constrain import OutputCheck, OutputMatcher, check_output, output_grammar
    from recipe.schema.turn import OutputGrammar
    from recipe.tokenizer import IncrementalDecoder, Tokenizer, load_tokenizer, load_v3_tokenizer


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first access (then it is a plain module attribute)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recipe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
