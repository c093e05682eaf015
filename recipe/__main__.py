"""``python -m recipe``: the ``recipe`` command."""

from recipe.cli.main import entry

entry()
