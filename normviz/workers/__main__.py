"""``python -m normviz.workers``: one worker process (:func:`normviz.workers.process.serve`). Run as a package, so
that pickled Results name ``normviz.workers.process``, not ``__main__``."""

import sys

from normviz.workers.process import serve

args = sys.argv[1:]  # --parent PID: the server that started it (the worker ends when it is gone)
serve(int(args[args.index("--parent") + 1]) if "--parent" in args[:-1] else None)
