"""``--option KEY=VALUE`` for the subcommands: typed and checked by :mod:`normviz.core.settings` once every map family
is registered (each family's ``<family>_budget_s`` is declared when it registers)."""

from __future__ import annotations


def parse_options(items: list[str]) -> dict:
    """The ``--option`` items as a typed dict; an unknown name or ill-typed value: one-line NormvizError."""
    from .. import methods  # noqa: F401  registers the families, and with them their budget options
    from ..core import settings

    return settings.parse_options(items)
