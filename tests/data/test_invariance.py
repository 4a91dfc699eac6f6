"""003's shipped invariance examples and human labels: checksums, arrays, and the paper's facts they must show."""
import hashlib
import json
import os
import shutil

import numpy as np
import pytest

from rcurves.data import invariance as inv
from rcurves.data import mnist_wheel as mf

SETS = [("linf", 0.3, False), ("linf", 0.4, False), ("linf", 0.4, True), ("l0", None, False)]
# 003 Table 1: humans switch their label on 21 % / 37 % of the automated l_inf examples at eps 0.3 / 0.4, 88 % of
# the 50 hand-made ones at 0.4 and 55 % of the l_0 examples
CHANGED = {("linf", 0.3, False): 21, ("linf", 0.4, False): 37, ("linf", 0.4, True): 44, ("l0", None, False): 55}
# the l_inf distance of every example from its source, in grey levels (the 0.4 automated set: one level over)
LEVELS = {("linf", 0.3, False): 76.5, ("linf", 0.4, False): 103.0, ("linf", 0.4, True): 102.0}


@pytest.fixture(scope="module")
def sets():
    return {s: inv.tramer_invariance(*s) for s in SETS}


def _git_blob(path):
    data = open(path, "rb").read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_shipped_files_are_the_upstream_bytes():
    digests = inv.verify_files()
    doc = json.load(open(os.path.join(inv.FILES_DIR, "manifest.json")))
    assert set(digests) == set(doc["files"]) and len(digests) == 13
    upstream = {rel: rec for rel, rec in doc["files"].items() if rel != "sources.npz"}
    for rel, rec in upstream.items():            # the git blob id of the file at the repository's commit
        assert _git_blob(os.path.join(inv.FILES_DIR, rel)) == rec["git_blob"], rel
        assert doc["upstream"]["commit"] in rec["origin"]
    assert "MIT License" in open(os.path.join(inv.FILES_DIR, "LICENSE")).read()


def test_arrays_shapes_dtypes_ranges(sets):
    for (kind, eps, manual), d in sets.items():
        n = 50 if manual else 100
        assert d.x.shape == d.source.shape == (n, 28, 28, 1) and d.x.dtype == d.source.dtype == np.float32
        assert d.x.min() == 0.0 and d.x.max() == 1.0 and d.source.min() == 0.0 and d.source.max() == 1.0
        for a in (d.index, d.label, d.human_label):
            assert a.shape == (n,) and a.dtype == np.int64
        assert d.index.min() >= 0 and d.index.max() < 10000 and len(np.unique(d.index)) == n
        assert set(np.unique(d.label)) <= set(range(10)) and set(np.unique(d.human_label)) <= set(range(10))
        assert (d.kind, d.eps, d.manual) == (kind, eps, manual)
    auto = sets[("linf", 0.3, False)]
    for s in (("linf", 0.4, False), ("l0", None, False)):        # the automated sets share their 100 sources
        np.testing.assert_array_equal(sets[s].index, auto.index)
        np.testing.assert_array_equal(sets[s].source, auto.source)
    man = sets[("linf", 0.4, True)]
    np.testing.assert_array_equal(man.index[:25], auto.index[:25])
    np.testing.assert_array_equal(man.index[25:], np.arange(25))


def test_table1_success_rates(sets):
    """The released labels give 003 Table 1's rates exactly."""
    for s, k in CHANGED.items():
        d = sets[s]
        assert int(d.changed.sum()) == k and np.array_equal(d.changed, d.human_label != d.label)


def test_linf_examples_use_their_budget_exactly(sets):
    for s, levels in LEVELS.items():
        d = sets[s]
        gap = np.abs(d.x.astype(np.float64) - d.source).reshape(len(d.x), -1).max(1)
        np.testing.assert_allclose(gap, levels / 255, rtol=0, atol=1e-6)
    eps03 = sets[("linf", 0.3, False)]
    # the 0.3 file keeps half grey levels (float32 on the 0..255 scale): x * 255 is a multiple of 1/2
    half = eps03.x.astype(np.float64) * 510
    assert np.abs(half - np.round(half)).max() < 1e-3 and np.any(np.round(half) % 2 == 1)


def test_l0_distortion_as_the_authors_measure_it(sets):
    """Pixels on the other side of 1/2 (the authors' notebook): median 25 over all 100 examples."""
    d = sets[("l0", None, False)]
    flips = ((d.x > 0.5) ^ (d.source > 0.5)).reshape(100, -1).sum(1)
    assert np.median(flips) == 25.0 and flips.min() > 0


