"""Local robustness properties in VNN-LIB: the subset VNN-COMP's image benchmarks use.

A VNN-LIB file is SMT-LIB 2 over real constants ``X_0 .. X_{n-1}`` (the
network's inputs) and ``Y_0 .. Y_{m-1}`` (its outputs), and its assertions
describe a **counterexample**: the property holds when no input satisfies
them all. A local robustness property around a point of class ``label`` reads

    (declare-const X_0 Real) ... (declare-const Y_9 Real)
    (assert (<= X_0 0.53))  (assert (>= X_0 0.47))   ; one interval per input
    ...
    (assert (or (and (>= Y_0 Y_7)) (and (>= Y_1 Y_7)) ... (and (>= Y_9 Y_7))))

"inside the box, some other class scores at least as high as ``label``";
proving it unsatisfiable proves ``label`` stays the argmax over the box.

:func:`read_vnnlib` accepts

* ``(declare-const X_i Real)`` / ``(declare-const Y_j Real)``, each once,
  before use; indices ``0 .. n-1`` with none missing;
* input intervals ``(<= X_i c)``, ``(>= X_i c)`` and the same with the
  operands swapped (``(<= c X_i)``); constants are decimals, possibly negative
  or in scientific notation (``-1.5e-3``), or ``(- c)``; several bounds on one
  side of an input are intersected (the tightest is kept); every input needs a
  lower and an upper bound, with lower <= upper;
* exactly one output assertion, "some ``Y_j >= Y_label``": either the
  disjunction ``(or (and (>= Y_j Y_label)) (and (>= Y_k Y_label)) ...)``
  (a disjunct may also be the bare comparison), or a single comparison
  ``(>= Y_j Y_label)`` (a property against one class only); ``(<= Y_label Y_j)``
  is the same comparison written the other way;
* conjunctions anywhere they mean "all of these": ``(assert (and ...))``, and an
  ``or`` with a single ``and`` disjunct (the "multiple boxes" form of VNN-LIB
  with one box), which may bundle the input intervals with the output
  constraint;
* ``;`` comments, any whitespace and line breaks, ``.vnnlib.gz`` files, and the
  commands ``set-logic``, ``set-info``, ``set-option``, ``check-sat``,
  ``get-model``, ``exit`` (ignored).

**Strict comparisons** (``<``, ``>``) are read as their non-strict versions:
the box becomes its closure and the counterexample region gains the ties
``Y_j = Y_label``. Proving the closed property proves the strict one, so a
"holds" answer stays sound; a counterexample exactly on a tie (a measure-zero
event) would satisfy the closed property but not a strict one.

Anything else raises ``ValueError`` naming the file, the line and what is not
supported: constraints between inputs or on sums of them, bounds on outputs,
outputs compared with constants, ``=``, ``not``, several output assertions (a
conjunction of violations), disjunctions of several boxes, mixed labels,
``Y_j >= Y_j``, undeclared or non-``Real`` variables, missing bounds,
lower > upper.

**Layout.** ``X_i`` is the ``i``-th entry of the ONNX model's input flattened
in C order of the shape the model declares -- NCHW (batch of one dropped) for
the image models of VNN-COMP. The toolkit's images are NHWC:
:func:`to_nhwc` reorders such flat vectors (``RobustnessProperty.box_nhwc``
does it for a property's box), :func:`from_nhwc` goes back. For one channel
(MNIST) the two orders coincide.
"""
from __future__ import annotations

import dataclasses
import gzip
import math
import operator
import os
import re
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

# ---------------------------------------------------------------------------------------------------------------
# s-expressions


class _Atom(NamedTuple):
    text: str
    line: int


class _List(NamedTuple):
    items: Tuple[Any, ...]   # of _Atom and _List
    line: int                # of the opening parenthesis


_Expr = Union[_Atom, _List]

