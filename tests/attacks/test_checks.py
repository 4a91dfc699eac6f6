"""Bad input raises ValueError naming the argument, before any compilation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attacks
from tests._models import binary_linear

KEY = jax.random.PRNGKey(0)
W = np.ones(4, np.float32)
F = binary_linear(W, -2.0)
X = np.full((3, 4), 0.5, np.float32)
Y = np.array([0, 1, 0], np.int32)


def _minimal(**kw):
    args = dict(logits_fn=F, x=X, y=Y, norm="l2", key=KEY, eps_max=1.0, search_steps=1, steps=1)
    args.update(kw)
    f, x, y = args.pop("logits_fn"), args.pop("x"), args.pop("y")
    return attacks.minimal_distance(f, x, y, **args)


def _pgd(**kw):
    args = dict(logits_fn=F, x=X, y=Y, eps=0.1, norm="linf", steps=1, key=KEY)
    args.update(kw)
    f, x, y, e = args.pop("logits_fn"), args.pop("x"), args.pop("y"), args.pop("eps")
    return attacks.pgd(f, x, y, e, **args)


def _cw(**kw):
    args = dict(logits_fn=F, x=X, y=Y, key=KEY, binary_search_steps=1, steps=1, lr=0.1)
    args.update(kw)
    f, x, y = args.pop("logits_fn"), args.pop("x"), args.pop("y")
    return attacks.carlini_wagner_l2(f, x, y, **args)


BAD = [
    (dict(y=np.array([0, 1], np.int32)), "y"),                      # length mismatch
    (dict(y=np.array([0, 2, 0], np.int32)), "y"),                   # label out of range
    (dict(y=np.array([0.5, 1, 0])), "y"),                           # non-integer labels
    (dict(x=np.array([[0.5, np.nan, 0.5, 0.5]] * 3, np.float32)), "x"),
    (dict(x=np.full((3, 4), 2.0, np.float32)), "x"),                # outside bounds
    (dict(x=np.full((3, 4), 1, np.uint8)), "x"),                    # integer images
    (dict(x=np.zeros((0, 4), np.float32), y=np.zeros(0, np.int32)), "x"),
    (dict(bounds=(1.0, 0.0)), "bounds"),
    (dict(key=np.zeros(3)), "key"),
    (dict(logits_fn=lambda x: x[:, :1]), "logits_fn"),             # one logit
    (dict(logits_fn=lambda x: x.reshape(-1)), "logits_fn"),        # wrong rank
    (dict(logits_fn=lambda x: jnp.zeros((7, 2))), "logits_fn"),   # wrong batch
]


@pytest.mark.parametrize("bad,name", BAD)
@pytest.mark.parametrize("attack", [_minimal, _pgd, _cw])
def test_bad_input_names_the_argument(attack, bad, name):
    with pytest.raises(ValueError, match=rf"^{name}\b|^{name}:"):
        attack(**bad)


@pytest.mark.parametrize("bad,name", [
    (dict(norm="l3"), "norm"), (dict(eps_max=-1.0), "eps_max"), (dict(eps_max=float("nan")), "eps_max"),
    (dict(steps=0), "steps"), (dict(search_steps=-1), "search_steps"), (dict(restarts=0), "restarts"),
    (dict(bounds=None, eps_max=None), "eps_max"),
    (dict(grad_noise=True), "grad_noise"),          # a bool is not a number (True would pass as 1.0)
    (dict(grad_noise=np.bool_(True)), "grad_noise"), (dict(grad_noise=np.array(True)), "grad_noise"),
])
def test_minimal_specific(bad, name):
    with pytest.raises(ValueError, match=rf"^{name}"):
        _minimal(**bad)


@pytest.mark.parametrize("bad,name", [
    (dict(eps=-0.1), "eps"), (dict(eps=np.array([0.1, 0.2])), "eps"), (dict(norm="l0"), "norm"),
    (dict(step_size=-1.0), "step_size"), (dict(loss="hinge"), "loss"),
])
def test_pgd_specific(bad, name):
    with pytest.raises(ValueError, match=rf"^{name}"):
        _pgd(**bad)


@pytest.mark.parametrize("bad,name", [(dict(lr=0.0), "lr"), (dict(confidence=-1.0), "confidence"),
                                      (dict(binary_search_steps=0), "binary_search_steps")])
def test_cw_specific(bad, name):
    with pytest.raises(ValueError, match=rf"^{name}"):
        _cw(**bad)


def test_checks_happen_before_compilation(monkeypatch):
    """A bad call must not reach jax.jit's compiled function at all."""
    from attacks import minimal

    calls = []
    monkeypatch.setattr(minimal, "_minimal_jit", lambda *a, **k: calls.append(1))
    with pytest.raises(ValueError):
        _minimal(y=np.array([0, 5, 0], np.int32))
    assert calls == []


def test_float64_beyond_float32_range_is_an_error_where_finite_and_never_a_numpy_warning():
    """The compute dtype is float32: a finite float64 of 1e39 would become inf.
    Where values must be finite that is a ValueError naming the argument; where
    inf is allowed it is inf, and numpy's overflow warning never reaches the user."""
    import warnings
    from attacks.checks import check_array
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^x: contains values beyond float32's range"):
            check_array(np.array([1.0, 1e39]), "x")
        out = check_array(np.array([0.5, -3.4028235677973366e38]), "eps", finite=False)
    np.testing.assert_array_equal(np.asarray(out), np.array([0.5, -np.inf], np.float32))
    assert out.dtype == np.float32