def test_sources_match_the_authors_copy(sets):
    """Our derived sources.npz against the repository's own X_test_100.npy (the automated sets' sources)."""
    x100 = np.load(os.path.join(inv.FILES_DIR, "linf", "X_test_100.npy"), allow_pickle=False)
    auto = sets[("linf", 0.3, False)]
    np.testing.assert_array_equal(np.round(auto.source[..., 0] * 255).astype(np.uint8), x100)


def _full_mnist():
    """Full MNIST's test arrays if a checked copy is at hand without a download (``$RCURVES_MNIST_WHEEL``, or the
    user's cache, verified by its sha256), else None."""
    wheel = os.environ.get(mf.ENV_WHEEL)
    user = os.path.join(os.path.expanduser("~"), ".cache", "rcurves")
    try:
        if wheel:
            return mf.read_wheel(mf._find_wheel(wheel))
        if os.path.isfile(mf.cache_path(user)):
            return mf.raw(user)
    except mf.DataFetchError:
        return None
    return None


def test_sources_and_labels_are_official_mnist_test_images(sets):
    a = _full_mnist()
    if a is None:
        pytest.skip("full MNIST not at hand without a download (set RCURVES_MNIST_WHEEL or fetch it)")
    for s, d in sets.items():
        np.testing.assert_array_equal(d.label, a["y_test"][d.index])
        src = a["x_test"][d.index].astype(np.float32)[..., None] / np.float32(255.0)
        np.testing.assert_array_equal(d.source, src)
        if s in LEVELS:                             # within the budget of their official test image
            gap = np.abs(d.x.astype(np.float64) - src).reshape(len(d.x), -1).max(1)
            np.testing.assert_allclose(gap, LEVELS[s] / 255, rtol=0, atol=1e-6)


def _copy(tmp_path):
    dst = tmp_path / "tramer2020"
    shutil.copytree(inv.FILES_DIR, dst)
    return dst


def test_tampered_file_is_refused(tmp_path):
    dst = _copy(tmp_path)
    assert inv.tramer_invariance("linf", 0.3, folder=dst).x.shape == (100, 28, 28, 1)   # the copy itself loads
    f = dst / "invariance_examples" / "linf" / "automated_eps03_labels.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 1                                   # one label changed
    f.write_bytes(bytes(data))
    with pytest.raises(inv.DataFileError, match="automated_eps03_labels.npy: sha256 .* differs"):
        inv.tramer_invariance("linf", 0.3, folder=dst)
    with pytest.raises(inv.DataFileError, match="differs"):
        inv.verify_files(dst)
    inv.tramer_invariance("l0", folder=dst)         # the other sets' files are intact


def test_tampered_manifest_and_missing_file_are_refused(tmp_path):
    dst = _copy(tmp_path)
    m = dst / "manifest.json"
    doc = json.loads(m.read_text())
    f = dst / "sources.npz"
    f.write_bytes(f.read_bytes() + b"\0")
    doc["files"]["sources.npz"]["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    m.write_text(json.dumps(doc, indent=1) + "\n")        # a manifest rewritten to match an altered file
    with pytest.raises(inv.DataFileError, match="manifest.json: sha256 .* differs"):
        inv.tramer_invariance("linf", 0.4, folder=dst)
    dst2 = _copy(tmp_path / "b")
    (dst2 / "invariance_examples" / "l0" / "automated.npy").unlink()
    with pytest.raises(inv.DataFileError, match="automated.npy: missing"):
        inv.tramer_invariance("l0", folder=dst2)


@pytest.mark.parametrize("kwargs,name", [
    (dict(kind="l2", eps=0.3), "kind"), (dict(kind="linf", eps=0.5), "eps"), (dict(kind="linf"), "eps"),
    (dict(kind="linf", eps=True), "eps"), (dict(kind="linf", eps="0.3"), "eps"), (dict(kind="l0", eps=0.3), "eps"),
    (dict(kind="linf", eps=0.3, manual=True), "manual"), (dict(kind="l0", manual=True), "manual"),
    (dict(kind="linf", eps=0.4, manual="yes"), "manual"),
])
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        inv.tramer_invariance(**kwargs)


def test_eps_of_another_float_type_is_accepted():
    d = inv.tramer_invariance("linf", np.float32(0.4), manual=True)
    assert d.eps == 0.4 and d.x.shape[0] == 50
