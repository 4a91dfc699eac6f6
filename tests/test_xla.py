"""attacks.xla: the attack programs' compile options and where they apply."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from attacks import xla
from attacks.minimal import _minimal_jit
from _models import binary_linear, linear_data

KEY = jax.random.PRNGKey(0)


def _ynn_reduce_fusions(hlo: str) -> int:
    """Number of YNNPACK fusions whose computation contains a reduce."""
    count = 0
    for callee in re.findall(r"kind=kCustom, calls=(%[\w.\-]+)", hlo):
        start = hlo.index("\n" + callee + " ")
        body = hlo[start:hlo.index("\n}", start)]
        count += " reduce(" in body
    return count


@pytest.fixture(scope="module")
def case():
    w, b, x, y = linear_data(d=16, n=8)
    return binary_linear(w, b), x, y


def test_workaround_applies_unless_the_user_chose(monkeypatch):
    opts = xla.compiler_options()
    if opts is None:
        pytest.skip("this jaxlib does not know the YNN fusion option")
    assert opts == xla.WORKAROUND
    monkeypatch.setenv("RCURVES_XLA_DEFAULTS", "1")
    assert xla.compiler_options() is None
    monkeypatch.delenv("RCURVES_XLA_DEFAULTS")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=-reduce")
    assert xla.compiler_options() is None


def test_attack_program_keeps_reductions_out_of_ynnpack():
    """The reason for the options: XLA's default sends per-point norms to YNNPACK
    (10x slower on this CPU); the attack's own program must not."""
    if xla.compiler_options() is None or jax.default_backend() != "cpu":
        pytest.skip("workaround not active")
    from attacks.engine import EngineConfig
    from attacks.minimal import SearchConfig
    w, b, x, y = linear_data(d=256, n=32)   # large enough for XLA to use YNNPACK (n d > ~4k)
    cfg = SearchConfig(engine=EngineConfig(norm="linf", steps=3), search_steps=1)
    args = (binary_linear(w, b), jnp.asarray(x), jnp.asarray(y), attacks.checks.check_key(KEY, len(x)),
            jnp.full((len(x),), 10.0))
    default = _minimal_jit._plain.lower(*args, cfg=cfg, bounds=None).compile().as_text()
    if _ynn_reduce_fusions(default) == 0:
        pytest.skip("this jaxlib does not send reductions to YNNPACK by default")
    tuned = _minimal_jit.lower(*args, cfg=cfg, bounds=None).compile().as_text()
    assert _ynn_reduce_fusions(tuned) == 0


def test_same_answer_top_level_and_inside_a_user_jit(case):
    f, x, y = case
    kw = dict(norm="l2", key=KEY, eps_max=10.0, bounds=None, search_steps=3, steps=5)
    top = attacks.minimal_distance(f, x, y, **kw)
    inner = jax.jit(lambda a, b: attacks.minimal_distance(f, a, b, **kw).distance)(x, y)
    np.testing.assert_allclose(np.asarray(inner), np.asarray(top.distance), rtol=1e-6)
    # The top-level program is compiled once, with the options; the nested call
    # went to the plain jit and did not add an entry to it.
    size = _minimal_jit._cache_size()
    attacks.minimal_distance(f, x, y, **kw)
    assert _minimal_jit._cache_size() == size
