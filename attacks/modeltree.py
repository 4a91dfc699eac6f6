"""A model's parameters as data: split a pytree callable into a static skeleton and its arrays.

Every attack program takes ``logits_fn`` as a static jit argument. A plain
closure is static as a whole: its parameters become constants of the compiled
program (fine for one small model), and each new closure compiles again. A
*pytree callable* -- ``jax.tree_util.Partial(apply_fn, params)``, a flax
``nnx.Module``, the zoo's :class:`rcurves.models.ModelFn`, any registered
pytree with a ``__call__`` -- is split by :func:`split_model` into

* a hashable :class:`Skeleton` (the tree structure and its non-array leaves:
  the architecture), passed as the static argument, and
* the tuple of its array leaves (the parameters), passed as traced arguments,

and rebuilt inside the program by :func:`merge_model`. One compiled program
then serves every checkpoint of an architecture at given shapes and settings;
the parameters are never baked into it.
"""
from __future__ import annotations

from typing import Any, Callable, Tuple

import jax
import numpy as np

__all__ = ["Skeleton", "is_traced_model", "merge_model", "split_model"]


def _is_array(v: Any) -> bool:
    return isinstance(v, (jax.Array, np.ndarray)) or isinstance(v, jax.core.Tracer)


class Skeleton:
    """The static part of a pytree callable: its treedef and non-array leaves (hashable)."""

    __slots__ = ("treedef", "statics", "_hash")

    def __init__(self, treedef, statics: Tuple[Any, ...]):
        self.treedef = treedef
        self.statics = statics
        self._hash = hash((treedef, statics))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return (isinstance(other, Skeleton) and self._hash == other._hash and self.treedef == other.treedef
                and self.statics == other.statics)

    def __repr__(self) -> str:
        n = sum(s is _ARRAY for s in self.statics)
        return f"Skeleton({n} array leaves, {self.treedef})"


class _ArraySlot:
    def __repr__(self) -> str:
        return "<array>"


_ARRAY = _ArraySlot()


def split_model(logits_fn: Callable) -> Tuple[Any, Tuple[Any, ...]]:
    """``(static, arrays)``: a :class:`Skeleton` and the array leaves, or ``(logits_fn, ())``.

    A callable that is not a pytree (a closure, a plain function), has no
    array leaves, or whose non-array leaves are not hashable is returned
    whole as the static part, as before (its arrays, if any, are constants).
    """
    leaves, treedef = jax.tree_util.tree_flatten(logits_fn)
    if treedef.num_nodes == 1 and len(leaves) == 1 and leaves[0] is logits_fn:
        return logits_fn, ()
    if not any(_is_array(v) for v in leaves):
        return logits_fn, ()
    statics = tuple(_ARRAY if _is_array(v) else v for v in leaves)
    try:
        skeleton = Skeleton(treedef, statics)
    except TypeError:                       # unhashable static leaves: keep the old behaviour
        return logits_fn, ()
    return skeleton, tuple(v for v in leaves if _is_array(v))


def merge_model(static: Any, arrays: Tuple[Any, ...]) -> Callable:
    """Inverse of :func:`split_model`: the callable with ``arrays`` put back in place."""
    if not isinstance(static, Skeleton):
        return static
    it = iter(arrays)
    leaves = [next(it) if s is _ARRAY else s for s in static.statics]
    return jax.tree_util.tree_unflatten(static.treedef, leaves)


def is_traced_model(logits_fn: Callable) -> bool:
    """True when ``logits_fn`` is a pytree callable whose arrays would be traced arguments."""
    return isinstance(split_model(logits_fn)[0], Skeleton)
