"""Input validation shared by every public function.

Every check runs in Python on the concrete arrays *before* anything is traced
or compiled, and raises a ``ValueError`` that names the argument and says what
was expected. Value checks (NaN, ranges) are skipped for tracers, so the public
functions stay callable inside a user's ``jit``, ``pmap`` or ``shard_map``;
shape checks always run.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

NORMS = ("linf", "l2", "l1")
_NORM_ALIASES = {
    "linf": "linf", "inf": "linf", "l_inf": "linf", "Linf": "linf", np.inf: "linf",
    "l2": "l2", "2": "l2", "L2": "l2", 2: "l2", 2.0: "l2",
    "l1": "l1", "1": "l1", "L1": "l1", 1: "l1", 1.0: "l1",
}


def is_concrete(a: Any) -> bool:
    """True when ``a``'s values can be read here: not a tracer inside
    jit/vmap/pmap, and not a global array with shards on other hosts."""
    if isinstance(a, jax.core.Tracer):
        return False
    return bool(getattr(a, "is_fully_addressable", True))


def check_norm(norm: Any, name: str = "norm") -> str:
    """Return the canonical norm name ``'linf' | 'l2' | 'l1'``."""
    try:
        canon = _NORM_ALIASES.get(norm)
    except TypeError:
        canon = None
    if canon is None:
        raise ValueError(
            f"{name}: expected one of 'linf', 'l2', 'l1' (or inf, 2, 1), got {norm!r}"
        )
    return canon


def check_choice(value: Any, choices: Sequence[str], name: str) -> str:
    """``value`` if it is one of ``choices``, else a ValueError naming ``name``."""
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        raise ValueError(f"{name}: expected {listed}, got {value!r}")
    return value


def check_p(p: Any, name: str = "p") -> float:
    """An l_p exponent in [1, inf]; accepts 'linf'/'l2'/'l1' too."""
    if isinstance(p, str):
        canon = check_norm(p, name)
        return {"linf": math.inf, "l2": 2.0, "l1": 1.0}[canon]
    try:
        pf = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number in [1, inf], got {p!r}") from None
    if math.isnan(pf) or pf < 1.0:
        raise ValueError(f"{name}: expected a number in [1, inf], got {p!r}")
    return pf


def check_array(
    a: Any,
    name: str,
    *,
    ndim: Optional[int] = None,
    min_ndim: Optional[int] = None,
    floating: bool = True,
    allow_empty: bool = False,
    finite: bool = True,
) -> jax.Array:
    """Convert to a jax array and check rank, dtype, emptiness and finiteness.

    Floating inputs are returned as float32 (the toolkit's compute dtype);
    integer inputs are rejected when ``floating`` (a common bug is passing uint8
    images in [0, 255]).
    """
    if a is None:
        raise ValueError(f"{name}: expected an array, got None")
    if isinstance(a, (list, tuple)):
        a = np.asarray(a)
    if not hasattr(a, "shape") or not hasattr(a, "dtype"):
        try:
            a = np.asarray(a)
        except Exception:
            raise ValueError(f"{name}: expected an array, got {type(a).__name__}") from None
    dt = np.dtype(a.dtype) if not isinstance(a.dtype, np.dtype) else a.dtype
    if floating:
        if not (np.issubdtype(dt, np.floating) or np.issubdtype(dt, np.integer) or dt == np.bool_):
            raise ValueError(f"{name}: expected a real floating array, got dtype {dt}")
        if not np.issubdtype(dt, np.floating):
            raise ValueError(
                f"{name}: expected a floating array (float16/32/64), got dtype {dt}; "
                "scale integer images to floats first"
            )
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(a.shape)}")
    if min_ndim is not None and a.ndim < min_ndim:
        raise ValueError(
            f"{name}: expected at least {min_ndim} dimensions, got shape {tuple(a.shape)}"
        )
    if not allow_empty and a.ndim > 0 and a.shape[0] == 0:
        raise ValueError(f"{name}: expected a non-empty array, got shape {tuple(a.shape)}")
    if not allow_empty and a.size == 0:
        raise ValueError(f"{name}: expected a non-empty array, got shape {tuple(a.shape)}")
    if finite and is_concrete(a):
        arr = np.asarray(a)
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            bad = "NaN" if np.isnan(arr).any() else "inf"
            raise ValueError(f"{name}: contains {bad} values")
    if floating:
        if dt.itemsize > 4 and is_concrete(a):
            # a wider float cast to the compute dtype: values beyond float32's
            # range become inf, without numpy's overflow warning; where they
            # must be finite that is the error
            with np.errstate(over="ignore"):
                arr32 = np.asarray(a, dtype=np.float32)
            if finite and not np.all(np.isfinite(arr32)):
                raise ValueError(f"{name}: contains values beyond float32's range (the toolkit computes in float32)")
            return jnp.asarray(arr32)
        return jnp.asarray(a, dtype=jnp.float32)
    return jnp.asarray(a)


def check_labels(y: Any, n: int, name: str = "y", n_classes: Optional[int] = None) -> jax.Array:
    """Integer labels of shape ``(n,)``, in ``[0, n_classes)`` when that is known."""
    if y is None:
        raise ValueError(f"{name}: expected an integer array of shape ({n},), got None")
    if not hasattr(y, "dtype"):
        y = np.asarray(y)
    dt = np.dtype(y.dtype)
    if not (np.issubdtype(dt, np.integer) or dt == np.bool_):
        if is_concrete(y) and np.issubdtype(dt, np.floating):
            arr = np.asarray(y)
            if arr.size and not np.all(np.isfinite(arr)):
                raise ValueError(f"{name}: contains NaN/inf; expected integer class labels")
            if not np.all(arr == np.round(arr)):
                raise ValueError(f"{name}: expected integer class labels, got dtype {dt}")
        else:
            raise ValueError(f"{name}: expected integer class labels, got dtype {dt}")
    if tuple(y.shape) != (n,):
        raise ValueError(f"{name}: expected shape ({n},) to match x, got {tuple(y.shape)}")
    if n_classes is not None and is_concrete(y):
        arr = np.asarray(y)
        if arr.size and (arr.min() < 0 or arr.max() >= n_classes):
            raise ValueError(
                f"{name}: labels must lie in [0, {n_classes}) (the model has {n_classes} "
                f"logits), got range [{arr.min()}, {arr.max()}]"
            )
    return jnp.asarray(y, dtype=jnp.int32)


def check_bounds(bounds: Any, x: Optional[jax.Array] = None, name: str = "bounds"):
    """``None`` (unbounded) or ``(lo, hi)`` with lo < hi; x must lie inside."""
    if bounds is None:
        return None
    try:
        lo, hi = bounds
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected None or a pair (lo, hi), got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise ValueError(f"{name}: expected finite lo < hi, got ({lo}, {hi})")
    if x is not None and is_concrete(x):
        arr = np.asarray(x)
        if arr.size and (arr.min() < lo or arr.max() > hi):
            raise ValueError(
                f"x: inputs must lie inside bounds=({lo}, {hi}), got range "
                f"[{arr.min():.4g}, {arr.max():.4g}]"
            )
    return (lo, hi)


def check_eps(eps: Any, n: int, name: str = "eps", allow_inf: bool = False) -> jax.Array:
    """A scalar or one value per point, >= 0 and finite; returned with shape ``(n,)``."""
    if eps is None:
        raise ValueError(f"{name}: expected a non-negative number, got None")
    if not hasattr(eps, "shape"):
        try:
            eps = np.asarray(eps, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a non-negative number, got {eps!r}") from None
    if eps.ndim > 1 or (eps.ndim == 1 and eps.shape[0] != n):
        raise ValueError(
            f"{name}: expected a scalar or shape ({n},), got shape {tuple(eps.shape)}"
        )
    if is_concrete(eps):
        arr = np.asarray(eps, dtype=np.float64)
        if np.isnan(arr).any():
            raise ValueError(f"{name}: contains NaN")
        if (arr < 0).any():
            raise ValueError(f"{name}: must be >= 0, got min {arr.min()}")
        if not allow_inf and np.isinf(arr).any():
            raise ValueError(f"{name}: must be finite")
    return jnp.broadcast_to(jnp.asarray(eps, dtype=jnp.float32), (n,))


def check_positive_int(v: Any, name: str, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {v!r}")
    if v < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {v}")
    return int(v)


def check_positive_float(v: Any, name: str, allow_zero: bool = False) -> float:
    """``float(v)`` when ``v`` is a finite number > 0 (>= 0 with ``allow_zero``), else a ValueError naming
    ``name``. A bool (or a bool array) is not a number here (``True`` would pass as 1.0)."""
    if isinstance(v, (bool, np.bool_)) or getattr(getattr(v, "dtype", None), "kind", None) == "b":
        raise ValueError(f"{name}: expected a positive number, got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a positive number, got {v!r}") from None
    if not math.isfinite(f) or f < 0 or (f == 0 and not allow_zero):
        raise ValueError(f"{name}: expected a positive finite number, got {v!r}")
    return f


def check_key(key: Any, n: int, name: str = "key") -> jax.Array:
    """One PRNG key, or one key per point (shape ``(n, ...)``).

    Returns one raw ``uint32`` key per point, shape ``(n, 2)``. A single key is
    expanded with ``fold_in(key, i)`` for point ``i``, so a point's randomness
    depends only on the key and its index; passing ``keys[i:i+1]`` for a batch
    of one reproduces point ``i`` of a larger batch.
    """
    if key is None:
        raise ValueError(f"{name}: expected a jax.random key, got None")
    if not hasattr(key, "dtype"):
        raise ValueError(f"{name}: expected a jax.random key, got {type(key).__name__}")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    if key.dtype != jnp.uint32:
        raise ValueError(
            f"{name}: expected a jax.random key (jax.random.key or PRNGKey), got dtype {key.dtype}"
        )
    if key.shape == (2,):
        return _fold_in_each(key, n)
    if key.ndim == 2 and key.shape == (n, 2):
        return key
    raise ValueError(
        f"{name}: expected one key (shape (2,)) or one per point (shape ({n}, 2)), "
        f"got shape {tuple(key.shape)}"
    )


@functools.partial(jax.jit, static_argnums=1)
def _fold_in_each(key: jax.Array, n: int) -> jax.Array:
    """``fold_in(key, i)`` for ``i < n``, shape ``(n, 2)`` (one cached program
    per ``n``; a fresh ``vmap`` here was retraced at every call, ~1 ms)."""
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(n, dtype=jnp.uint32))


def check_logits_fn(logits_fn: Callable, x: jax.Array, name: str = "logits_fn") -> int:
    """Trace ``logits_fn`` abstractly (no compilation) and return the class count."""
    if not callable(logits_fn):
        raise ValueError(f"{name}: expected a callable logits_fn(x_batch) -> logits_batch")
    n = x.shape[0]
    try:
        out = jax.eval_shape(logits_fn, jax.ShapeDtypeStruct(x.shape, jnp.float32))
    except Exception as e:  # noqa: BLE001 - report any tracing failure as bad input
        raise ValueError(
            f"{name}: calling it on x of shape {tuple(x.shape)} failed: {type(e).__name__}: {e}"
        ) from e
    shape = getattr(out, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] != n or shape[1] < 2:
        raise ValueError(
            f"{name}: expected logits of shape ({n}, n_classes>=2) for x of shape "
            f"{tuple(x.shape)}, got {shape}"
        )
    return int(shape[1])


def check_model_inputs(logits_fn, x, y, bounds, *, x_name="x", y_name="y"):
    """The common prologue of every attack: returns ``(x, y, bounds, n_classes)``."""
    x = check_array(x, x_name, min_ndim=2)
    n_classes = check_logits_fn(logits_fn, x)
    y = check_labels(y, x.shape[0], y_name, n_classes)
    bounds = check_bounds(bounds, x)
    return x, y, bounds, n_classes


__all__ = [
    "NORMS",
    "check_array",
    "check_bounds",
    "check_choice",
    "check_eps",
    "check_key",
    "check_labels",
    "check_logits_fn",
    "check_model_inputs",
    "check_norm",
    "check_p",
    "check_positive_float",
    "check_positive_int",
    "is_concrete",
]
