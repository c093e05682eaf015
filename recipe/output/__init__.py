"""Model output: output events, the parser pieces every family shares, and the driver.

- :mod:`recipe.output.events` — the API-neutral output events (reasoning / text deltas, tool-call
  start / argument delta / end, finish) and SSE helpers. Bottom layer: imports only
  :mod:`recipe.jsonfmt`; the encodings' parsers and the API encoders both build on it.
- :mod:`recipe.output.parsing` — marker and stop-sequence matchers, the JSON-object filter: parser
  pieces with no model-family knowledge (imports only events and jsonfmt).
- :mod:`recipe.output.driver` — :class:`~recipe.output.driver.CompletionStream` and
  :func:`~recipe.output.driver.response`: one request's completion ids → its family's parser →
  its API's encoder. Top of the library, beside the pipeline: it may import the API encoders, the
  encoding table and the schema checks; nothing below imports it.
"""
