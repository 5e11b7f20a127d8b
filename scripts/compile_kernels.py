"""Compile the numba kernels of the norm maps once into numba's on-disk cache (beside
normviz/methods/norms/compiled.py), so that every later process loads the same machine code (the same bits) instead
of compiling it on its first norm map. ``scripts/setup.sh`` runs it while pip installs the rest: only numpy and
numba are needed, so the library's ``__init__`` files (which import torch) are not run. Prints whether torch was imported (it must not be)."""
import sys
import types
from pathlib import Path

# normviz, normviz.methods and normviz.methods.norms as bare folders (their __init__ files are not run). The real
# module names matter: numba's cache records the module of each kernel and imports it by that name when a later
# process loads the cache.
root = Path(__file__).resolve().parents[1] / "normviz"
for name, folder in (("normviz", root), ("normviz.methods", root / "methods"),
                     ("normviz.methods.norms", root / "methods" / "norms")):
    package = types.ModuleType(name)
    package.__path__ = [str(folder)]
    sys.modules[name] = package

import normviz.methods.norms.kernels as kernels  # noqa: E402

if not kernels.warm():
    print("numba kernels unavailable: the torch versions will run")
print(f"kernels compiled; torch imported: {'torch' in sys.modules}")
