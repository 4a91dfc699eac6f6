"""rcurves.claims.record: a claim must carry a verdict that a rule could have denied, and its code's fingerprint."""
import json

import pytest

from rcurves.claims.record import CLAIM_KEYS, claim, code_fingerprint, is_stale, write_result
from rcurves.claims.verdicts import paired_effect


def test_a_claim_other_than_reproduced_must_say_why():
    c = claim("000", "Figure 3", "the paper's statement", "what we measured", "reproduced")
    assert set(c) == CLAIM_KEYS and c["kind"] == "paper"
    with pytest.raises(ValueError, match="why"):
        claim("000", "Figure 3", "s", "o", "differs")
    with pytest.raises(ValueError, match="verdict"):
        claim("000", "Figure 3", "s", "o", "mostly reproduced", why="x")
    with pytest.raises(ValueError, match="kind"):
        claim("000", "Figure 3", "s", "o", "reproduced", kind="opinion")


def test_the_index_fields_are_short_or_refused():
    c = claim("003", "Table 1", "s", "o", "reproduced", short="humans relabel eps 0.3 examples",
              paper_value="21%", ours_value="19.6% [17.2, 22.2]")
    assert set(c) == CLAIM_KEYS | {"short", "paper_value", "ours_value"} and c["paper_value"] == "21%"
    with pytest.raises(ValueError, match="short"):
        claim("003", "Table 1", "s", "o", "reproduced", short="x" * 71)
    with pytest.raises(ValueError, match="ours_value"):
        claim("003", "Table 1", "s", "o", "reproduced", ours_value=" ")


def test_a_verdict_object_brings_its_test_and_reason():
    v = paired_effect(30, 1, alpha=0.01)                        # 30 discordant points for the claim, 1 against
    c = claim("000", "Table 1", "A is more robust than B", "robust error 0.1 vs 0.4", v)
    assert c["verdict"] == v.verdict and v.test in c["ours"] and c["ours"].startswith("robust error 0.1 vs 0.4")
    assert v.verdict == "reproduced"
    w = paired_effect(1, 30, alpha=0.01)                        # the opposite: the rule must deny the claim
    assert w.verdict == "differs"
    assert claim("000", "Table 1", "A is more robust than B", "o", w)["why"]


