"""rcurves.pipeline.memory: chunk_size="auto" from XLA's memory analysis of the compiled search program."""
import numpy as np
import pytest

from tests._models import multiclass_linear
from rcurves.pipeline import memory
from rcurves.pipeline.evaluation import AttackSettings, evaluate

SHAPE = (12,)


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, 12)).astype(np.float32)
    return multiclass_linear(W, np.zeros(4, np.float32))


def test_program_memory_is_linear_in_the_chunk_and_the_choice_fits_the_budget(model):
    """The search program's bytes grow linearly with the chunk (the fit from 1 and 8 points predicts 32 within
    10%), and the chosen chunk is the largest whose bytes, with the safety factor, fit the budget."""
    b1, b8, b32 = (memory.program_bytes(model, SHAPE, "linf", n) for n in (1, 8, 32))
    assert b1 < b8 < b32
    per = (b8 - b1) / 7
    assert b32 == pytest.approx(b1 + 31 * per, rel=0.10)
    choice = memory.auto_chunk_size(model, SHAPE, "linf", budget_bytes=10 ** 12)
    assert choice.chunk == 100 and choice.fits                     # capped at max_chunk
    budget = int(memory.SAFETY * choice.bytes_for(5)) + 1
    five = memory.auto_chunk_size(model, SHAPE, "linf", budget_bytes=budget)
    assert five.chunk == 5 and five.fits
    assert memory.SAFETY * five.bytes_for(6) > budget                # one more point would not fit
    tiny = memory.auto_chunk_size(model, SHAPE, "linf", budget_bytes=1000)
    assert tiny.chunk == 1 and not tiny.fits                        # says so rather than pretending
    assert memory.available_bytes() > 0


def test_bad_settings_are_value_errors(model):
    with pytest.raises(ValueError, match="fraction"):
        memory.auto_chunk_size(model, SHAPE, "linf", fraction=1.5)
    with pytest.raises(ValueError, match="max_chunk"):
        memory.auto_chunk_size(model, SHAPE, "linf", max_chunk=0)
    with pytest.raises(ValueError, match="norm"):
        memory.program_bytes(model, SHAPE, "l3", 4)
    with pytest.raises(ValueError, match="chunk_size"):
        evaluate({"lin": model}, (np.zeros((4, 12), np.float32), np.zeros(4, np.int64)), norms=("linf",),
                 bounds=None, eps_max={"linf": 5.0}, chunk_size="big", progress=False)


