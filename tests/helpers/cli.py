"""Running the command line in-process, as a shell would see it."""

from __future__ import annotations

from normviz import cli


def run(argv) -> int:
    """``normviz ARGV``'s exit status: what ``cli.main`` returns, or the code of the SystemExit it raises
    (argparse's own refusals, --help)."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return exc.code
