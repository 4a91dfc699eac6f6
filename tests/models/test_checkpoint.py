"""Checkpoints: bit-exact round trip, clear errors for corrupted or foreign files, no pickle."""
import json
import os
import pickle

import jax
import numpy as np
import pytest

from rcurves.models.checkpoint import (
    CheckpointError,
    atomic_write_bytes,
    load_checkpoint,
    logits_fn_from_checkpoint,
    save_checkpoint,
)
from rcurves.models import ModelConfig, init_params
from rcurves.models.training import TrainConfig

KEY = jax.random.PRNGKey(3)
CFG = ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10, hidden=(16,))


@pytest.fixture
def saved(tmp_path):
    params = init_params(CFG, KEY)
    # awkward float32 values: subnormals, signed zero, extremes
    params = dict(params)
    k = np.array(params["Dense_0"]["kernel"])
    k.flat[:4] = [np.float32(1e-45), np.float32(-0.0), np.finfo(np.float32).max, np.float32(np.pi)]
    params["Dense_0"] = {**params["Dense_0"], "kernel": k}
    tcfg = TrainConfig(method="at", norm="l2", eps=1.5, epochs=2, seed=7)
    path = str(tmp_path / "ckpt")
    save_checkpoint(path, params, CFG, train=tcfg, data_fingerprint="abc123", metrics={"test_accuracy": 0.5})
    return path, params, tcfg


def _leaves(tree):
    return jax.tree_util.tree_leaves_with_path(tree)


def test_round_trip_is_bit_exact(saved):
    path, params, tcfg = saved
    ck = load_checkpoint(path)
    a, b = _leaves(params), _leaves(ck.params)
    assert [jax.tree_util.keystr(p) for p, _ in a] == [jax.tree_util.keystr(p) for p, _ in b]
    for (_, u), (_, v) in zip(a, b):
        u, v = np.asarray(u), np.asarray(v)
        assert u.dtype == v.dtype == np.float32 and u.shape == v.shape
        assert u.tobytes() == v.tobytes()          # bit-exact, incl. -0.0 and subnormals
    assert ck.model == CFG and ck.train == tcfg
    assert ck.data_fingerprint == "abc123" and ck.metrics == {"test_accuracy": 0.5}


def test_logits_of_the_loaded_model_are_identical(saved):
    path, params, _ = saved
    from rcurves.models import make_logits_fn

    f, _ = logits_fn_from_checkpoint(path)
    x = jax.random.uniform(KEY, (5, 8, 8, 1))
    assert np.array_equal(np.asarray(f(x)), np.asarray(make_logits_fn(CFG, params)(x)))


def test_a_flipped_byte_is_reported_as_corruption(saved):
    path = saved[0]
    p = os.path.join(path, "params.msgpack")
    blob = bytearray(open(p, "rb").read())
    blob[len(blob) // 2] ^= 0x01
    open(p, "wb").write(bytes(blob))
    with pytest.raises(CheckpointError, match="corrupted"):
        load_checkpoint(path)


def test_a_truncated_file_is_reported(saved):
    path = saved[0]
    p = os.path.join(path, "params.msgpack")
    blob = open(p, "rb").read()
    open(p, "wb").write(blob[: len(blob) // 3])
    with pytest.raises(CheckpointError, match="corrupted"):
        load_checkpoint(path)


def test_a_pickle_is_never_unpickled(saved, tmp_path):
    """A pickle whose loading would create a file, with a matching hash: refused, and no side effect."""
    path = saved[0]
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    blob = pickle.dumps(Evil())
    open(os.path.join(path, "params.msgpack"), "wb").write(blob)
    meta_path = os.path.join(path, "meta.json")
    meta = json.load(open(meta_path))
    import hashlib

    meta["params_sha256"] = hashlib.sha256(blob).hexdigest()
    json.dump(meta, open(meta_path, "w"))
    with pytest.raises(CheckpointError):
        load_checkpoint(path)
    assert not marker.exists()


def test_foreign_and_missing_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match="no such directory"):
        load_checkpoint(str(tmp_path / "nope"))
    f = tmp_path / "file.bin"
    f.write_bytes(b"\x00")
    with pytest.raises(CheckpointError, match="got a file"):
        load_checkpoint(str(f))
    d = tmp_path / "foreign"
    d.mkdir()
    with pytest.raises(CheckpointError, match="missing meta.json"):
        load_checkpoint(str(d))
    (d / "meta.json").write_text(json.dumps({"format": "orbax", "step": 3}))
    with pytest.raises(CheckpointError, match="not an rcurves checkpoint"):
        load_checkpoint(str(d))
    (d / "meta.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(str(d))


def test_parameters_of_another_architecture_are_refused(saved, tmp_path):
    path = saved[0]
    other = ModelConfig(arch="mlp", input_shape=(8, 8, 1), n_classes=10, hidden=(32,))
    other_path = str(tmp_path / "other")
    save_checkpoint(other_path, init_params(other, KEY), other)
    # graft the other model's (consistent, hashed) params under this model's meta.json
    meta = json.load(open(os.path.join(path, "meta.json")))
    meta_other = json.load(open(os.path.join(other_path, "meta.json")))
    meta_other["model"] = meta["model"]
    json.dump(meta_other, open(os.path.join(other_path, "meta.json"), "w"))
    with pytest.raises(CheckpointError, match="shape"):
        load_checkpoint(other_path)
    with pytest.raises(CheckpointError, match="does not match|do not match|shape"):
        save_checkpoint(str(tmp_path / "bad"), init_params(other, KEY), CFG)


def test_checkpoint_errors_are_value_errors():
    assert issubclass(CheckpointError, ValueError)


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path):
    p = tmp_path / "sub" / "f.bin"
    atomic_write_bytes(str(p), b"one")
    atomic_write_bytes(str(p), b"two")
    assert p.read_bytes() == b"two"
    assert sorted(os.listdir(tmp_path / "sub")) == ["f.bin"]
    mask = os.umask(0o022)
    os.umask(mask)
    assert os.stat(p).st_mode & 0o777 == 0o666 & ~mask   # not mkstemp's 0600