def test_evaluate_with_auto_chunks_gives_the_same_distances(model, tmp_path):
    """On a small model the chosen chunk is the cap, so the run is the one with that chunk size, bit for bit."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(10, 12)).astype(np.float32)
    y = np.argmax(np.asarray(model(x)), 1)
    kw = dict(norms=("linf",), attack=AttackSettings(search_steps=3, steps=5, cw=False), bounds=None,
              eps_max={"linf": 5.0}, progress=False)
    auto = evaluate({"lin": model}, (x, y), chunk_size="auto", out_dir=str(tmp_path / "a"), **kw)
    fixed = evaluate({"lin": model}, (x, y), chunk_size=100, out_dir=str(tmp_path / "b"), **kw)
    np.testing.assert_array_equal(auto.distance("lin", "linf"), fixed.distance("lin", "linf"))
    assert auto.settings["chunk_size"] == "auto"


class _ConvNet:
    """A tiny flax CNN (two 3x3 convolutions, 8 channels) on 8x8x1 inputs as a pytree callable (its parameters traced, one program)."""

    @staticmethod
    def make():
        import flax.linen as nn
        import jax

        class Net(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.relu(nn.Conv(8, (3, 3), padding="SAME")(x))
                x = nn.relu(nn.Conv(8, (3, 3), padding="SAME")(x))
                return nn.Dense(4)(x.reshape((x.shape[0], -1)))

        net = Net()
        params = net.init(jax.random.PRNGKey(0), np.zeros((1, 8, 8, 1), np.float32))
        return jax.tree_util.Partial(net.apply, params)


@pytest.fixture(scope="module")
def conv_model():
    return _ConvNet.make()


def test_where_the_conv_rewrite_does_not_fit_the_choice_switches_it_off(conv_model, monkeypatch):
    """On XLA:CPU the conv-as-patches rewrite holds ``kh kw`` copies of a convolution's input: the search
    program without it is smaller (here about 3x). With a budget that one point fits only without the rewrite, the choice
    switches it off (and fits); with room to spare it keeps it; a model without convolutions has nothing to
    switch off (it is not measured twice)."""
    import jax

    from attacks import xla

    if jax.default_backend() != "cpu":
        pytest.skip("the rewrite is XLA:CPU's")
    shape = (8, 8, 1)
    plain = xla.plain_convolutions(conv_model)
    assert xla.loop_model(plain, (1,) + shape) is plain                     # left as it is
    assert xla.loop_model(conv_model, (1,) + shape) is not conv_model       # rewritten
    assert xla.plain_convolutions(plain, False) is conv_model
    x = np.random.default_rng(0).uniform(size=(5,) + shape).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(plain(x)), np.asarray(conv_model(x)))   # the same function
    measured, real = {}, memory.program_bytes      # each program compiled once in this test

    def cached(fn, shp, norm, n, **kw):
        key = (id(fn), n, kw.get("rewrite", True))
        if key not in measured:
            measured[key] = real(fn, shp, norm, n, **kw)
        return measured[key]

    monkeypatch.setattr(memory, "program_bytes", cached)
    with_rw = memory.auto_chunk_size(conv_model, shape, "linf", budget_bytes=10 ** 12)
    assert with_rw.rewrite and with_rw.fits and with_rw.chunk == 100
    b_rw = memory.program_bytes(conv_model, shape, "linf", 1)
    b_plain = memory.program_bytes(conv_model, shape, "linf", 1, rewrite=False)
    assert b_plain < b_rw
    budget = int(memory.SAFETY * (b_plain + b_rw) / 2)            # one point fits only without the rewrite
    choice = memory.auto_chunk_size(conv_model, shape, "linf", budget_bytes=budget)
    assert not choice.rewrite and choice.fits and choice.chunk >= 1
    assert memory.SAFETY * choice.bytes_for(choice.chunk) <= budget
    lin = multiclass_linear(np.eye(4, 12, dtype=np.float32), np.zeros(4, np.float32))
    assert memory._convolves(conv_model, shape) and not memory._convolves(lin, SHAPE)   # nothing to switch off


def test_evaluate_runs_without_the_rewrite_when_the_choice_says_so(conv_model, tmp_path, monkeypatch):
    """``evaluate(chunk_size="auto")`` follows the choice: with ``rewrite=False`` the attacks never build the
    patches model, and the distances are those of the run with the rewrite (the same function, to float
    rounding)."""
    import attacks.convrewrite as cr
    import jax

    rng = np.random.default_rng(2)
    x = rng.uniform(size=(6, 8, 8, 1)).astype(np.float32)
    y = np.argmax(np.asarray(conv_model(x)), 1)
    built = []
    real = cr.patches_model
    monkeypatch.setattr(cr, "patches_model", lambda fn: built.append(1) or real(fn))
    monkeypatch.setattr(memory, "auto_chunk_size",
                        lambda *a, **k: memory.ChunkChoice(3, 0, 1, 10 ** 9, True, rewrite=False))
    kw = dict(norms=("linf",), attack=AttackSettings(search_steps=3, steps=5, cw=False), bounds=(0.0, 1.0),
              progress=False)
    ev = evaluate({"cnn": conv_model}, (x, y), chunk_size="auto", out_dir=str(tmp_path / "a"), **kw)
    assert built == []
    d = ev.distance("cnn", "linf")
    assert np.all(np.isfinite(d)) and np.all(d > 0)
    if jax.default_backend() == "cpu":
        ev2 = evaluate({"cnn": conv_model}, (x, y), chunk_size=3, out_dir=str(tmp_path / "b"), **kw)
        assert built                                             # the default run does rewrite
        np.testing.assert_allclose(ev2.distance("cnn", "linf"), d, rtol=1e-3)
