"""The same corpus job on Ray Data: one dataset row per chunk, ``map_batches`` over a callable class so each
worker (a Ray actor) loads the model once and processes whole chunks with :func:`process_chunk`.

Each chunk's state comes back as bytes and is checkpointed by the driver as it arrives; the final merge
reads them in chunk order, exactly as the in-process engine does, so both engines give the same numbers up
to float rounding: usually bit for bit with the default ``ray_threads`` (each CPU worker uses as many torch
threads as the driver) once numba's cache holds the compiled kernels (``scripts/setup.sh`` puts them there),
but not guaranteed: torch's MKL GEMM is reproducible across processes only in MKL's CNR mode (``MKL_CBWR``),
and under load the tables differed by 1 ulp; with fewer threads per worker (faster when several workers
share the cores) within float rounding of the BLAS reduction order. The test compares at 1e-12 relative. GPU workers
(``num_gpus=1`` each) are used when the driver sees CUDA.

When to use which: ``local`` for one machine and one model copy (simplest; uses the GPU when present);
``ray`` to run several model replicas at once — several GPUs, or a Ray cluster (``--ray-address``); on a
small CPU machine Ray's start-up (~10 s) and extra processes rarely pay off. ``--device-map auto``
(local engine) is for one model too large for one GPU.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.errors import MissingPackageError, NormvizError


class ChunkWorker:
    """Ray Data callable class: loads the model in ``__init__``; ``__call__`` analyses one batch of chunks."""

    def __init__(self, model: str, device: str | None, dtype: str, stats, batch_size: int, max_tokens, threads: int):
        import torch

        from ..models import load

        if threads:
            torch.set_num_threads(threads)
        self.lm = load(model, device=device, dtype=dtype)
        self.stats, self.batch_size, self.max_tokens = tuple(stats), batch_size, max_tokens

    def __call__(self, batch: dict) -> dict:
        from .chunks import process_chunk, state_to_bytes

        out_chunks, out_states = [], []
        for k, payload in zip(batch["chunk"], batch["lines"]):
            lines = pickle.loads(payload)
            state, meta = process_chunk(self.lm, lines, self.stats, self.batch_size, self.max_tokens)
            out_chunks.append(int(k))
            out_states.append(state_to_bytes(state, {**meta, "chunk": int(k)}))
        return {"chunk": np.array(out_chunks, dtype=np.int64), "state": np.array(out_states, dtype=object)}


def _import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise MissingPackageError(
            "--engine ray needs Ray Data: pip install 'ray==2.60.0' (see requirements.txt)."
        ) from None
    return ray


def ensure_ray(address: str | None = None, num_cpus: int | None = None):
    """Connect to ``address`` or start a local Ray instance whose workers can import normviz."""
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    kwargs = dict(runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False, ignore_reinit_error=True)
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, **kwargs)
    return ray


def run_ray(job, chunks: dict[int, list], finished: Callable[[int, bytes], None]) -> None:
    """Process ``chunks`` ({index: lines}) on Ray Data; call ``finished(index, state_bytes)`` as each arrives."""
    import torch

    ray = ensure_ray(job.ray_address)
    if job.device_map:
        raise NormvizError("--device-map is for the local engine (one sharded model); Ray runs one model per worker.")
    gpus = torch.cuda.device_count() if job.device in (None, "cuda") else 0
    cpus = int(ray.cluster_resources().get("CPU", 1))
    workers = max(1, min(job.workers, len(chunks), gpus or job.workers))
    per_worker = max(1, cpus // workers) if not gpus else 1
    # Threads per CPU worker: by default the driver's count, so every matmul reduces in the same order as
    # in-process and the numbers are bit-identical; a smaller count (e.g. cores // workers) is faster.
    threads = job.ray_threads or torch.get_num_threads()
    rows = [{"chunk": k, "lines": pickle.dumps(lines)} for k, lines in sorted(chunks.items())]
    ds = ray.data.from_items(rows, override_num_blocks=len(rows))
    ds = ds.map_batches(
        ChunkWorker,
        fn_constructor_kwargs=dict(
            model=job.model,
            device=job.device,
            dtype=job.dtype,
            stats=tuple(job.stats),
            batch_size=job.batch_size,
            max_tokens=job.max_tokens,
            threads=threads if not gpus else 0,
        ),
        batch_size=1,
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=per_worker,
        num_gpus=1 if gpus else 0,
    )
    for row in ds.iter_rows():
        finished(int(row["chunk"]), bytes(row["state"]))
