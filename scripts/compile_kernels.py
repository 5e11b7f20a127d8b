"""Compile the numba kernels of the norm maps once into numba's on-disk cache (beside
normviz/methods/norms/compiled.py), so that every later process loads the same machine code (the same bits) instead
of compiling it on its first norm map. ``scripts/setup.sh`` runs it while pip installs the rest: only numpy and
numba are needed, so the library's ``__init__`` files (which import torch) are not run. Prints whether torch was
imported (it must not be).

    python scripts/compile_kernels.py [--float32]
"""

import sys
import types
from pathlib import Path

# normviz, normviz.methods and normviz.methods.norms as bare folders (their __init__ files are not run). The real
# module names matter: numba's cache records the module of each kernel and imports it by that name when a later
# process loads the cache.
root = Path(__file__).resolve().parents[1] / "normviz"
for name, folder in (
    ("normviz", root),
    ("normviz.methods", root / "methods"),
    ("normviz.methods.norms", root / "methods" / "norms"),
    ("normviz.core", root / "core"),
):
    package = types.ModuleType(name)
    package.__path__ = [str(folder)]
    sys.modules[name] = package

import numpy as np  # noqa: E402

import normviz.methods.norms.kernels as kernels  # noqa: E402


def warm_gelu(dtypes) -> bool:
    """Compile the GELU path-integral kernels (normviz.core.compiled_activations: gemma3's FF parts in explain) for
    each input dtype; False where numba does not run (numpy runs then)."""
    try:
        import normviz.core.compiled_activations as ca
    except Exception:
        return False
    consts = (np.zeros((2, 4, 3)), 256.0, 0.01, 0.0, 0.0)  # the signature of activations.ig_table's (no values read)
    for dt in dtypes:
        a = np.linspace(-2, 2, 8).astype(dt)
        gate, up = np.empty_like(a), np.empty_like(a)
        for tanh in (False, True):
            ca.gelu_gate_factors(a, a, tanh, *consts, 0.25, gate, up)
    flat = np.linspace(-2, 2, 8)
    for tanh in (False, True):
        ca.gelu_path_integrals(flat, tanh, *consts, np.empty_like(flat))
    return True


# --float32: the app's set-up (scripts/app.sh): its models run in float32; a float64 kernel compiles on first use
dtypes = (np.float32,) if "--float32" in sys.argv[1:] else (np.float32, np.float64)
if not kernels.warm(dtypes):
    print("numba kernels unavailable: the torch versions will run")
if not warm_gelu(dtypes):
    print("numba GELU kernels unavailable: the numpy versions will run")
print(f"kernels compiled; torch imported: {'torch' in sys.modules}")
