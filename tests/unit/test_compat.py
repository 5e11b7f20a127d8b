"""The old module names of 0.1 (before round 5's folders) still import, for one release: the same objects as the
new modules, with a DeprecationWarning that names the new place (normviz.core.compat)."""

import importlib
import json
import subprocess
import sys
import warnings

from normviz.core.compat import MOVED


def test_every_old_name_imports_the_new_module_with_a_warning():
    """In a fresh interpreter (no old name imported yet): each old name warns once, naming its new place."""
    code = (
        "import importlib, json, sys, warnings\n"
        "import normviz\n"
        "from normviz.core.compat import MOVED\n"
        "out = {}\n"
        "for old in MOVED:\n"
        "    with warnings.catch_warnings(record=True) as seen:\n"
        "        warnings.simplefilter('always', DeprecationWarning)\n"
        "        importlib.import_module('normviz.' + old)\n"
        "    same = sys.modules['normviz.' + old] is sys.modules['normviz.' + MOVED[old]]\n"
        "    out[old] = [same] + [str(w.message) for w in seen]\n"
        "print(json.dumps(out))\n"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert set(out) == set(MOVED)
    for old, new in MOVED.items():
        assert out[old][0] is True, old  # one module object under both names
        assert f"'normviz.{old}' moved to 'normviz.{new}'" in " ".join(out[old][1:]), (old, out[old])


def test_an_old_name_is_the_new_module(monkeypatch):
    """The same module object: what a user patches through the old name is what the code that runs reads."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("normviz.alpha_into")
    new = importlib.import_module("normviz.record.alpha_into")
    assert old is new and old.__spec__.name == "normviz.record.alpha_into"
    monkeypatch.setattr(old, "MIN_BYTES", 12345)
    assert new.MIN_BYTES == 12345


def test_the_moved_folders_keep_their_old_public_names():
    import normviz.record.recorder as recorder
    import normviz.session.session as session
    import normviz.workers.process as process
    from normviz.record import record
    from normviz.session import Session, resolve_keys
    from normviz.workers import HeavyWorker

    assert (record, Session, resolve_keys, HeavyWorker) == (
        recorder.record,
        session.Session,
        session.resolve_keys,
        process.HeavyWorker,
    )


def test_import_normviz_loads_no_torch_until_a_name_is_used():
    """The facade is lazy (PEP 562): ``import normviz`` is cheap; ``normviz.Session`` imports what it needs."""
    code = (
        "import sys, normviz\n"
        "before = 'torch' in sys.modules\n"
        "normviz.Session\n"
        "print(before, 'torch' in sys.modules, sorted(set(normviz.__all__) - set(dir(normviz))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False True []"
