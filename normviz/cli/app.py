"""``normviz app [--warm [MODELS]] [--public] [--procs N] [--port P] [streamlit run arguments…]``: start the app.

One Streamlit server (``streamlit run app.py``, with the project's ``.streamlit/config.toml``: loopback only) or,
with ``--procs N``, N servers behind nginx with sticky sessions (``scripts/serve_many.sh``). The command replaces
itself with the server (``exec``), so that the server's environment is set before torch loads:
``OMP_WAIT_POLICY=PASSIVE`` (idle OpenMP threads sleep), ``NORMVIZ_PUBLIC`` (``--public``) and, in public mode,
one thread per pass; ``NORMVIZ_WARM`` (``--warm``) for :mod:`normviz.ui.kit.warm`. Settings: docs/settings.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from ..core.commands import subcommand
from ..core.errors import NormvizError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--warm",
        nargs="?",
        const="1",
        default=None,
        metavar="MODELS",
        help="before the first visitor: load these models (comma-separated, e.g. smollm2,minilm; "
        "alone: the default model) and analyse the default view of each",
    )
    p.add_argument(
        "--public",
        action="store_true",
        help="a public demo (NORMVIZ_PUBLIC=1): no error details or server paths, embedded models only, "
        "one thread per pass",
    )
    p.add_argument(
        "--procs",
        type=int,
        default=None,
        metavar="N",
        help="N app processes behind nginx with sticky sessions (scripts/serve_many.sh; needs nginx)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="the port (default: Streamlit's 8501; with --procs: 8500, the servers on the next N)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the command that would start, and stop")
    p.set_defaults(passthrough=True)  # the arguments it does not know go to 'streamlit run'
    p.epilog = (
        "Other arguments go to 'streamlit run' (e.g. --server.address 0.0.0.0 to serve other machines, "
        "better behind a proxy). The environment variables of docs/settings.md apply."
    )


def app_dir() -> Path:
    """The folder holding app.py, app_pages/ and .streamlit/: the source checkout (an editable install) or
    ``<prefix>/share/normviz`` (a ``pip install .``)."""
    here = Path(__file__).resolve().parents[2]
    for root in (here, Path(sys.prefix) / "share" / "normviz"):
        if (root / "app.py").is_file() and (root / "app_pages").is_dir():
            return root
    raise NormvizError(
        f"the app's files (app.py, app_pages/) are not beside the package ({here}) nor in "
        f"{Path(sys.prefix) / 'share' / 'normviz'}; install normviz from its source folder "
        "(pip install '.[app]')."
    )


def command(args, extra: list[str]) -> tuple[list[str], dict[str, str], Path]:
    """The command line, environment and working folder of the server(s)."""
    import importlib.util

    for name in ("streamlit", "plotly"):
        if importlib.util.find_spec(name) is None:
            raise NormvizError(
                f"the app needs {name}: pip install 'normviz[app]' (or pip install -r requirements.txt)."
            )
    if args.procs is not None and not 1 <= args.procs <= 64:
        raise NormvizError(f"--procs {args.procs}: give 1 to 64 processes.")
    if args.port is not None and not 1 <= args.port <= 65535:
        raise NormvizError(f"--port {args.port}: give a port from 1 to 65535.")
    root = app_dir()
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if args.public:
        env["NORMVIZ_PUBLIC"] = "1"
    from ..core import settings

    if settings.flag("NORMVIZ_PUBLIC", env):  # as app.py does when it is the first to load torch
        for threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
            env.setdefault(threads, "1")
    if args.warm is not None:
        env["NORMVIZ_WARM"] = args.warm
    warm = settings.env("NORMVIZ_WARM", env) not in ("", "0")
    if args.procs is not None:
        script = root / "scripts" / "serve_many.sh"
        if not script.is_file():
            raise NormvizError(f"--procs needs {script}, which is missing.")
        if extra:
            raise NormvizError(f"--procs starts its servers itself; {extra[0]!r} is not passed on.")
        env["PYTHON"] = sys.executable
        bash = shutil.which("bash") or "/bin/bash"
        return [bash, str(script), str(args.procs), str(args.port or 8500)], env, root
    port = ["--server.port", str(args.port)] if args.port is not None else []
    runner = ["-m", "normviz.ui.kit.warm"] if warm else ["-m", "streamlit", "run"]
    return [sys.executable, *runner, "app.py", *port, *extra], env, root


def run(args, extra: list[str] | None = None) -> int:
    argv, env, root = command(args, list(extra or []))
    if args.dry_run:
        print(f"cd {root} && " + " ".join(argv))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    os.chdir(root)
    os.execve(argv[0], argv, env)
    return 0  # pragma: no cover - execve does not return


subcommand("app", "start the app (a Streamlit server; --procs N: several behind nginx)")((add_arguments, run))
