"""The ``recipe`` command's entry point: the argument parser and the exit-status contract.

Exit status: 0 ok; 1 a rejected request or unreadable input (the API's error JSON on stdout with
``--json``, a one-line reason on stderr); 2 usage errors; 3 ``complete --check`` could not check. Never a traceback (``RECIPE_DEBUG=1``
shows one for an internal error).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from recipe.cli.common import Failure, Usage, load_prompt_ids
from recipe.errors import RequestError
from recipe.tokenizer import TokenIdError, TokenizerError

__all__ = ["main", "entry", "build_parser", "COMMANDS"]

#: Subcommand -> its module (``register(subparsers)`` adds its parser), in ``recipe --help`` order.
#: A command line that names a command imports only that command's module.
COMMANDS = {
    "render": "recipe.cli.render",
    "tokenize": "recipe.cli.tokenize",
    "complete": "recipe.cli.complete",
    "grammar": "recipe.cli.grammar",
    "cache": "recipe.cli.cache",
    "serve": "recipe.cli.serve",
    "models": "recipe.cli.models",
}


def _version() -> str:
    """The installed distribution's version (``dsrecipe``: PyPI's ``recipe`` is another project; the
    import name is ``recipe``), else the package's own ``__version__`` (a source tree, or an environment
    installed under the former distribution name)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsrecipe")
    except PackageNotFoundError:
        from recipe import __version__

        return __version__


class _VersionAction(argparse.Action):
    """``--version``: looks the installed version up only when asked (importlib.metadata is slow to load)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"recipe {_version()}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Usage(message)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argparse parser of the ``recipe`` command (subcommands render, tokenize, complete, grammar,
    cache, serve, models). With ``argv``, only the commands it names are added (their modules imported),
    or all of them when it names none (help, usage errors list every command)."""
    p = _Parser(prog="recipe", description="DeepSeek prompts from OpenAI / Anthropic API requests.")
    p.add_argument("--tokenizer", metavar="PATH", help="tokenizer.json to use (default: the model family's embedded vocabulary: DeepSeek-V4's, or DeepSeek-V3's for V3 … V3.2)")
    p.add_argument("--version", action=_VersionAction)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    named = [name for name in COMMANDS if argv is not None and name in argv]
    for name in named or COMMANDS:
        module = importlib.import_module(COMMANDS[name])
        if name == "cache":
            module.register(sub, load_prompt_ids)
        else:
            module.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``recipe`` console script; returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    parser = build_parser(args)
    try:
        for arg in args:
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                raise Usage(f"argument {arg.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8") from None
        ns = parser.parse_args(args)
        if getattr(ns, "run", None) is None:
            parser.print_help(sys.stderr)
            return 2
        return ns.run(ns)
    except Usage as exc:
        print(f"recipe: {exc}", file=sys.stderr)
        return 2
    except Failure as exc:
        print(f"recipe: {exc}", file=sys.stderr)
        return 1
    except RequestError as exc:
        print(f"recipe: request rejected ({exc.stage}): {exc}", file=sys.stderr)
        return 1
    except (TokenizerError, TokenIdError) as exc:
        print(f"recipe: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: still one line, never a traceback (RECIPE_DEBUG=1 shows it)
        if os.environ.get("RECIPE_DEBUG"):
            raise
        print(f"recipe: internal error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return 1


def entry() -> None:
    """The console script (and ``python -m recipe``): :func:`main`, then flush the output and end the
    process at once — the interpreter's tear-down (freeing a 128k-entry vocabulary, the pydantic
    models, every module) would add about a fifth to a short command. Nothing is lost: the output
    is flushed first, and recipe registers no exit handlers."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):  # a closed pipe: nothing more to say
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
