"""The VNN-LIB reader and writer: the robustness subset read exactly, everything else refused by name."""
import gzip
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcurves import certify
from rcurves.certify.vnnlib import RobustnessProperty, from_nhwc, read_vnnlib, to_nhwc, write_vnnlib

# VNN-COMP style, written by hand: comments, blank lines, tabs, the disjunction over several lines.
SMALL = """\
; Small property with label: 1.
; four inputs, three outputs

(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const X_2 Real)
(declare-const X_3 Real)

(declare-const Y_0 Real)
(declare-const Y_1 Real)
(declare-const Y_2 Real)

; Input constraints:
(assert (<= X_0 0.6))
(assert (>= X_0 0.4))
(assert (<= X_1 1.0))   ; trailing comment
(assert (>= X_1 0.0))
(assert (<= X_2 -0.25))
(assert (>= X_2 -0.75))
(assert    (<=   X_3
\t0.5))
(assert (>= X_3 0.5))

; Output constraints:
(assert (or
\t(and (>= Y_0 Y_1))
\t(and (>= Y_2 Y_1))
))
"""


def _write(tmp_path, text, name="p.vnnlib"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _prop(inputs, outputs, n_in=3, n_out=3, extra_decl=""):
    """A property file: declarations, then the given input and output lines."""
    decl = [f"(declare-const X_{i} Real)" for i in range(n_in)] + [f"(declare-const Y_{j} Real)" for j in range(n_out)]
    return "\n".join(decl) + "\n" + extra_decl + inputs + "\n" + outputs + "\n"


BOX3 = """(assert (>= X_0 0.0))
(assert (<= X_0 1.0))
(assert (>= X_1 0.0))
(assert (<= X_1 1.0))
(assert (>= X_2 0.0))
(assert (<= X_2 1.0))"""
OUT3 = "(assert (or (and (>= Y_1 Y_0)) (and (>= Y_2 Y_0))))"


def test_hand_written_property_reads_exactly(tmp_path):
    path = _write(tmp_path, SMALL)
    prop = read_vnnlib(path, n_inputs=4, n_outputs=3)
    np.testing.assert_array_equal(prop.x_lo, [0.4, 0.0, -0.75, 0.5])
    np.testing.assert_array_equal(prop.x_hi, [0.6, 1.0, -0.25, 0.5])
    assert prop.x_lo.dtype == np.float64 and prop.x_lo.shape == (4,)
    assert prop.label == 1 and prop.n_outputs == 3 and prop.others == (0, 2)
    assert prop.n_inputs == 4 and prop.is_argmax
    assert prop.path == str(path)
    x_lo, x_hi, label = prop                     # the (x_lo, x_hi, label) triple of the design
    assert label == 1 and x_hi[3] == 0.5
    with pytest.raises(ValueError):              # read-only: a property is a value
        prop.x_lo[0] = 0.0


def test_mnist_property_round_trips_exactly(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random(784).astype(np.float32)
    x[:100] = 0.0
    x[100:150] = 1.0
    eps = np.float32(0.03)
    lo, hi = np.clip(x - eps, 0, 1), np.clip(x + eps, 0, 1)
    path = tmp_path / "mnist_7.vnnlib"
    write_vnnlib(path, lo, hi, 7, 10)
    text = path.read_text()
    assert text.count("(declare-const X_") == 784 and text.count("(declare-const Y_") == 10
    assert "(and (>= Y_0 Y_7))" in text and "(and (>= Y_7 Y_7))" not in text
    assert not re.search(r"\d[eE][+-]?\d", text)   # plain decimals, no exponents
    prop = read_vnnlib(path, n_inputs=784, n_outputs=10)
    assert np.array_equal(prop.x_lo, lo.astype(np.float64)) and np.array_equal(prop.x_hi, hi.astype(np.float64))
    assert np.array_equal(prop.x_lo.astype(np.float32), lo)
    assert prop.label == 7 and prop.others == (0, 1, 2, 3, 4, 5, 6, 8, 9) and prop.is_argmax
    assert prop.x_lo[0] == 0.0 and prop.x_hi[120] == 1.0
    # float64 values that need all 17 digits survive too
    lo64 = rng.random(784) * 0.5
    write_vnnlib(path, lo64, lo64 + 1e-7, 0, 10)
    again = read_vnnlib(path)
    assert np.array_equal(again.x_lo, lo64) and np.array_equal(again.x_hi, lo64 + 1e-7)


def test_gzipped_file_round_trips(tmp_path):
    path = tmp_path / "p.vnnlib.gz"
    write_vnnlib(path, [0.1, -2.0], [0.2, 3.5], 2, 3)
    with gzip.open(path, "rt") as f:
        assert "(assert (<= X_1 3.5))" in f.read()
    prop = read_vnnlib(path)
    np.testing.assert_array_equal(prop.x_lo, [0.1, -2.0])
    assert prop.label == 2 and prop.others == (0, 1)


def test_swapped_operands_and_mixed_directions(tmp_path):
    inputs = """(assert (>= 0.9 X_0))
(assert (<= 0.1 X_0))
(assert (<= X_1 0.8))
(assert (>= X_1 0.2))
(assert (>= 0.7 X_2))
(assert (<= 0.3 X_2))"""
    outputs = "(assert (or (and (>= Y_1 Y_0)) (and (<= Y_0 Y_2))))"   # both say Y_j >= Y_0
    prop = read_vnnlib(_write(tmp_path, _prop(inputs, outputs)))
    np.testing.assert_array_equal(prop.x_lo, [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(prop.x_hi, [0.9, 0.8, 0.7])
    assert prop.label == 0 and prop.others == (1, 2)
    # the label is the right side of >= (left of <=): Y_2 <= Y_1 states Y_1 >= Y_2, label 2
    prop = read_vnnlib(_write(tmp_path, _prop(BOX3, "(assert (or (<= Y_2 Y_1) (and (<= Y_2 Y_0))))")))
    assert prop.label == 2 and prop.others == (0, 1)


def test_scientific_notation_and_negative_numbers(tmp_path):
    inputs = """(assert (>= X_0 -2.5E+01))
(assert (<= X_0 1e-3))
(assert (>= X_1 (- 0.25)))
(assert (<= X_1 .5))
(assert (>= X_2 -1.5e-2))
(assert (<= X_2 +3.))"""
    prop = read_vnnlib(_write(tmp_path, _prop(inputs, OUT3)))
    np.testing.assert_array_equal(prop.x_lo, [-25.0, -0.25, -0.015])
    np.testing.assert_array_equal(prop.x_hi, [0.001, 0.5, 3.0])


def test_single_class_plain_assert(tmp_path):
    box = "\n".join(f"(assert (>= X_{i} 0))\n(assert (<= X_{i} 1))" for i in range(3))
    prop = read_vnnlib(_write(tmp_path, _prop(box, "(assert (>= Y_3 Y_7))", n_out=10)))
    assert prop.label == 7 and prop.others == (3,) and prop.n_outputs == 10
    assert not prop.is_argmax
    with pytest.raises(ValueError, match=r"only against classes \[3\]"):
        x_lo, x_hi, label = prop                   # the triple would claim more than the file says
    # with two outputs the single comparison is the whole argmax property
    prop = read_vnnlib(_write(tmp_path, _prop(box, "(assert (<= Y_1 Y_0))", n_out=2)))
    assert prop.label == 1 and prop.others == (0,) and prop.is_argmax


def test_single_box_of_the_multiple_boxes_form(tmp_path):
    box = " ".join(f"(>= X_{i} 0.{i}) (<= X_{i} 0.{i + 5})" for i in range(3))
    # one box bundling the input intervals with one output comparison
    prop = read_vnnlib(_write(tmp_path, _prop("", f"(assert (or (and {box} (>= Y_2 Y_1))))")))
    np.testing.assert_array_equal(prop.x_lo, [0.0, 0.1, 0.2])
    np.testing.assert_array_equal(prop.x_hi, [0.5, 0.6, 0.7])
    assert prop.label == 1 and prop.others == (2,)
    # one box alone, the output disjunction in its own assertion; and a top-level conjunction
    prop = read_vnnlib(_write(tmp_path, _prop(f"(assert (or (and {box})))", OUT3)))
    assert prop.label == 0 and prop.others == (1, 2) and prop.x_hi[2] == 0.7
    prop = read_vnnlib(_write(tmp_path, _prop(f"(assert (and {box}))", OUT3)))
    np.testing.assert_array_equal(prop.x_lo, [0.0, 0.1, 0.2])


def test_strict_comparisons_read_as_non_strict(tmp_path):
    inputs = BOX3.replace("(assert (>= X_1", "(assert (> X_1").replace("(assert (<= X_2", "(assert (< X_2")
    outputs = "(assert (or (and (> Y_1 Y_0)) (and (< Y_0 Y_2))))"
    prop = read_vnnlib(_write(tmp_path, _prop(inputs, outputs)))
    np.testing.assert_array_equal(prop.x_lo, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(prop.x_hi, [1.0, 1.0, 1.0])
    assert prop.label == 0 and prop.others == (1, 2)


def test_repeated_bounds_keep_the_tightest(tmp_path):
    inputs = BOX3 + "\n(assert (>= X_0 0.25))\n(assert (<= X_0 2.0))\n(assert (<= X_2 0.5))"
    prop = read_vnnlib(_write(tmp_path, _prop(inputs, OUT3)))
    np.testing.assert_array_equal(prop.x_lo, [0.25, 0.0, 0.0])
    np.testing.assert_array_equal(prop.x_hi, [1.0, 1.0, 0.5])


def test_ignored_commands(tmp_path):
    text = "(set-logic QF_LRA)\n" + _prop(BOX3, OUT3) + "(check-sat)\n(get-model)\n(exit)\n"
    assert read_vnnlib(_write(tmp_path, text)).others == (1, 2)


# (description, file text, line of the offending form or None, what the message must say)
BOX2 = BOX3.replace("(assert (>= X_2 0.0))\n(assert (<= X_2 1.0))", "")
REFUSED = [
    ("two inputs", _prop(BOX3 + "\n(assert (<= X_0 X_1))", OUT3), 13, "between two inputs"),
    ("arithmetic", _prop(BOX3 + "\n(assert (<= (+ X_0 X_1) 1.0))", OUT3), 13, "unsupported term (+ X_0 X_1)"),
    ("output bound", _prop(BOX3, "(assert (>= Y_1 0.5))"), 13, "compared with a constant"),
    ("input vs output", _prop(BOX3, "(assert (>= Y_1 X_0))"), 13, "mixing inputs and outputs"),
    ("mixed labels", _prop(BOX3, "(assert (or\n(and (>= Y_1 Y_0))\n(and (>= Y_0 Y_2))))"), 13,
     "mixed labels in the output constraint: Y_0 (line 14), Y_2 (line 15)"),
    ("missing bound", _prop(BOX2 + "\n(assert (>= X_2 0.0))", OUT3), None, "no upper bound (<= X_i c): X_2"),
    ("empty box", _prop(BOX3 + "\n\n(assert (>= X_1 1.5))", OUT3), 14, "X_1: lower bound 1.5 (line 14) is above"),
    ("undeclared", _prop(BOX3 + "\n(assert (<= X_7 1.0))", OUT3), 13, "X_7 is used but not declared"),
    ("undeclared output", _prop(BOX3, "(assert (>= Y_5 Y_0))"), 13, "Y_5 is used but not declared"),
    ("conjunction of violations", _prop(BOX3, "(assert (>= Y_1 Y_0))\n(assert (>= Y_2 Y_0))"), 14,
     "2 output assertions"),
    ("and of outputs", _prop(BOX3, "(assert (and (>= Y_1 Y_0) (>= Y_2 Y_0)))"), 13, "2 output assertions"),
    ("several boxes", _prop("", "(assert (or (and (>= X_0 0) (<= X_0 1) (>= Y_1 Y_0))\n"
                                "(and (>= X_0 2) (<= X_0 3) (>= Y_1 Y_0))))", n_in=1), 6,
     "2 clauses, all with input constraints (several boxes, the second at line 7)"),
    ("box in a disjunction", _prop("", "(assert (or (and (>= X_0 0) (<= X_0 1))\n(and (>= Y_1 Y_0))))", n_in=1), 6,
     "2 clauses, 1 with input constraints"),
    ("conjunctive disjunct", _prop(BOX3, "(assert (or (and (>= Y_1 Y_0) (>= Y_2 Y_0)) (and (>= Y_2 Y_0))))"), 13,
     "expected one comparison 'Y_j >= Y_label' per disjunct"),
    ("self comparison", _prop(BOX3, "(assert (>= Y_1 Y_1))"), 13, "compares Y_1 with itself"),
    ("equality", _prop(BOX3 + "\n(assert (= X_0 0.5))", OUT3), 13, "equality is not supported"),
    ("negation", _prop(BOX3, "(assert (not (<= Y_1 Y_0)))"), 13, "negation is not supported"),
    ("no output", _prop(BOX3, ""), None, "no output constraint"),
    ("unbalanced", _prop(BOX3, "(assert (or (and (>= Y_1 Y_0))"), 13, "unbalanced '('"),
    ("extra paren", _prop(BOX3, OUT3 + ")"), 13, "unbalanced ')'"),
    ("int sort", _prop(BOX3, OUT3, extra_decl="(declare-const X_3 Int)\n"), 7, "X_3 is declared Int"),
    ("gap", _prop(BOX3, OUT3, extra_decl="(declare-const X_4 Real)\n"), 7, "X_4 is declared but X_3 is not"),
    ("twice", _prop(BOX3, OUT3, extra_decl="(declare-const Y_0 Real)\n"), 7, "Y_0 is declared twice (first at line 4)"),
    ("other name", _prop(BOX3, OUT3, extra_decl="(declare-const Z Real)\n"), 7, "unsupported variable name 'Z'"),
    ("command", _prop(BOX3, OUT3, extra_decl="(define-fun f () Real 1.0)\n"), 7, "unsupported command"),
    ("bad number", _prop(BOX3 + "\n(assert (<= X_0 1.0.0))", OUT3), 13, "unsupported term '1.0.0'"),
    ("no inputs", _prop("", "(assert (>= Y_1 Y_0))", n_in=0), None, "no inputs declared"),
]


@pytest.mark.parametrize("text,line,message", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_forms_name_file_line_and_problem(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as info:
        read_vnnlib(path)
    msg = str(info.value)
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert msg.startswith(where), msg
    assert message in msg, msg


def test_declared_sizes_are_checked(tmp_path):
    path = _write(tmp_path, SMALL)
    with pytest.raises(ValueError, match=r"^n_inputs: expected 784, but .* declares 4 \(X_0 \.\. X_3\)"):
        read_vnnlib(path, n_inputs=784)
    with pytest.raises(ValueError, match=r"^n_outputs: expected 10, but .* declares 3"):
        read_vnnlib(path, n_outputs=10)


def test_write_refuses_bad_arguments(tmp_path):
    path = tmp_path / "bad.vnnlib"
    with pytest.raises(ValueError, match=r"^x_hi: lower bound above upper bound at input 1"):
        write_vnnlib(path, [0.0, 0.5], [1.0, 0.4], 0, 10)
    with pytest.raises(ValueError, match=r"^label: expected a class in \[0, 10\), got 10"):
        write_vnnlib(path, [0.0], [1.0], 10, 10)
    with pytest.raises(ValueError, match=r"^x_lo: expected a non-empty flat vector"):
        write_vnnlib(path, np.zeros((2, 2)), np.ones((2, 2)), 0, 10)
    with pytest.raises(ValueError, match=r"^x_lo: expected finite numbers, entry 1 is nan"):
        write_vnnlib(path, [0.0, np.nan], [1.0, 1.0], 0, 10)
    with pytest.raises(ValueError, match=r"^n_outputs: expected at least 2"):
        write_vnnlib(path, [0.0], [1.0], 0, 1)
    with pytest.raises(ValueError, match=r"^label: expected an integer"):
        write_vnnlib(path, [0.0], [1.0], 1.0, 10)
    assert not path.exists()
    write_vnnlib(path, [0.0], [1.0], jnp.int32(3), np.int64(10))   # NumPy / JAX integers are integers
    assert read_vnnlib(path).label == 3


def test_property_checks_its_fields():
    with pytest.raises(ValueError, match=r"^others: expected classes in \[0, 3\) other than label 1, got 1"):
        RobustnessProperty(np.zeros(2), np.ones(2), 1, 3, (0, 1))
    with pytest.raises(ValueError, match=r"^others: expected at least one class"):
        RobustnessProperty(np.zeros(2), np.ones(2), 1, 3, ())
    p = RobustnessProperty(np.zeros(2), np.ones(2), 1, 3, [2, 0])
    assert p.others == (0, 2) and p.is_argmax and p.path is None


def test_to_nhwc_matches_numpy_transpose():
    rng = np.random.default_rng(1)
    chw = (3, 4, 5)
    x = rng.standard_normal((2, 6, 60))
    want = x.reshape(2, 6, 3, 4, 5).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(to_nhwc(x, chw), want)
    np.testing.assert_array_equal(to_nhwc(x[0, 0], chw), x[0, 0].reshape(3, 4, 5).transpose(1, 2, 0))
    # the defining index map, spelled out
    out = to_nhwc(x[1, 2], chw)
    assert out[2, 1, 0] == x[1, 2, (0 * 4 + 2) * 5 + 1] and out[3, 4, 2] == x[1, 2, (2 * 4 + 3) * 5 + 4]
    np.testing.assert_array_equal(from_nhwc(want), x)
    np.testing.assert_array_equal(from_nhwc(to_nhwc(x[0, 0], chw)), x[0, 0])
    # JAX arrays, under jit
    got = jax.jit(lambda v: to_nhwc(v, chw))(jnp.asarray(x, jnp.float32))
    np.testing.assert_array_equal(np.asarray(got), want.astype(np.float32))
    with pytest.raises(ValueError, match=r"^x: expected shape \(\.\.\., 60\)"):
        to_nhwc(np.zeros(59), chw)
    with pytest.raises(ValueError, match=r"^chw_shape: expected \(C, H, W\)"):
        to_nhwc(np.zeros(60), (60,))


def test_box_shapes(tmp_path):
    rng = np.random.default_rng(2)
    lo = rng.random(3 * 4 * 5) * 0.5
    hi = lo + 0.1
    path = tmp_path / "cifar.vnnlib"
    write_vnnlib(path, lo, hi, 4, 10)
    prop = read_vnnlib(path)
    blo, bhi = prop.box_nhwc((3, 4, 5))
    assert blo.shape == (4, 5, 3)
    np.testing.assert_array_equal(blo, lo.reshape(3, 4, 5).transpose(1, 2, 0))
    np.testing.assert_array_equal(bhi, hi.reshape(3, 4, 5).transpose(1, 2, 0))
    assert not np.array_equal(blo, lo.reshape(4, 5, 3))   # C-order reshape is not the NHWC image here
    np.testing.assert_array_equal(prop.box((3, 20))[1], hi.reshape(3, 20))
    with pytest.raises(ValueError, match=r"^shape: expected 60 entries"):
        prop.box((28, 28, 1))
    # one channel: NCHW and NHWC orders coincide (MNIST)
    write_vnnlib(path, np.arange(784) / 784, np.arange(784) / 784 + 0.01, 0, 10)
    mnist = read_vnnlib(path)
    np.testing.assert_array_equal(mnist.box((28, 28, 1))[0], mnist.box_nhwc((1, 28, 28))[0])


def test_public_names():
    assert certify.read_vnnlib is read_vnnlib and certify.write_vnnlib is write_vnnlib
    assert certify.RobustnessProperty is RobustnessProperty
    assert certify.to_nhwc is to_nhwc and certify.from_nhwc is from_nhwc
    for name in ("read_vnnlib", "write_vnnlib", "RobustnessProperty", "to_nhwc", "from_nhwc"):
        assert name in certify.__all__
