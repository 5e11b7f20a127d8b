"""Device and dtype choice: cuda > mps > cpu, float32 unless asked otherwise."""
from __future__ import annotations

import torch

from .errors import NormvizError

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "fp32": torch.float32, "fp64": torch.float64}


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """Return the requested device, or the best available one (cuda > mps > cpu)."""
    if device is not None:
        dev = torch.device(device)
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
    """float32 by default; float64 on request (not on mps, which has no float64)."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        out = dtype
    else:
        try:
            out = _DTYPES[str(dtype).lower()]
        except KeyError:
            raise NormvizError(f"Unknown dtype {dtype!r}; use 'float32' or 'float64'.") from None
    if out not in (torch.float32, torch.float64):
        raise NormvizError(f"dtype {out} is not supported for analysis; use float32 or float64.")
    if out == torch.float64 and device.type == "mps":
        raise NormvizError("Apple MPS has no float64; use dtype='float32' or device='cpu'.")
    return out
