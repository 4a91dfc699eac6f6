"""The public names (DESIGN.md) are served lazily (PEP 562) and every one of them resolves."""
import importlib
import importlib.util
import subprocess
import sys

import pytest

PACKAGES = ["attacks", "rcurves", "rcurves.certify", "rcurves.claims", "rcurves.data", "rcurves.exact",
            "rcurves.models", "rcurves.pipeline", "rcurves.sparsity"]
DESIGN = {  # names DESIGN.md fixes
    "attacks": ["pgd", "minimal_distance", "carlini_wagner_l2", "cap_pgd", "vertex_pgd", "ddn", "fmn", "ensemble",
                "MinimalResult"],
    "rcurves": ["linear_distance", "linear_perturbation", "linear_curve_scale", "robustness_curve", "margin_curve",
                "curve_intersections", "l2_sparsity", "linf_sparsity", "linear_l2_sparsity", "linear_linf_sparsity",
                "expected_l2_sparsity", "expected_linf_sparsity", "interclass_distances", "nn1_predict",
                "nn1_distance", "evaluate", "zoo"],
    "rcurves.certify": ["mlp", "from_model", "certified_radius", "exact_distance", "robustness_band"],
    "rcurves.models": ["load"],
    "rcurves.data": ["load_data"],
}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_is_listed(package):
    mod = importlib.import_module(package)
    assert set(DESIGN.get(package, [])) <= set(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None, name
    assert set(mod.__all__) <= set(dir(mod))
    submodules = [n for n in ("milp", "zoo", "record", "minimal") if importlib.util.find_spec(f"{package}.{n}")]
    for n in submodules:                          # submodules are attributes, as with eager imports
        assert getattr(mod, n).__name__ == f"{package}.{n}"
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        mod.not_a_name  # noqa: B018


def test_attack_functions_keep_their_names_after_their_modules_load():
    """attacks/pgd.py defines attacks.pgd: importing the submodule first must not replace the function."""
    code = ("import attacks.pgd, attacks.ddn, attacks.fmn, attacks.ensemble, attacks\n"
            "assert callable(attacks.pgd) and attacks.pgd.__name__ == 'pgd', attacks.pgd\n"
            "assert attacks.ddn.__module__ == 'attacks.ddn' and callable(attacks.ensemble)\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={"JAX_PLATFORMS": "cpu", "PATH": ""})


def test_import_rcurves_loads_no_module_until_a_name_is_used():
    code = ("import sys, rcurves\n"
            "mods = sorted(m for m in sys.modules if m.startswith(('rcurves.', 'attacks')))\n"
            "assert mods == ['attacks._lazy'] or mods == ['attacks', 'attacks._lazy'], mods\n"
            "rcurves.robustness_curve\n"
            "assert 'rcurves.curves' in sys.modules and 'rcurves.models.zoo' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={"JAX_PLATFORMS": "cpu", "PATH": ""})
