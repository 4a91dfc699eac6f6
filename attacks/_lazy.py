"""Lazy package attributes (PEP 562): a package's public names, imported on first use.

``__getattr__, __dir__ = attach(__name__, {name: target})`` in a package's
``__init__`` makes ``package.name`` import its module only when it is first
asked for; ``target`` is ``'pkg.module'`` (the name is that submodule) or
``'pkg.module:attribute'``; any other submodule is imported when first asked
for as an attribute (``rcurves.certify.milp``), as eager imports made them
attributes. ``dir(package)`` lists every public name, and
``from package import *`` and ``from package import name`` work as with
eager imports. A program then loads only the modules it uses, which is what a
claim's code fingerprint (:mod:`rcurves.claims.record`) covers. Used by the
packages of ``attacks`` and of ``rcurves`` (which depends on ``attacks``, never
the reverse).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Callable, Dict, List, Tuple


def attach(package: str, names: Dict[str, str]) -> Tuple[Callable[[str], object], Callable[[], List[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` serving ``names`` lazily (see the module doc)."""
    table = dict(names)
    module_of = sys.modules[package]

    class _Package(types.ModuleType):
        def __setattr__(self, name, value):
            # importing a submodule sets it as an attribute of its package; where a public function has the
            # submodule's name (attacks.pgd, attacks.ddn, ...) the function stays, as with eager imports
            if isinstance(value, types.ModuleType) and ":" in table.get(name, ""):
                return
            super().__setattr__(name, value)

    module_of.__class__ = _Package

    def __getattr__(name: str):
        target = table.get(name)
        if target is None:
            # a submodule not in the table (rcurves.certify.milp): as eager imports made them attributes
            if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        value = importlib.import_module(module)
        if attribute:
            value = getattr(value, attribute)
        vars(module_of)[name] = value   # later look-ups are plain attribute reads
        return value

    def __dir__() -> List[str]:
        return sorted(set(vars(module_of)) | set(table))

    return __getattr__, __dir__


__all__ = ["attach"]
