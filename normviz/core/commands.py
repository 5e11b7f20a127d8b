"""The registry of ``python -m normviz`` subcommands, below every module that adds one.

    from normviz.core.commands import subcommand
    subcommand("corpus", "statistics over a text file")((add_arguments, run))

A module that adds a subcommand imports this registry, never :mod:`normviz.cli` (which sits above them all
and imports them: ``normviz.cli.PLUGINS``)."""

from __future__ import annotations

from typing import Callable

SUBCOMMANDS: dict[str, tuple[Callable, Callable, str]] = {}  # name -> (add_arguments(parser), run(args) -> int, help)


def subcommand(name: str, help: str):
    """``subcommand(name, help)((add_arguments, run))`` registers ``name``; returns the pair unchanged."""

    def wrap(fns):
        add, run = fns
        SUBCOMMANDS[name] = (add, run, help)
        return fns

    return wrap


__all__ = ["SUBCOMMANDS", "subcommand"]
