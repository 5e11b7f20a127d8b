"""The heavy-maps worker process of the public app (``process``): ``python -m normviz.workers`` runs one."""

from .process import HeavyWorker, Job, Ran, Result, heavy_families, is_heavy, shared_worker, takes_layers

__all__ = ["HeavyWorker", "Job", "Ran", "Result", "heavy_families", "is_heavy", "shared_worker", "takes_layers"]
