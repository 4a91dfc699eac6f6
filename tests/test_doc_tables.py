"""The docs' measured tables are what ``benchmarks/doc_tables.py`` writes from the committed JSON: a number
typed by hand into a generated table, or a benchmark re-run without regenerating the page, fails here."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _generator():
    spec = importlib.util.spec_from_file_location("doc_tables", os.path.join(ROOT, "benchmarks", "doc_tables.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


G = _generator()


@pytest.mark.parametrize("name", sorted(G.TABLES))
def test_table_is_generated(name):
    with open(os.path.join(ROOT, G.TABLES[name].doc)) as f:
        text = f.read()
    have = G.current(name, text)
    assert have is not None, f"{G.TABLES[name].doc} lacks the markers of table {name}"
    assert have == G.render(name), (f"{G.TABLES[name].doc}: table {name} differs from "
                                    f"benchmarks/measured/{G.TABLES[name].source}; run python benchmarks/doc_tables.py")


def test_every_table_names_command_machine_and_date():
    for name in G.TABLES:
        first = G.render(name).splitlines()[0]
        assert first.startswith("Measured by `python benchmarks/"), first
        assert " on " in first and ", jax " in first


def test_a_hand_edit_is_caught(tmp_path):
    """The comparison can fail: a table with one number changed is not what the generator writes."""
    name = sorted(G.TABLES)[0]
    block = G.render(name)
    edited = block.replace("|", "| 9.99", 1) if "|" in block else block + "x"
    text = f"<!-- table:{name} -->\n{edited}\n<!-- /table:{name} -->\n"
    assert G.current(name, text) == edited != block


def test_the_recorded_command_can_be_pasted_back(monkeypatch):
    """An argument with spaces or parentheses (``--only "cnn C.1 (MNIST)"``) is quoted, so the command in a
    table's provenance line runs as it reads."""
    import shlex
    import sys

    spec = importlib.util.spec_from_file_location("_common_for_test", os.path.join(ROOT, "benchmarks", "_common.py"))
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    argv = [os.path.join(ROOT, "benchmarks", "model_scale.py"), "--only", "mlp 784-256-256,cnn C.1 (MNIST)", "--n", "8"]
    monkeypatch.setattr(sys, "argv", argv)
    line = common.command_line()
    assert line == "python benchmarks/model_scale.py --only 'mlp 784-256-256,cnn C.1 (MNIST)' --n 8"
    assert shlex.split(line)[2:] == argv[1:]
