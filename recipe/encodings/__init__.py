"""Model-family encodings: one package per family, each exporting one :class:`~recipe.encodings.base.Encoding`.

Owns everything a model family decides: rendering a :class:`~recipe.conversation.Conversation` into
prompt segments, the reference encoder for training and evaluation pipelines, the incremental output
parser (completion token ids → :mod:`recipe.output.events`), the special-token table and the stop
tokens. :mod:`recipe.encodings.table` maps encoding names to the records; adding a family means
adding its package and one row there. May import only the hub and the layers below it
(:mod:`recipe.conversation`, :mod:`recipe.prompt`, :mod:`recipe.tokenizer`, :mod:`recipe.jsonfmt`,
:mod:`recipe.errors`, :mod:`recipe.output.events`, :mod:`recipe.output.parsing`) — never the API
adapters, the pipeline or the driver above it.
"""
