"""Conversations a server holds for clients: stored responses behind ``previous_response_id``
(:mod:`recipe.store.conversations`: the store protocol, memory and SQLite backends, expanding a
request with its stored history).

Imports only :mod:`recipe.errors` and :mod:`recipe.jsonfmt`; the pipeline uses it to expand a
Responses request before conversion.
"""
