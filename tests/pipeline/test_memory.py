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
