"""Device and dtype choice: cuda > mps > cpu, float32 unless asked otherwise.

bfloat16 and float16 are weight dtypes: the model runs and records in them, and every map is computed in
float32 from per-layer records upcast one layer at a time (:func:`normviz.record.decompose.working_dtype`)."""

from __future__ import annotations

import torch

from .errors import NormvizError

_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "fp32": torch.float32,
    "fp64": torch.float64,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}
SUPPORTED = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """Return the requested device, or the best available one (cuda > mps > cpu)."""
    if device is not None:
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError, ValueError):
            raise NormvizError(f"Unknown device {str(device)[:40]!r}; use cpu, cuda, cuda:N or mps.") from None
        if dev.type not in ("cpu", "cuda", "mps"):
            raise NormvizError(f"Device {str(device)[:40]!r} is not supported; use cpu, cuda, cuda:N or mps.")
        if (
            dev.type == "cuda"
            and dev.index is not None
            and torch.cuda.is_available()
            and dev.index >= torch.cuda.device_count()
        ):
            raise NormvizError(f"{device!r}: this machine has {torch.cuda.device_count()} CUDA device(s).")
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise NormvizError("device='cuda' was requested but no CUDA GPU is available; use device='cpu'.")
        if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise NormvizError("device='mps' was requested but Apple MPS is not available; use device='cpu'.")
        return dev
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def parse_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """float32 by default; float64, bfloat16 or float16 on request (not float64 on mps, which has none)."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        out = dtype
    else:
        try:
            out = _DTYPES[str(dtype).lower()]
        except KeyError:
            raise NormvizError(
                f"Unknown dtype {str(dtype)[:40]!r}; use 'float32', 'float64', 'bfloat16' or 'float16'."
            ) from None
    if out not in SUPPORTED:
        raise NormvizError(f"dtype {out} is not supported for analysis; use float32, float64, bfloat16 or float16.")
    if out == torch.float64 and device.type == "mps":
        raise NormvizError("Apple MPS has no float64; use dtype='float32' or device='cpu'.")
    return out
