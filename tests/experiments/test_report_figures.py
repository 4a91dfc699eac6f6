"""The report shows each full run's figures beside its claims; the figures are kept (small) beside the claims.

Everything runs in a synthetic checkout in tmp: ``run_all``'s ROOT, HERE and
CLAIMS point there, with three fake experiment scripts of paper 000, so the
real ``experiments/claims`` is never touched.
"""
import json
import os

import numpy as np
import pytest

from tests._experiments import load

from rcurves.claims.record import claim, code_fingerprint

CAPTION = "l_2 robustness curves of ST and AT-l2-1.5, n = 2000 random test points of full MNIST"


def _png(path, height, width, seed=0):
    """A PNG of noise (does not compress) with a smooth gradient, ``height`` x ``width`` pixels."""
    import matplotlib.image as mpimg

    rng = np.random.default_rng(seed)
    grad = np.linspace(0, 1, width)[None, :, None] * np.ones((height, 1, 3))
    img = np.clip(0.5 * grad + 0.5 * rng.random((height, width, 3)), 0, 1)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mpimg.imsave(path, (img * 255).astype(np.uint8))
    return path


@pytest.fixture
def world(tmp_path, monkeypatch):
    """run_all redirected to a tmp checkout with scripts a_curves, b_table, c_old of paper 000."""
    mod = load("run_all")
    root = tmp_path / "checkout"
    here = root / "experiments"
    for name in ("a_curves", "b_table", "c_old"):
        script = here / "000_fake" / f"{name}.py"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(f"NAME = {name!r}\n")
    monkeypatch.setattr(mod, "ROOT", str(root))
    monkeypatch.setattr(mod, "HERE", str(here))
    monkeypatch.setattr(mod, "CLAIMS", str(here / "claims"))
    return mod, root, here, tmp_path / "results"


def _result(root, out, name, seconds, quick=False, figures=(), draw=(), extra=()):
    """A run's JSON in ``out/name/`` (as rcurves.claims.record.write_result writes it) and the PNGs ``draw``;
    ``extra``: more claims after the script's own."""
    c = claim("000", f"Item of {name}", f"the claim {name} checks", f"what {name} measured", "reproduced")
    code = code_fingerprint([f"experiments/000_fake/{name}.py"], root=str(root))
    (out / name).mkdir(parents=True, exist_ok=True)
    for file, (h, w) in draw:
        _png(str(out / name / file), h, w)
    doc = {"experiment": name, "quick": quick, "seconds": seconds, "claims": [c, *extra], "figures": list(figures),
           "code": code, "per_point": [1.0, 2.0]}
    (out / name / f"{name}.json").write_text(json.dumps(doc))


