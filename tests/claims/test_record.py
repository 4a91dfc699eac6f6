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
