"""Load the experiment scripts (``experiments/<paper>/<name>.py``) and their helpers as modules, by name."""
import importlib.util
import pathlib
import sys

EXP = pathlib.Path(__file__).resolve().parents[1] / "experiments"


def path(name: str) -> pathlib.Path:
    """The file of ``name``: ``experiments/<name>.py`` or ``experiments/<paper>/<name>.py``."""
    found = [p for p in [EXP / f"{name}.py", *EXP.glob(f"*/{name}.py")] if p.is_file()]
    if len(found) != 1:
        raise FileNotFoundError(f"experiment {name!r}: found {found}")
    return found[0]


def load(name: str):
    """The script (or helper) ``name`` as a module: its folder and ``experiments/`` (for ``shared``) on the path."""
    p = path(name)
    for d in (str(EXP), str(p.parent)):
        if d not in sys.path:
            sys.path.insert(0, d)
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(p):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
