"""What several commands share: ``UserError`` (a user's mistake, reported in one line by :func:`rcurves.cli.main`),
printing, the JAX cache, loading data and models, and parsing norms, thresholds and the input box."""
from __future__ import annotations

import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

from rcurves.data.loader import Data, load_data as _load_data
from rcurves.models.loader import LoadedModel, load as _load_model
from rcurves.pipeline.report import DEFAULT_THRESHOLDS


class UserError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit 2."""


def say(msg: str = "") -> None:
    print(msg, flush=True)


def parse_norms(text: str) -> List[str]:
    from attacks.checks import check_norm

    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            canon = check_norm(part)
        except ValueError:
            raise UserError(f"bad norm {part!r}: expected a comma-separated list of linf, l2, l1") from None
        if canon not in out:
            out.append(canon)
    if not out:
        raise UserError("--norm: expected at least one of linf, l2, l1")
    return out


def parse_thresholds(items: Optional[Sequence[str]], norms: Sequence[str]) -> Dict[str, List[float]]:
    thr = {n: list(DEFAULT_THRESHOLDS[n]) for n in norms}
    for item in items or ():
        if "=" not in item:
            raise UserError(f"--thresholds {item!r}: expected NORM=V1,V2,... e.g. linf=0.05,0.1")
        name, vals = item.split("=", 1)
        norm = parse_norms(name)[0]
        try:
            values = [float(v) for v in vals.split(",") if v.strip()]
        except ValueError:
            raise UserError(f"--thresholds {item!r}: values must be numbers") from None
        if not values or any(not math.isfinite(v) or v < 0 for v in values):
            raise UserError(f"--thresholds {item!r}: expected finite values >= 0")
        thr[norm] = sorted(values)
    return thr


def parse_bounds(text: Optional[str]) -> Optional[Tuple[float, float]]:
    if text is None or text.lower() == "none":
        return None
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"--bounds {text!r}: expected LO,HI (e.g. 0,1) or none") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UserError(f"--bounds {text!r}: expected finite LO < HI")
    return (lo, hi)


def setup_jax(cache_dir: Optional[str]) -> None:
    """JAX's persistent compilation cache, only when asked for with
    ``RCURVES_JAX_CACHE=1`` (under ``<cache>/jax``) or ``RCURVES_JAX_CACHE=DIR``.

    Off by default: writing some of the attack programs' executables to it
    crashed the interpreter (a segfault inside ``put_executable_and_time``) on
    one CI machine, and a cold run, the one that matters for a newcomer,
    gains nothing from it.
    """
    import jax

    want = os.environ.get("RCURVES_JAX_CACHE", "")
    if want in ("", "0"):
        return
    if want != "1":
        where = want
    elif cache_dir:
        where = os.path.join(cache_dir, "jax")
    else:
        return
    try:
        jax.config.update("jax_compilation_cache_dir", where)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except Exception:  # noqa: BLE001 - the cache is an optimisation only
        pass


def default_cache() -> str:
    from rcurves.files import cache_dir

    return cache_dir()


# ---------------------------------------------------------------------------
# loading, with mistakes as UserError


def load_data(spec: str, split: str = "test", n: Optional[int] = None, seed: int = 0) -> Data:
    try:
        return _load_data(spec, split, n=n, seed=seed)
    except ValueError as e:
        raise UserError(str(e)) from None


def load_model(spec: str, label: Optional[str] = None, cache: Optional[str] = None,
               progress: bool = True) -> LoadedModel:
    try:
        return _load_model(spec, label, cache=cache, progress=progress)
    except ValueError as e:
        raise UserError(str(e)) from None
