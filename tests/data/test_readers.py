"""Readers of the on-disk formats, tested on files the test writes in the exact format (and broken ones)."""
import gzip
import os
import struct

import numpy as np
import pytest

from rcurves.data import readers
from rcurves.data import load_data


def _idx(path, arr, gz=False, code=0x08, chop=0, extra=b""):
    arr = np.asarray(arr)
    head = bytes([0, 0, code, arr.ndim]) + struct.pack(">" + "I" * arr.ndim, *arr.shape)
    body = (head + arr.astype(np.uint8).tobytes())
    body = body[:len(body) - chop] + extra
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(body)
    else:
        with open(path, "wb") as f:
            f.write(body)
    return str(path)


@pytest.fixture
def idx_dir(tmp_path):
    r = np.random.RandomState(0)
    xs = {s: r.randint(0, 256, size=(n, 28, 28)).astype(np.uint8) for s, n in (("train", 30), ("t10k", 20))}
    ys = {s: np.arange(len(xs[s])) % 10 for s in xs}
    for s in xs:
        _idx(tmp_path / f"{s}-images-idx3-ubyte.gz", xs[s], gz=True)
        _idx(tmp_path / f"{s}-labels-idx1-ubyte", ys[s])
    return tmp_path, xs, ys


def test_idx_round_trip_and_load_data(idx_dir):
    folder, xs, ys = idx_dir
    arr = readers.read_idx(str(folder / "t10k-images-idx3-ubyte.gz"))
    np.testing.assert_array_equal(arr, xs["t10k"])
    x, y = readers.load_folder("mnist-idx", str(folder), "test")
    assert x.shape == (20, 28, 28, 1) and x.dtype == np.float32 and y.dtype == np.int64
    # the same images, class-interleaved: match each returned image to the file's
    flat = {xs["t10k"][i].tobytes(): ys["t10k"][i] for i in range(20)}
    for xi, yi in zip(x, y):
        assert flat[np.round(xi[..., 0] * 255).astype(np.uint8).tobytes()] == yi
    assert sorted(np.bincount(y[:10])) == [1] * 10                   # a prefix of 10 holds one of each class
    d = load_data(f"mnist-idx:{folder}", "train")
    assert d.x.shape == (30, 28, 28, 1) and d.name == f"mnist-idx:{folder}:train"
    assert readers.load_folder("mnist-idx", str(folder), "all")[0].shape[0] == 50


@pytest.mark.parametrize("break_it,match", [
    (dict(chop=5), "truncated"),
    (dict(extra=b"\0\0"), "extra bytes"),
    (dict(code=0x42), "data type"),
])
def test_broken_idx_files_name_the_file(tmp_path, break_it, match):
    p = _idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((3, 4, 4)), **break_it)
    with pytest.raises(ValueError, match=match) as e:
        readers.read_idx(p)
    assert "t10k-images-idx3-ubyte" in str(e.value)


def test_idx_bad_magic_truncated_gz_and_label_mismatch(tmp_path):
    bad = tmp_path / "x-idx3-ubyte"
    bad.write_bytes(b"\x01\x02\x03\x04" + b"\0" * 20)
    with pytest.raises(ValueError, match="magic"):
        readers.read_idx(str(bad))
    gz = tmp_path / "y.gz"
    full = gzip.compress(b"\0\0\x08\x01" + struct.pack(">I", 100) + bytes(100))
    gz.write_bytes(full[: len(full) // 2])
    with pytest.raises(ValueError, match="y.gz"):
        readers.read_idx(str(gz))
    _idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((5, 28, 28)))
    _idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(4))
    with pytest.raises(ValueError, match="expected 5 labels"):
        readers.load_folder("mnist-idx", str(tmp_path), "test")
    with pytest.raises(ValueError, match="no train-images"):
        readers.load_folder("mnist-idx", str(tmp_path), "train")


def _cifar(path, x, labels):
    """CIFAR binary records: label byte(s), then the R, G, B planes of 32x32, row-major."""
    planes = np.asarray(x, np.uint8).transpose(0, 3, 1, 2).reshape(len(x), -1)
    lab = np.asarray(labels, np.uint8).reshape(len(x), -1)
    path.write_bytes(np.concatenate([lab, planes], axis=1).tobytes())


def test_cifar10_and_100_round_trip(tmp_path):
    r = np.random.RandomState(1)
    xs = [r.randint(0, 256, size=(4, 32, 32, 3)) for _ in range(6)]
    for i in range(5):
        _cifar(tmp_path / f"data_batch_{i + 1}.bin", xs[i], np.arange(4) + i)
    _cifar(tmp_path / "test_batch.bin", xs[5], [3, 1, 4, 1])
    x, y = readers.read_cifar_bin(str(tmp_path / "test_batch.bin"))
    np.testing.assert_array_equal(x, xs[5])                         # channel order and layout exact
    np.testing.assert_array_equal(y, [3, 1, 4, 1])
    xt, yt = readers.load_folder("cifar10", str(tmp_path), "train")
    assert xt.shape == (20, 32, 32, 3) and sorted(yt.tolist()) == sorted(
        (np.arange(4)[None] + np.arange(5)[:, None]).ravel().tolist())
    c100 = tmp_path / "c100"
    c100.mkdir()
    _cifar(c100 / "test.bin", xs[0], np.stack([[1, 2, 3, 4], [51, 52, 53, 99]], axis=1))
    _, fine = readers.load_folder("cifar100", str(c100), "test")
    _, coarse = readers.load_folder("cifar100-coarse", str(c100), "test")
    assert sorted(fine) == [51, 52, 53, 99] and sorted(coarse) == [1, 2, 3, 4]
    assert load_data(f"cifar10:{tmp_path}", "test").x.shape == (4, 32, 32, 3)


def test_cifar_truncated_or_corrupt_names_the_file(tmp_path):
    p = tmp_path / "test_batch.bin"
    _cifar(p, np.zeros((2, 32, 32, 3)), [0, 1])
    p.write_bytes(p.read_bytes()[:-7])
    with pytest.raises(ValueError, match="test_batch.bin.*whole number"):
        readers.read_cifar_bin(str(p))
    _cifar(p, np.zeros((2, 32, 32, 3)), [0, 12])
    with pytest.raises(ValueError, match="out of range"):
        readers.read_cifar_bin(str(p))
    with pytest.raises(ValueError, match="no data_batch_1.bin"):
        readers.load_folder("cifar10", str(tmp_path), "train")
    with pytest.raises(ValueError, match="no such folder"):
        load_data(f"cifar10:{tmp_path / 'nope'}")
    with pytest.raises(ValueError, match="format"):
        readers.load_folder("svhn", str(tmp_path))
