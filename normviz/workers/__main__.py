"""``python -m normviz.workers``: one worker process (:func:`normviz.workers.process.serve`). Run as a package, so
that pickled Results name ``normviz.workers.process``, not ``__main__``."""
from normviz.workers.process import serve

serve()
