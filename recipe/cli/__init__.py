"""The ``recipe`` command: one module per subcommand, the terminal views, and their shared helpers.

Owns the command line only: argument parsing (:mod:`recipe.cli.main`), the subcommands
(:mod:`~recipe.cli.render`, :mod:`~recipe.cli.tokenize`, :mod:`~recipe.cli.complete`,
:mod:`~recipe.cli.cache`), reading inputs and printing results (:mod:`~recipe.cli.common`,
:mod:`~recipe.cli.view`). It is the top layer: it may import every other package of recipe, and
none of them imports it. The command line imports only the module of the subcommand it runs
(:data:`recipe.cli.main.COMMANDS`), and heavy modules are imported inside the command that needs
them, so ``recipe tokenize`` never loads the request path, ``recipe render`` never loads the output
path, and rich is loaded only for styled (terminal) output.
"""
