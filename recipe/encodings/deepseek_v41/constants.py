"""DeepSeek-V4.1 special-token spellings (deepseek-recipe 0.2.0 ``SpecialToken`` defaults).

V4.1 emits every V4 template token plus ``<｜System｜>`` and the image token. No V4.1
``tokenizer.json`` is public: the ids of the shared tokens below are the embedded DeepSeek-V4
vocabulary's, and the two V4.1-only tokens have no id until a V4.1 vocabulary is supplied.
"""

from __future__ import annotations

from recipe.encodings.deepseek_v4.constants import SPECIAL_IDS as V4_SPECIAL_IDS
from recipe.encodings.deepseek_v4.constants import TEMPLATE_SPECIALS as V4_TEMPLATE_SPECIALS

__all__ = ["SYSTEM", "IMAGE", "REFERENCE_IMAGE", "SPECIAL_IDS", "TEMPLATE_SPECIALS"]

SYSTEM = "<｜System｜>"
#: The image placeholder of deepseek-recipe's V4.1 path (``SpecialToken.Image``).
IMAGE = "<｜image｜>"
#: The image placeholder of DeepSeek's reference encoder (``encoding_dsv41.py`` ``IMAGE_PLACEHOLDER``).
REFERENCE_IMAGE = "<｜deepseek_image｜>"

#: Ids, in the embedded (DeepSeek-V4) vocabulary, of the template tokens V4.1 shares with V4.
SPECIAL_IDS = dict(V4_SPECIAL_IDS)

#: Spellings the V4.1 template emits as special tokens.
TEMPLATE_SPECIALS = frozenset(V4_TEMPLATE_SPECIALS) | {SYSTEM, IMAGE}