# a line break | a comment to the end of the line | ( | ) | anything else up to a delimiter (other whitespace
# matches nothing and is skipped)
_TOKEN = re.compile(r"\n|;[^\n]*|\(|\)|[^\s();]+")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_VARIABLE = re.compile(r"([XY])_(0|[1-9]\d*)")
_COMPARISONS = ("<=", ">=", "<", ">")
_IGNORED = ("set-logic", "set-info", "set-option", "check-sat", "get-model", "exit")


class _Reader:
    """Error messages that name the file and line."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, line: Optional[int], what: str) -> ValueError:
        where = self.path if line is None else f"{self.path}:{line}"
        return ValueError(f"{where}: {what}")


def _parse(text: str, rd: _Reader) -> List[_Expr]:
    """The top-level s-expressions of ``text``."""
    stack: List[Tuple[int, List[_Expr]]] = [(0, [])]
    items = stack[-1][1]
    line = 1
    for tok in _TOKEN.findall(text):
        if tok == "\n":
            line += 1
        elif tok == "(":
            items = []
            stack.append((line, items))
        elif tok == ")":
            if len(stack) == 1:
                raise rd.fail(line, "unbalanced ')'")
            start, done = stack.pop()
            items = stack[-1][1]
            items.append(_List(tuple(done), start))
        elif tok[0] != ";":
            items.append(_Atom(tok, line))
    if len(stack) > 1:
        raise rd.fail(stack[-1][0], "unbalanced '(': this parenthesis is never closed")
    return stack[0][1]


def _show(e: _Expr, limit: int = 80) -> str:
    def text(e):
        return e.text if isinstance(e, _Atom) else "(" + " ".join(text(i) for i in e.items) + ")"

    s = text(e)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _head(e: _Expr) -> Optional[str]:
    if isinstance(e, _List) and e.items and isinstance(e.items[0], _Atom):
        return e.items[0].text
    return None


# ---------------------------------------------------------------------------------------------------------------
# the property


@dataclasses.dataclass(frozen=True, eq=False)
class RobustnessProperty:
    """A local robustness property: inside the box, ``label`` beats every class in ``others``.

    Attributes:
      x_lo, x_hi: ``(n_inputs,)`` float64 (read-only), the input box, in the order of the file's ``X_i``
        (the model's input flattened in C order; see the module doc for NCHW vs NHWC).
      label: the class that must stay on top.
      n_outputs: the number of outputs ``Y_j`` declared.
      others: the sorted classes the file compares ``label`` against: the property is violated where some
        ``Y_j >= Y_label``, ``j`` in ``others``. All classes but ``label`` for the usual argmax property
        (``is_argmax``).
      path: the file it was read from, or None.

    Unpacking gives ``(x_lo, x_hi, label)`` (``x_lo, x_hi, label = read_vnnlib(p)``) for an argmax property;
    for a property against a subset of the classes it raises ``ValueError`` (the triple would state a
    different property), use the attributes.
    """

    x_lo: np.ndarray
    x_hi: np.ndarray
    label: int
    n_outputs: int
    others: Tuple[int, ...]
    path: Optional[str] = None

    def __post_init__(self):
        lo, hi = _check_box(self.x_lo, self.x_hi)
        n_outputs, label = _check_label(self.label, self.n_outputs)
        others = _check_others(self.others, label, n_outputs)
        for name, value in (("x_lo", lo), ("x_hi", hi), ("label", label), ("n_outputs", n_outputs),
                            ("others", others)):
            object.__setattr__(self, name, value)
        if self.path is not None:
            object.__setattr__(self, "path", os.fspath(self.path))

    @property
    def n_inputs(self) -> int:
        return int(self.x_lo.shape[0])

    @property
    def is_argmax(self) -> bool:
        """True when ``others`` is every class but ``label``: "``label`` stays the argmax over the box"."""
        return self.others == tuple(j for j in range(self.n_outputs) if j != self.label)

    def box(self, shape: Optional[Sequence[int]] = None) -> Tuple[np.ndarray, np.ndarray]:
        """``(x_lo, x_hi)`` reshaped, in C order, to ``shape`` (default: flat ``(n_inputs,)``).

        C order of the file's ``X_i``: right for an MLP's flat input or a one-channel image
        (``shape=(28, 28, 1)`` for MNIST); for a multi-channel NCHW model use :meth:`box_nhwc`.
        """
        if shape is None:
            return self.x_lo, self.x_hi
        shape = _check_shape(shape, "shape")
        if math.prod(shape) != self.n_inputs:
            raise ValueError(f"shape: expected {self.n_inputs} entries in all (the property's inputs), "
                             f"got shape {shape} ({math.prod(shape)} entries)")
        return self.x_lo.reshape(shape), self.x_hi.reshape(shape)

    def box_nhwc(self, chw_shape: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
        """``(x_lo, x_hi)`` of shape ``(H, W, C)``: the box of a model whose input is ``(C, H, W)`` (NCHW)."""
        return to_nhwc(self.x_lo, chw_shape), to_nhwc(self.x_hi, chw_shape)

    def __iter__(self) -> Iterator[Any]:
        if not self.is_argmax:
            raise ValueError(
                f"{self.path or 'property'}: compares label {self.label} only against classes {list(self.others)} "
                f"of {self.n_outputs}, so it is not '(x_lo, x_hi, label): label stays the argmax'; "
                f"use the attributes x_lo, x_hi, label, others"
            )
        return iter((self.x_lo, self.x_hi, self.label))


def _check_box(x_lo: Any, x_hi: Any) -> Tuple[np.ndarray, np.ndarray]:
    out = []
    for name, v in (("x_lo", x_lo), ("x_hi", x_hi)):
        try:
            a = np.array(v, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name}: expected an array of numbers, got {type(v).__name__} ({e})") from None
        if a.ndim != 1 or a.shape[0] == 0:
            raise ValueError(
                f"{name}: expected a non-empty flat vector (n_inputs,) in the order of the model's input "
                f"(flatten it, or from_nhwc(x) for an NHWC image of an NCHW model), got shape {a.shape}"
            )
        if not np.isfinite(a).all():
            i = int(np.argmin(np.isfinite(a)))
            raise ValueError(f"{name}: expected finite numbers, entry {i} is {a[i]}")
        a.setflags(write=False)
        out.append(a)
    lo, hi = out
    if lo.shape != hi.shape:
        raise ValueError(f"x_hi: expected shape {lo.shape} to match x_lo, got {hi.shape}")
    bad = lo > hi
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"x_hi: lower bound above upper bound at input {i} ({lo[i]!r} > {hi[i]!r})")
    return lo, hi


def _int(v: Any, name: str) -> int:
    """``v`` as an int: Python, NumPy or JAX integers (0-d arrays too), never bools or floats."""
    if isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{name}: expected an integer, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise ValueError(f"{name}: expected an integer, got {v!r}") from None


def _check_label(label: Any, n_outputs: Any) -> Tuple[int, int]:
    n = _int(n_outputs, "n_outputs")
    if n < 2:
        raise ValueError(f"n_outputs: expected at least 2 classes, got {n}")
    label = _int(label, "label")
    if not 0 <= label < n:
        raise ValueError(f"label: expected a class in [0, {n}), got {label}")
    return n, label


def _check_others(others: Any, label: int, n_outputs: int) -> Tuple[int, ...]:
    try:
        js = [_int(j, "others") for j in others]
    except TypeError:
        raise ValueError(f"others: expected a sequence of classes, got {others!r}") from None
    if not js:
        raise ValueError("others: expected at least one class to compare the label against")
    if len(set(js)) != len(js):
        raise ValueError(f"others: classes repeat in {js}")
    for j in js:
        if not 0 <= j < n_outputs or j == label:
            raise ValueError(f"others: expected classes in [0, {n_outputs}) other than label {label}, got {j}")
    return tuple(sorted(js))


def _check_shape(shape: Any, name: str) -> Tuple[int, ...]:
    try:
        dims = tuple(_int(s, name) for s in shape)
    except TypeError:
        raise ValueError(f"{name}: expected a tuple of positive integers, got {shape!r}") from None
    if any(s <= 0 for s in dims):
        raise ValueError(f"{name}: expected positive sizes, got {dims}")
    return dims


# ---------------------------------------------------------------------------------------------------------------
# layout


def to_nhwc(x: Any, chw_shape: Sequence[int]):
    """Flat NCHW-ordered vectors to NHWC images.

    Args:
      x: ``(..., C*H*W)``, each vector the C-order flattening of a ``(C, H, W)`` input (the order of the
        ``X_i`` of a VNN-LIB property for an ONNX image model). NumPy or JAX arrays (works under ``jit``).
      chw_shape: ``(C, H, W)``.

    Returns:
      ``(..., H, W, C)``: ``out[..., h, w, c] == x[..., (c * H + h) * W + w]``.
    """
    c, h, w = _check_chw(chw_shape)
    if not hasattr(x, "reshape"):
        x = np.asarray(x)
    if x.ndim < 1 or x.shape[-1] != c * h * w:
        raise ValueError(f"x: expected shape (..., {c * h * w}) for chw_shape {(c, h, w)}, got {tuple(x.shape)}")
    lead = tuple(x.shape[:-1])
    k = len(lead)
    return x.reshape(lead + (c, h, w)).transpose(tuple(range(k)) + (k + 1, k + 2, k))


def from_nhwc(x: Any):
    """NHWC images ``(..., H, W, C)`` to flat NCHW-ordered vectors ``(..., C*H*W)``; inverse of :func:`to_nhwc`."""
    if not hasattr(x, "reshape"):
        x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(f"x: expected images of shape (..., H, W, C), got {tuple(x.shape)}")
    lead = tuple(x.shape[:-3])
    k = len(lead)
    h, w, c = x.shape[-3:]
    return x.transpose(tuple(range(k)) + (k + 2, k, k + 1)).reshape(lead + (c * h * w,))


def _check_chw(chw_shape: Any) -> Tuple[int, int, int]:
    dims = _check_shape(chw_shape, "chw_shape")
    if len(dims) != 3:
        raise ValueError(f"chw_shape: expected (C, H, W), got {dims}")
    return dims


# ---------------------------------------------------------------------------------------------------------------
# reading


class _Bound(NamedTuple):
    value: float
    line: int


class _Output(NamedTuple):   # Y_other >= Y_label
    other: int
    label: int
    line: int


def _open(path: str, mode: str):
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def read_vnnlib(path: Union[str, "os.PathLike[str]"], *, n_inputs: Optional[int] = None,
                n_outputs: Optional[int] = None) -> RobustnessProperty:
    """Read a local robustness property from a VNN-LIB file (the subset in the module doc).

    Args:
      path: a ``.vnnlib`` file (``.vnnlib.gz`` is decompressed).
      n_inputs, n_outputs: if given, the numbers of ``X_i`` and ``Y_j`` the file must declare (the model's
        input size and number of classes), checked.

    Returns:
      a :class:`RobustnessProperty`: the box ``x_lo, x_hi`` of shape ``(n_inputs,)``, ``label``,
      ``n_outputs`` and the ``others`` classes the output constraint names.

    Raises:
      ValueError: naming the file, the line and what is not supported, for anything outside the subset;
        naming ``n_inputs`` / ``n_outputs`` when the file declares other numbers.
    """
    path = os.fspath(path)
    rd = _Reader(path)
    with _open(path, "r") as f:
        text = f.read()

    declared: Dict[str, Dict[int, int]] = {"X": {}, "Y": {}}   # kind -> index -> line
    lower: Dict[int, _Bound] = {}
    upper: Dict[int, _Bound] = {}
    groups: List[Tuple[int, List[_Output]]] = []              # output assertions: (line, disjuncts)

    def variable(e: _Atom) -> Optional[Tuple[str, int]]:
        m = _VARIABLE.fullmatch(e.text)
        if m is None:
            return None
        kind, i = m.group(1), int(m.group(2))
        if i not in declared[kind]:
            raise rd.fail(e.line, f"variable {e.text} is used but not declared (declare-const {e.text} Real)")
        return kind, i

    def term(e: _Expr, ctx: _List):
        """``('X', i)``, ``('Y', j)`` or ``('c', value)``."""
        if isinstance(e, _Atom):
            if _NUMBER.fullmatch(e.text):
                return "c", float(e.text)
            v = variable(e)
            if v is not None:
                return v
            raise rd.fail(e.line, f"unsupported term {e.text!r} in {_show(ctx)}: expected X_i, Y_j or a number")
        if _head(e) == "-" and len(e.items) == 2 and isinstance(e.items[1], _Atom) \
                and _NUMBER.fullmatch(e.items[1].text):
            return "c", -float(e.items[1].text)
        raise rd.fail(e.line, f"unsupported term {_show(e)} in {_show(ctx)}: only X_i, Y_j and numbers are "
                              f"supported (no arithmetic: not an interval or 'Y_j >= Y_label' constraint)")

    def comparison(e: _List) -> Union[Tuple[str, int, _Bound], _Output]:
        """An input bound ``('lo' | 'hi', i, bound)`` or an output comparison."""
        op = _head(e)
        if len(e.items) != 3:
            raise rd.fail(e.line, f"expected a comparison of two terms, got {_show(e)}")
        a, b = term(e.items[1], e), term(e.items[2], e)
        if op in ("<=", "<"):
            a, b = b, a                                  # now: a >= b
        kinds = (a[0], b[0])
        if kinds == ("X", "c"):
            return "lo", a[1], _Bound(b[1], e.line)
        if kinds == ("c", "X"):
            return "hi", b[1], _Bound(a[1], e.line)
        if kinds == ("Y", "Y"):
            if a[1] == b[1]:
                raise rd.fail(e.line, f"{_show(e)} compares Y_{a[1]} with itself")
            return _Output(a[1], b[1], e.line)
        if kinds == ("X", "X"):
            why = "a constraint between two inputs is not an interval constraint"
        elif "Y" in kinds and "X" in kinds:
            why = "a constraint mixing inputs and outputs is not supported"
        elif "Y" in kinds:
            why = "an output compared with a constant is not 'Y_j >= Y_label'"
        else:
            why = "a comparison of two constants is not supported"
        raise rd.fail(e.line, f"unsupported constraint {_show(e)}: {why}")

    def conjuncts(e: _Expr) -> Iterator[_Expr]:
        """``e`` as a conjunction: ``and`` flattened, a one-disjunct ``or`` is its disjunct."""
        head = _head(e)
        if head == "and":
            for item in e.items[1:]:
                yield from conjuncts(item)
        elif head == "or" and len(e.items) == 2:
            yield from conjuncts(e.items[1])
        else:
            yield e

    def classify(e: _Expr):
        head = _head(e)
        if head in _COMPARISONS:
            return comparison(e)
        if head == "or":
            if len(e.items) == 1:
                raise rd.fail(e.line, "an empty (or) is false: the property has no counterexample region")
            return disjunction(e)
        if head == "=":
            why = "equality is not supported (write the interval as <= and >=)"
        elif head == "not":
            why = "negation is not supported"
        else:
            why = "expected <=, >=, and, or"
        raise rd.fail(e.line, f"unsupported constraint {_show(e)}: {why}")

    def disjunction(e: _List) -> Tuple[str, List[_Output]]:
        clauses = [list(conjuncts(d)) for d in e.items[1:]]
        with_inputs = [d for d, c in zip(e.items[1:], clauses)
                       if any(_head(x) in _COMPARISONS and not isinstance(comparison(x), _Output) for x in c)]
        if with_inputs and len(with_inputs) == len(clauses):
            raise rd.fail(e.line, f"a disjunction of {len(clauses)} clauses, all with input constraints "
                                  f"(several boxes, the second at line {with_inputs[1].line}): only a single "
                                  f"box is supported")
        if with_inputs:
            raise rd.fail(with_inputs[0].line, f"a disjunction of {len(clauses)} clauses, {len(with_inputs)} with "
                                               f"input constraints: a box in a disjunction is supported only as "
                                               f"the one disjunct")
        outs = []
        for d, c in zip(e.items[1:], clauses):
            if len(c) != 1 or _head(c[0]) not in _COMPARISONS:
                raise rd.fail(d.line, f"unsupported disjunct {_show(d)}: expected one comparison "
                                      f"'Y_j >= Y_label' per disjunct")
            outs.append(comparison(c[0]))
        return "or", outs

    for e in _parse(text, rd):
        head = _head(e)
        if head in _IGNORED:
            continue
        if head == "declare-const":
            if len(e.items) != 3 or not all(isinstance(i, _Atom) for i in e.items[1:]):
                raise rd.fail(e.line, f"malformed declaration {_show(e)}")
            name, sort = e.items[1].text, e.items[2].text
            m = _VARIABLE.fullmatch(name)
            if m is None:
                raise rd.fail(e.line, f"unsupported variable name {name!r}: expected X_i (inputs) or Y_j (outputs)")
            if sort != "Real":
                raise rd.fail(e.line, f"{name} is declared {sort}: only Real is supported")
            kind, i = m.group(1), int(m.group(2))
            if i in declared[kind]:
                raise rd.fail(e.line, f"{name} is declared twice (first at line {declared[kind][i]})")
            declared[kind][i] = e.line
            continue
        if head != "assert":
            raise rd.fail(e.line, f"unsupported command {_show(e, 40)}: expected declare-const or assert")
        if len(e.items) != 2:
            raise rd.fail(e.line, f"malformed assertion {_show(e)}: expected (assert <constraint>)")
        for c in conjuncts(e.items[1]):
            r = classify(c)
            if isinstance(r, _Output):
                groups.append((r.line, [r]))
            elif r[0] == "or":
                groups.append((c.line, r[1]))
            else:
                side, i, bound = r
                table, tighter = (lower, max) if side == "lo" else (upper, min)
                table[i] = bound if i not in table else tighter(table[i], bound, key=lambda b: b.value)

    # declarations: 0 .. n-1, checked against the caller's sizes
    sizes = {}
    for kind, arg, expected in (("X", "n_inputs", n_inputs), ("Y", "n_outputs", n_outputs)):
        idx = declared[kind]
        n = len(idx)
        if n == 0:
            raise rd.fail(None, f"no {'inputs' if kind == 'X' else 'outputs'} declared ((declare-const {kind}_0 Real))")
        missing = [i for i in range(n) if i not in idx]
        if missing:
            raise rd.fail(idx[max(idx)], f"{kind}_{max(idx)} is declared but {kind}_{missing[0]} is not: "
                                         f"the {kind}_i must be numbered 0 .. n-1")
        if expected is not None and _int(expected, arg) != n:
            raise ValueError(f"{arg}: expected {expected}, but {path} declares {n} ({kind}_0 .. {kind}_{n - 1})")
        sizes[kind] = n

    # the box
    n = sizes["X"]
    for side, table in (("lower", lower), ("upper", upper)):
        missing = [i for i in range(n) if i not in table]
        if missing:
            shown = ", ".join(f"X_{i}" for i in missing[:5]) + (", ..." if len(missing) > 5 else "")
            op = ">=" if side == "lower" else "<="
            raise rd.fail(None, f"{len(missing)} of {n} inputs have no {side} bound ({op} X_i c): {shown}")
    for i in range(n):
        if lower[i].value > upper[i].value:
            raise rd.fail(lower[i].line, f"X_{i}: lower bound {lower[i].value!r} (line {lower[i].line}) is above "
                                         f"its upper bound {upper[i].value!r} (line {upper[i].line}): empty box")
    x_lo = np.array([lower[i].value for i in range(n)], dtype=np.float64)
    x_hi = np.array([upper[i].value for i in range(n)], dtype=np.float64)

    # the output constraint
    if not groups:
        raise rd.fail(None, "no output constraint: expected an assertion that some Y_j >= Y_label")
    if len(groups) > 1:
        lines = ", ".join(str(g[0]) for g in groups[:5])
        raise rd.fail(groups[1][0], f"{len(groups)} output assertions (lines {lines}); they would all have to hold "
                                    f"at once, which is not the robustness subset: expected one "
                                    f"(or (and (>= Y_j Y_label)) ...)")
    outs = groups[0][1]
    labels = sorted({o.label for o in outs})
    if len(labels) > 1:
        first = {o.label: o.line for o in reversed(outs)}
        raise rd.fail(groups[0][0], "mixed labels in the output constraint: "
                                    + ", ".join(f"Y_{l} (line {first[l]})" for l in labels)
                                    + " each appear as the right side of Y_j >= Y_label")
    label = labels[0]
    others = sorted({o.other for o in outs})
    return RobustnessProperty(x_lo, x_hi, label, sizes["Y"], tuple(others), path)


# ---------------------------------------------------------------------------------------------------------------
# writing


def _number(v: float) -> str:
    """Shortest decimal that reads back as the same float64, no exponent (plain SMT-LIB decimal but the sign)."""
    return np.format_float_positional(np.float64(v), unique=True, trim="0")


def write_vnnlib(path: Union[str, "os.PathLike[str]"], x_lo: Any, x_hi: Any, label: int, n_outputs: int) -> None:
    """Write the local robustness property "over the box, ``label`` stays the argmax" in VNN-LIB.

    The form VNN-COMP's image benchmark generators write: declarations, two interval assertions per input,
    and the violation ``(or (and (>= Y_j Y_label)) ...)`` over every other class. Numbers are the shortest
    decimals that read back as the same float64, so :func:`read_vnnlib` returns exactly ``x_lo, x_hi``
    (as float64). ``.gz`` paths are compressed.

    Args:
      path: the file to write (overwritten).
      x_lo, x_hi: ``(n_inputs,)`` finite, ``x_lo <= x_hi``, in the order of the model's input (C order of an
        ONNX model's NCHW input: :func:`from_nhwc` of an NHWC image).
      label: the class in ``[0, n_outputs)``.
      n_outputs: the number of classes, >= 2.
    """
    prop = RobustnessProperty(x_lo, x_hi, label, n_outputs,
                              tuple(j for j in range(_check_label(label, n_outputs)[0]) if j != label))
    lines = [
        f"; Local robustness property with label: {prop.label}.",
        "; Written by rcurves.certify.write_vnnlib. The assertions describe a counterexample: an input",
        "; in the box where another class scores at least as high as the label.",
        "",
    ]
    lines += [f"(declare-const X_{i} Real)" for i in range(prop.n_inputs)]
    lines.append("")
    lines += [f"(declare-const Y_{j} Real)" for j in range(prop.n_outputs)]
    lines += ["", "; Input constraints:"]
    for i, (lo, hi) in enumerate(zip(prop.x_lo, prop.x_hi)):
        lines.append(f"(assert (<= X_{i} {_number(hi)}))")
        lines.append(f"(assert (>= X_{i} {_number(lo)}))")
    lines += ["", "; Output constraints:", "(assert (or"]
    lines += [f"    (and (>= Y_{j} Y_{prop.label}))" for j in prop.others]
    lines += ["))", ""]
    with _open(os.fspath(path), "w") as f:
        f.write("\n".join(lines))


__all__ = ["RobustnessProperty", "from_nhwc", "read_vnnlib", "to_nhwc", "write_vnnlib"]
