"""``python -m recipe``: the ``recipe`` command."""

import sys

from recipe.cli.main import main

sys.exit(main())
