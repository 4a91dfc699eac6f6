"""Imports inside rcurves/ run one way: no two files, and no two folders, import each other, directly or through a
third (DESIGN.md, Layout). The graph is read from the source (every import statement, those inside functions
included, and the lazy re-export tables of the packages' ``__init__``), not from what a run happens to load."""
import ast
import collections
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rcurves")


def _modules():
    mods = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                mods[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return mods


def _imports(mods):
    """``{module: {imported module}}`` within rcurves (a name is resolved to the longest module that holds it)."""
    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges = collections.defaultdict(set)
    for m, path in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read())
        targets = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets += [f"{node.module}.{a.name}" for a in node.names]
            elif (path.endswith("__init__.py") and isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value.startswith("rcurves.") and ":" in node.value):
                targets.append(node.value.partition(":")[0])              # a lazy re-export (attacks._lazy)
        for t in targets:
            r = resolve(t)
            if r and r != m:
                edges[m].add(r)
    return edges


def _cycles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def _graphs():
    mods = _modules()
    edges = _imports(mods)
    is_package = {m for m, p in mods.items() if p.endswith("__init__.py")}
    # between files: an import of a package's __init__ is an import of its lazy table, counted at folder level
    files = {m: {t for t in ts if t not in is_package} for m, ts in edges.items()}
    # between folders: a file directly in rcurves/ (cli.py, files.py, ...) is a node of its own

    def unit(m):
        parts = m.split(".")
        return ".".join(parts[:2]) if len(parts) > 2 or m in is_package else m

    folders = collections.defaultdict(set)
    for m, ts in edges.items():
        if m == "rcurves":
            continue              # the top package's lazy table re-exports every folder's public names
        for t in ts:
            if t != "rcurves" and unit(m) != unit(t):
                folders[unit(m)].add(unit(t))
    return mods, files, folders


def test_no_import_circle_between_files_of_rcurves():
    mods, files, _ = _graphs()
    assert _cycles(mods, files) == []


def test_no_import_circle_between_folders_of_rcurves():
    mods, _, folders = _graphs()
    assert _cycles(set(folders) | {t for ts in folders.values() for t in ts}, folders) == []


def test_the_layers_sit_below_models_and_certify_and_certify_above_models():
    """The network description and its bounds import neither models nor certify; models never imports certify."""
    _, _, folders = _graphs()
    assert not folders["rcurves.nets"] & {"rcurves.models", "rcurves.certify"}
    assert "rcurves.certify" not in folders["rcurves.models"]
    assert {"rcurves.nets"} <= folders["rcurves.models"] and {"rcurves.nets", "rcurves.models"} <= folders["rcurves.certify"]


@pytest.mark.parametrize("edges, want", [({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
                                         ({"a": {"b"}, "b": {"c"}}, [])])
def test_the_circle_finder_finds_a_circle_through_a_third(edges, want):
    assert _cycles({"a", "b", "c"}, edges) == want
