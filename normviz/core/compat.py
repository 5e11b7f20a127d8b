"""The modules that moved into the folders of their layers (0.1 → round 5's tree), importable under their old
names for one release, with a DeprecationWarning that names the new place.

    import normviz.errors            # works, warns: moved to normviz.core.errors
    from normviz.keyspace import all_keys

An old name is the new module itself, entered in ``sys.modules`` under both names (the same objects: classes
compare equal, ``isinstance`` holds, a monkeypatch through either name patches the code that runs). ``normviz.record``,
``normviz.session`` and ``normviz.workers`` are now folders that re-export their old public names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from typing import Sequence

REMOVED_IN = "0.2"

MOVED: dict[str, str] = {
    # core: what every layer stands on
    "errors": "core.errors",
    "commands": "core.commands",
    "settings": "core.settings",
    "backend": "core.backend",
    "activations": "core.activations",
    "tokens": "core.tokens",
    "inputs": "core.inputs",
    "analysis": "core.analysis",
    "fx": "core.fx",
    "pool": "core.pool",
    "memory": "core.memory",
    # record: the one recorded forward pass
    "recording": "record.recording",
    "alpha_into": "record.alpha_into",
    "attention_capture": "record.attention_capture",
    "attention_interface": "record.attention_interface",
    "decompose": "record.decompose",
    "encdec": "record.encdec",
    "encdec.params": "record.encdec.params",
    "encdec.record": "record.encdec.record",
    "encdec.target": "record.encdec.target",
    # methods: the key space and the sinks beside the families
    "keyspace": "methods.keyspace",
    "sinks": "methods.sinks",
    # session: Session and its jobs
    "schedule": "session.schedule",
    "layer_maps": "session.layer_maps",
    "map_budget": "session.map_budget",
    # viz: normviz.show
    "notebook": "viz.notebook",
}


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, rest = fullname.partition(".")
        if prefix != "normviz" or rest not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = f"normviz.{MOVED[spec.name.partition('.')[2]]}"
        warnings.warn(
            f"'{spec.name}' moved to '{new}'; the old name works until normviz {REMOVED_IN}",
            DeprecationWarning,
            stacklevel=3,
        )
        # the old name is the new module itself (one module object under two names): attributes set on it,
        # monkeypatches included, are the new module's
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # the import system sets __spec__ to the old name's: put it back
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        assert module.__spec__ is not None
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Put the finder of the old names on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        # first: a moved package's old name forwards ``__path__`` too, so the path finder would otherwise load its
        # submodules' files a second time under the old names
        sys.meta_path.insert(0, _MovedFinder())


__all__ = ["MOVED", "REMOVED_IN", "install"]
