"""Prefix caching: block keys of prompt token ids and what is done with them.

- :mod:`recipe.cache.keys` — the key schemes (native SHA-256 / XXH3 with tenant salts, vLLM's
  ``sha256_cbor``), incremental :class:`~recipe.cache.keys.KeyChain`; the SHA-256 chains run in the
  optional C extension ``recipe.cache._chainhash`` when it was built;
- :mod:`recipe.cache.usage` — cached-token accounting and each API's usage fields;
- :mod:`recipe.cache.index` — the prefix index (memory or Redis), replica scoring, trace simulation;
- :mod:`recipe.cache.diff` — where two consecutive prompts stop sharing a prefix.

A leaf concern: imports nothing from recipe outside this package; the API encoders import only
:mod:`recipe.cache.usage`.
"""