def test_a_large_png_is_stored_under_200_kb_still_a_png_of_the_same_shape(tmp_path):
    import matplotlib.image as mpimg

    mod = load("run_all")
    big = _png(str(tmp_path / "big.png"), 900, 1400)
    assert os.path.getsize(big) > 2 * mod.FIGURE_LIMIT
    dst = str(tmp_path / "kept" / "big.png")
    size = mod.store_figure(big, dst)
    assert size == os.path.getsize(dst) <= mod.FIGURE_LIMIT < 200 * 1024
    img = mpimg.imread(dst)
    assert img.ndim == 3 and img.shape[0] >= 100
    assert img.shape[1] / img.shape[0] == pytest.approx(1400 / 900, rel=0.01)
    # the area average keeps the picture: the gradient survives the downscaling
    left, right = img[:, : img.shape[1] // 10, :3].mean(), img[:, -img.shape[1] // 10:, :3].mean()
    assert right - left > 0.3
    again = str(tmp_path / "kept" / "again.png")
    mod.store_figure(big, again)
    assert open(again, "rb").read() == open(dst, "rb").read()            # deterministic
    small = _png(str(tmp_path / "small.png"), 60, 80)
    assert os.path.getsize(small) < mod.FIGURE_LIMIT
    mod.store_figure(small, str(tmp_path / "kept" / "small.png"))
    assert open(tmp_path / "kept" / "small.png", "rb").read() == open(small, "rb").read()   # copied as is


def test_report_embeds_kept_figures_beside_their_scripts_and_lists_the_scripts_without(world):
    mod, root, here, out = world
    _result(root, out, "a_curves", 100.0, figures=[{"file": "curves.png", "caption": CAPTION}],
            draw=[("curves.png", (700, 1300))])
    _result(root, out, "b_table", 20.4)                                           # draws nothing
    _result(root, out, "c_old", 3600.0, figures=["old.png"])                     # old form; the PNG is lost
    assert mod.main(["--report", "--out", str(out)]) == 0
    # kept: claims without the payload, figures in the {file, caption} form, the big PNG under 200 KB
    kept = json.loads((here / "claims" / "a_curves.json").read_text())
    assert "per_point" not in kept and kept["figures"] == [{"file": "curves.png", "caption": CAPTION}]
    assert json.loads((here / "claims" / "c_old.json").read_text())["figures"] == [{"file": "old.png",
                                                                                    "caption": ""}]
    fig = here / "claims" / "figures" / "a_curves" / "curves.png"
    assert os.path.getsize(out / "a_curves" / "curves.png") > mod.FIGURE_LIMIT >= os.path.getsize(fig)
    assert not (here / "claims" / "figures" / "c_old").exists()
    text = (here / "README.md").read_text()
    flat = " ".join(text.split())
    # the index: one line per claim, linked to its evidence on the paper's page
    row = next(l for l in text.splitlines() if l.startswith("| Item of a_curves |"))
    assert "**reproduced**" in row and "(000_fake/README.md#a-curves-1)" in row
    page = (here / "000_fake" / "README.md").read_text()
    lines = page.splitlines()
    # the evidence page: each script under its name, its figure with the caption as text below, then its claims
    image = lines.index("![curves.png](../claims/figures/a_curves/curves.png)")
    assert lines.index("## `a_curves`") < image < lines.index('<a id="a-curves-1"></a>')
    assert " ".join(" ".join(lines[image + 2:image + 6]).split()).startswith(f"`curves.png`: {CAPTION}")
    assert "the claim a_curves checks" in " ".join(page.split())
    # the scripts without a figure, and why
    b_part = page[page.index("## `b_table`"):page.index("## `c_old`")]
    assert "Figures: none recorded." in b_part
    c_part = " ".join(page[page.index("## `c_old`"):].split())
    assert "Figures: `old.png` recorded, not in `../claims/figures/c_old/`." in c_part
    assert "Figures:" not in page[page.index("## `a_curves`"):page.index("## `b_table`")]
    # the header: the number of scripts and the sum of their recorded run times
    assert "**3 scripts** (`experiments/<paper>/*.py`), all with a run, run times adding up to " \
           "3,720 s (1 h 2 min); figures for 1 of them." in flat
    # --report rebuilds the same file from the kept JSONs and figures alone (a checkout without results)
    first = text
    assert mod.main(["--report", "--out", str(root / "no-results")]) == 0
    assert (here / "README.md").read_text() == first
    assert (here / "000_fake" / "README.md").read_text() == page
    # and keeping again changes nothing
    before = fig.read_bytes()
    assert mod.sync_kept(str(out), mod.scripts()) == []
    assert fig.read_bytes() == before


def test_quick_runs_and_stale_runs_never_reach_the_kept_claims(world):
    mod, root, here, out = world
    _result(root, out, "a_curves", 5.0, quick=True, figures=[["curves.png", CAPTION]],
            draw=[("curves.png", (100, 150))])
    assert mod.keep_claims(str(out), "a_curves") is None
    assert mod.main(["--report", "--out", str(out)]) == 0                   # the full report ignores it
    assert not (here / "claims").exists()
    text = (here / "README.md").read_text()
    assert "Item of a_curves" not in text and "Without results: a_curves" in " ".join(text.split())
    # the quick report shows the quick run's own figure, linked from its evidence page in --out
    assert mod.main(["--quick", "--report", "--out", str(out)]) == 0
    assert "| Item of a_curves |" in (out / "README.md").read_text()
    quick = (out / "000_fake" / "README.md").read_text()
    assert "![curves.png](../a_curves/curves.png)" in quick
    assert not (here / "claims").exists()
    # a full run whose code has changed since is shown (stale) but not kept by --report
    _result(root, out, "b_table", 7.0, figures=[("table.png", "a table")], draw=[("table.png", (100, 150))])
    (here / "000_fake" / "b_table.py").write_text("NAME = 'edited'\n")
    assert mod.main(["--report", "--out", str(out)]) == 0
    assert not (here / "claims").exists()
    text = (here / "README.md").read_text()
    page = " ".join((here / "000_fake" / "README.md").read_text().split())
    assert "**reproduced** (stale)" in text and "Figures: `table.png` recorded, not in" in page


def test_the_index_lists_paper_claims_and_counts_the_others_which_the_evidence_lists(world):
    """A claim beyond the paper and a self-check get no row in the index, a count per paper instead (which
    verdicts, how many current); the evidence page has them in full."""
    mod, root, here, out = world
    beyond = claim("000", "Beyond item", "a claim the paper does not make", "x", "differs", kind="beyond",
                   why="it does not hold")
    check = claim("000", "Check item", "our tool agrees with itself", "y", "reproduced", kind="self-check")
    _result(root, out, "a_curves", 1.0, extra=[beyond, check])
    _result(root, out, "b_table", 1.0)
    _result(root, out, "c_old", 1.0)
    assert mod.main(["--report", "--out", str(out)]) == 0
    text = (here / "README.md").read_text()
    rows = [l for l in text.splitlines() if l.startswith("| ") and not l.startswith("| claim")]
    assert [r.split(" | ")[0] for r in rows] == ["| Item of a_curves", "| Item of b_table", "| Item of c_old"]
    flat = " ".join(text.split())
    assert "Claims beyond the paper: 1, listed in the evidence (1 differs current)." in flat
    assert "Self-checks of our tools: 1, listed in the evidence (1 reproduced current)." in flat
    page = " ".join((here / "000_fake" / "README.md").read_text().split())
    assert "a claim the paper does not make" in page and "our tool agrees with itself" in page
