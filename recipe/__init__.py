"""recipe: OpenAI / Anthropic API requests -> DeepSeek-V4 prompt token ids, and model output back.

The small public surface::

    import recipe
    prep = recipe.prepare(body)            # Chat Completions body -> PreparedRequest
    prep.token_ids, prep.prompt.text        # what the model sees
    recipe.error_body("chat", err)          # a RequestError in the API's own error shape
    cs = recipe.CompletionStream(prep)      # model output ids -> stream payloads: cs.push(ids), cs.finish()
    recipe.response(prep, ids)              # ... or the whole non-streamed response
    recipe.encode_messages(msgs, "thinking")  # DeepSeek's reference encoder semantics
"""

from recipe.api.errors import error_body
from recipe.completion import CompletionStream, response
from recipe.conversation import Conversation
from recipe.encodings.deepseek_v4.reference import (
    encode_messages,
    encode_messages_to_ids,
)
from recipe.errors import RequestError
from recipe.options import DEFAULT_OPTIONS, Options
from recipe.pipeline import PreparedRequest, prepare
from recipe.prompt import Prompt, SegmentCache
from recipe.tokenizer import IncrementalDecoder, Tokenizer, load_tokenizer

__version__ = "0.1.0"

__all__ = [
    "prepare",
    "CompletionStream",
    "response",
    "PreparedRequest",
    "Options",
    "DEFAULT_OPTIONS",
    "RequestError",
    "error_body",
    "Conversation",
    "Prompt",
    "SegmentCache",
    "Tokenizer",
    "IncrementalDecoder",
    "load_tokenizer",
    "encode_messages",
    "encode_messages_to_ids",
]
