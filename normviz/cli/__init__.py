"""Command line: ``normviz SUBCOMMAND …`` (= ``python -m normviz SUBCOMMAND …``).

One module per subcommand in this package (``export``, ``explain``, ``corpus``, ``align``, ``app`` …), each
registering itself with :func:`normviz.core.commands.subcommand` when imported; :func:`main` imports every module of
the package (a new subcommand is a new file here, nothing else to edit) and those named in :data:`PLUGINS`
(subcommands that live elsewhere). Usage mistakes and :class:`normviz.core.errors.NormvizError` are one line on
stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from ..core import settings
from ..core.commands import SUBCOMMANDS
from ..core.errors import NormvizError

# the order of ``--help``; modules of this package not named here follow in alphabetical order
ORDER = ("export", "explain", "corpus", "align", "faithfulness", "app")
# modules outside this package that register subcommands when imported (absent ones are skipped)
PLUGINS: tuple[str, ...] = ()


class _Parser(argparse.ArgumentParser):
    """Usage mistakes on one line (``error: … (see --help)``), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message.splitlines()[0] if message else 'bad arguments'} (see {self.prog} --help)\n")


def subcommand_modules() -> list[str]:
    """This package's subcommand modules, in the order of ``--help``."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [f"{__name__}.{n}" for n in sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))]


def _load_subcommands() -> None:
    for mod in subcommand_modules():
        importlib.import_module(mod)
    for mod in PLUGINS:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and not exc.name.startswith(mod.rsplit(".", 1)[0]):
                raise


def build_parser() -> argparse.ArgumentParser:
    _load_subcommands()
    parser = _Parser(
        prog="normviz",
        description="How much each token really contributes to every other token "
        "inside a transformer: maps, explanations, corpus statistics, "
        "alignments, and the app.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (add, _run, help_text) in SUBCOMMANDS.items():
        add(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passthrough", False):  # only a subcommand that passes arguments on takes them
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        run = SUBCOMMANDS[args.command][1]
        return run(args, extra) if getattr(args, "passthrough", False) else run(args)
    except NormvizError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not a user mistake: still one line (NORMVIZ_DEBUG=1 for the traceback)
        if settings.flag("NORMVIZ_DEBUG"):
            raise
        print(
            f"error: unexpected {type(exc).__name__}: {_one_line(exc)} (set NORMVIZ_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


def _one_line(exc: BaseException, limit: int = 600) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"


__all__ = ["ORDER", "PLUGINS", "build_parser", "main", "subcommand_modules"]