def test_results_record_their_code_and_go_stale_when_it_changes(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text("x = 1\n")
    fp = code_fingerprint(["mod.py"], root=str(tmp_path))
    doc = {"code": fp}
    assert not is_stale(doc, root=str(tmp_path))
    src.write_text("x = 2\n")
    assert is_stale(doc, root=str(tmp_path))
    assert is_stale({}, root=str(tmp_path))                     # no fingerprint: never shown as current


def test_write_result_refuses_malformed_claims_and_writes_strict_json(tmp_path):
    good = claim("001", "eq. 19", "s", "o", "reproduced")
    with pytest.raises(ValueError, match="malformed"):
        write_result("x", str(tmp_path), False, {}, [{"paper": "001"}])
    path = write_result("x", str(tmp_path), True, {"d": [1.0, float("inf")]}, [good])
    doc = json.loads(open(path).read(), parse_constant=lambda t: (_ for _ in ()).throw(ValueError(t)))
    assert doc["claims"] == [good] and doc["quick"] is True and doc["d"] == [1.0, None]
    assert "rcurves/claims/record.py" in doc["code"]["files"]


def test_docstrings_comments_and_formatting_do_not_count_code_does(tmp_path):
    import shutil

    from rcurves.claims.record import ROOT, changed_files

    shutil.copytree(ROOT + "/attacks", tmp_path / "attacks", ignore=shutil.ignore_patterns("__pycache__"))
    doc = {"code": code_fingerprint(["attacks/minimal.py", "attacks/pgd.py"], root=str(tmp_path))}
    path = tmp_path / "attacks" / "minimal.py"
    src = path.read_text()
    assert '"""' in src
    first = src.index('"""') + 3
    # a docstring edit (module and function docstrings), a comment and re-formatting: nothing is stale
    edited = src[:first] + "An edited module docstring. " + src[first:]
    edited = edited.replace("def minimal_distance(", "# a new comment\ndef minimal_distance(", 1)
    edited = edited.replace("\n\n\n", "\n\n\n\n", 3)
    path.write_text(edited)
    assert not is_stale(doc, root=str(tmp_path))
    # a change to the code: stale, and the report can name the module
    path.write_text(edited + "\n_EXTRA = 1\n")
    assert changed_files(doc, root=str(tmp_path)) == ["attacks/minimal.py"]


def test_a_code_edit_stales_only_the_results_that_loaded_the_module(tmp_path):
    """Two scripts in fresh processes: one uses only Lemma 1, one the minimal-distance attack; their
    fingerprints cover what each loaded, so an edit to attacks/minimal.py stales the second only."""
    import json
    import shutil
    import subprocess
    import sys

    from rcurves.claims.record import ROOT, changed_files

    for d in ("attacks", "rcurves"):
        shutil.copytree(f"{ROOT}/{d}", tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    script = ("import sys, json, numpy as np\n"
              "sys.path.insert(0, sys.argv[1])\n"
              "import rcurves, attacks\n"
              "from rcurves.claims.record import code_fingerprint\n"
              "{body}\n"
              "print(json.dumps(code_fingerprint(root=sys.argv[1])))\n")
    theory = "rcurves.linear_distance(np.ones(3), 0.0, np.ones((2, 3)), 2)"
    attack = "attacks.minimal_distance"
    docs = {}
    for name, body in (("theory", theory), ("attack", attack)):
        out = subprocess.run([sys.executable, "-c", script.format(body=body), str(tmp_path)], capture_output=True,
                             text=True, check=True, env={"JAX_PLATFORMS": "cpu", "PATH": ""}).stdout
        docs[name] = {"code": json.loads(out.strip().splitlines()[-1])}
    files = {k: set(v["code"]["files"]) for k, v in docs.items()}
    assert "rcurves/exact/linear.py" in files["theory"] and "attacks/minimal.py" in files["attack"]
    assert "attacks/minimal.py" not in files["theory"] and "rcurves/models/zoo.py" not in files["theory"]
    assert not any(f.endswith("__init__.py") for f in files["theory"] | files["attack"])   # name tables
    path = tmp_path / "attacks" / "minimal.py"
    path.write_text(path.read_text() + "\n_EXTRA = 1\n")
    assert changed_files(docs["attack"], root=str(tmp_path)) == ["attacks/minimal.py"]
    assert not is_stale(docs["theory"], root=str(tmp_path))


def test_package_inits_are_only_tables_of_lazy_names():
    """The fingerprint leaves the packages' __init__.py out: true only while each is nothing but a name table."""
    import ast
    import glob

    from rcurves.claims.record import ROOT

    inits = glob.glob(f"{ROOT}/rcurves/**/__init__.py", recursive=True) + [f"{ROOT}/attacks/__init__.py"]
    assert len(inits) >= 9
    for path in inits:
        body = ast.parse(open(path).read()).body
        kinds = []
        for node in body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                kinds.append("doc")
            elif isinstance(node, ast.ImportFrom) and node.module == "attacks._lazy":
                kinds.append("import")
            elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in ("(__getattr__, __dir__)",
                                                                                    "__getattr__, __dir__"):
                assert isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "attach", path
                kinds.append("table")
            elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
                kinds.append("all")
            else:
                raise AssertionError(f"{path}: {ast.unparse(node)[:60]} is more than a name table")
        assert kinds == ["doc", "import", "table", "all"], (path, kinds)


def test_figures_are_recorded_with_captions_and_old_lists_of_names_still_read(tmp_path):
    from rcurves.claims.record import figure_entries

    good = claim("001", "eq. 19", "s", "o", "reproduced")
    (tmp_path / "curves.png").write_bytes(b"png")
    path = write_result("x", str(tmp_path), False, {}, [good],
                        [("curves.png", "l_2 robustness curves of ST and AT,\n n = 2000 random test points"),
                         str(tmp_path / "plain.png")])
    doc = json.loads(open(path).read())
    assert doc["figures"] == [{"file": "curves.png",
                               "caption": "l_2 robustness curves of ST and AT, n = 2000 random test points"},
                              {"file": "plain.png", "caption": ""}]          # a str: its base name, no caption
    assert figure_entries(doc) == doc["figures"]                              # the JSON form reads back as is
    assert figure_entries({"figures": ["a.png", "b.png"]}) == [               # committed JSONs: names only
        {"file": "a.png", "caption": ""}, {"file": "b.png", "caption": ""}]
    assert figure_entries({}) == [] and figure_entries({"figures": None}) == []
    for bad in ([("a.png", "c", "extra")], [("a.png", 3)], [None], [("", "caption")]):
        with pytest.raises(ValueError, match="figures"):
            write_result("y", str(tmp_path), False, {}, [good], bad)
    assert not (tmp_path / "y.json").exists()                                 # refused before writing
