"""ONNX models as toolkit models: :func:`load_onnx` reads a file into a :class:`~rcurves.models.LoadedModel`.

The ``onnx`` package only parses the file (and checks it with
``onnx.checker``); the graph is evaluated by this module in ``jax.numpy`` /
``lax``, one operator at a time, in the file's own semantics.

**What a loaded model is.** ``load_onnx(path).logits_fn`` is an
:class:`OnnxFn`, a *pytree callable* like the zoo's ``ModelFn``: its array
leaves are the float initializers of the file (and the float ``Constant``
nodes), a dict ``{onnx tensor name: float32 array}``; its static part is an
:class:`OnnxGraph` (the nodes, their attributes, the integer constants such as
``Reshape`` shapes), frozen and hashable. Attacks therefore compile one program
per graph *structure* and shape: two files of the same architecture with
different weights share it, and no weight is baked into a program.

**Layout.** The file's input is ``(N, *dims)`` with the batch first (its
declared size, fixed or symbolic, is ignored: any batch is evaluated; in a
file declared with a batch of 1, as PyTorch exports one example, a
``Reshape`` to a constant target that starts with 1, ``[1, 784]``, reads that
1 as the batch, so each point gets what the file computes on it). The
toolkit's inputs are NHWC, as its data (``(n, 28, 28, 1)`` for MNIST) and its
CNNs: a 4-d input's ``input_shape`` is ``(H, W, C)``. A file's 4-d input is
either NCHW, the ONNX convention (PyTorch exports): ``logits_fn`` transposes
its input to NCHW once, on entry, and the rest of the graph runs in the file's
layout (so a ``Flatten`` after a convolution flattens in C, H, W order, as in
the file); or NHWC (JAX and TensorFlow exports, which transpose around each
``Conv`` themselves): taken as it is. ``load_onnx(..., layout='auto')`` reads a
declared point shape ``(H, W, C)`` with ``C <= 4 < H`` as NHWC and anything
else as NCHW; ``layout='nchw'`` / ``'nhwc'`` says it. ``info['layout']``
records the choice. Any other rank is taken as it is (``(N, D)`` ->
``input_shape (D,)``, PyTorch's ``(1, 784, 1)`` -> ``(784, 1)``).
``logits_fn`` accepts ``(n, *input_shape)`` or any ``(n, ...)`` with as many
values per point (``(n, 784)``, ``(n, 28, 28)``), read in row-major order of
``input_shape``; for one channel the NCHW and NHWC orders coincide. The output
must be ``(N, K)`` logits.

**Normalisation.** Input normalisation written in the graph (``Sub`` a mean,
``Div`` a standard deviation, or ``Mul`` / ``Add``) is just part of the graph:
``logits_fn`` takes *unnormalised* inputs, exactly as the file does, and the
toolkit's input bounds (``bounds=(0, 1)``) apply to those. A model that expects
normalised inputs without such nodes needs its normalisation applied by the
caller.

**Operators** (default domain; attributes of the current opsets):
Gemm, MatMul, Add, Sub, Mul, Div (numpy broadcasting; an ``Add`` of two
activations is a residual connection), Relu, Flatten, Reshape (shape from a
constant or from shapes, ``0`` copies a dimension, ``-1`` is inferred), Transpose, Conv (2-d;
strides, pads, dilations, ``auto_pad`` NOTSET / VALID / SAME_UPPER /
SAME_LOWER; ``group=1`` only), BatchNormalization (inference), AveragePool
(``ceil_mode=0``; ``count_include_pad`` either way), GlobalAveragePool, Constant,
Identity; and the shape arithmetic exporters write to compute a ``Reshape``'s
target from the input's shape (``x.view(x.size(0), -1)``): Shape, Gather,
Squeeze, Unsqueeze, Concat and Cast, evaluated on the host while the program is
traced (a *shape value* is a NumPy integer array, as a constant ``Reshape``
shape), so the batch size stays free. Gather, Squeeze, Unsqueeze, Concat and
Cast (to float or double) also take activations, except along the batch axis; a
shape computed from an activation's *values* is refused. Any other operator or
domain, any attribute this module does not know, and any value of one it does not implement (``group=2``,
``training_mode=1``, ...) raises ``ValueError`` naming the node and its
operator when the file is loaded; so does a graph that cannot be evaluated for
a batch of any size (e.g. a ``Reshape`` to a fixed batch of 1 where the
file's batch is not declared 1). Never a
function that silently differs from the file's.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rcurves.models.loaded import LoadedModel

#: Operators :func:`load_onnx` evaluates, with the attributes each may carry.
OPERATORS: Dict[str, Tuple[str, ...]] = {
    "Add": (), "Sub": (), "Mul": (), "Div": (),
    "AveragePool": ("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"),
    "BatchNormalization": ("epsilon", "is_test", "momentum", "spatial", "training_mode"),
    "Constant": ("value", "value_float", "value_floats", "value_int", "value_ints"),
    "Conv": ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"),
    "Flatten": ("axis",),
    "Gemm": ("alpha", "beta", "transA", "transB"),
    "GlobalAveragePool": (),
    "Identity": (),
    "MatMul": (),
    "Relu": (),
    "Reshape": ("allowzero",),
    "Transpose": ("perm",),
    # shape arithmetic (exporters compute a Reshape's target from the input's shape): evaluated on the host
    "Shape": ("end", "start"),
    "Gather": ("axis",),
    "Squeeze": ("axes",),
    "Unsqueeze": ("axes",),
    "Concat": ("axis",),
    "Cast": ("saturate", "to"),
}

#: Operators whose output is a *shape value* (an integer NumPy array, part of the program) when every input
#: is one: ``Shape`` always; the others also take activations (``Concat`` of feature maps, ...).
SHAPE_OPS = ("Shape", "Gather", "Squeeze", "Unsqueeze", "Concat", "Cast", "Identity")

_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
_HI = lax.Precision.HIGHEST     # float32 products, as the file's semantics (CPU computes them so anyway)


# ---------------------------------------------------------------------------------------------------------------
# the static graph


@dataclasses.dataclass(frozen=True)
class OnnxNode:
    """One node: ``op``, a name for messages, input / output tensor names ('' = an absent optional input),
    and its attributes as sorted ``(name, value)`` pairs (ints, floats, strings, tuples: hashable)."""

    op: str
    name: str
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    attrs: Tuple[Tuple[str, Any], ...] = ()

    def attr(self, key: str, default: Any = None) -> Any:
        return dict(self.attrs).get(key, default)

    def where(self) -> str:
        """``"node 'conv1' (Conv)"``: how messages name it."""
        return f"node {self.name!r} ({self.op})"


@dataclasses.dataclass(frozen=True)
class OnnxGraph:
    """The static part of an ONNX model: what one compiled program depends on.

    Attributes:
      nodes: the evaluated nodes in topological order (``Constant`` nodes are
        folded into the parameters or ``statics``).
      input_name, output_name: the graph's one input and one output.
      input_shape: one point's shape as the toolkit takes it (``(H, W, C)``
        for a 4-d NCHW input, else the file's dims without the batch).
      file_input_shape: one point's shape in the file's layout (``(C, H, W)``).
      statics: integer constants ``(name, shape, values)`` (``Reshape``
        shapes), part of the program, not data.
      layout: ``'nchw'`` (a 4-d input in ONNX's order, transposed from the
        toolkit's NHWC on entry) or ``'nhwc'`` (the file takes NHWC itself, as
        files exported from JAX / TensorFlow do); other ranks ignore it.
    """

    nodes: Tuple[OnnxNode, ...]
    input_name: str
    output_name: str
    input_shape: Tuple[int, ...]
    file_input_shape: Tuple[int, ...]
    statics: Tuple[Tuple[str, Tuple[int, ...], Tuple[int, ...]], ...] = ()
    layout: str = "nchw"

    @property
    def nchw(self) -> bool:
        """True when the file's input is an NCHW image (the toolkit's input is then NHWC and transposed on
        entry)."""
        return self.layout == "nchw" and len(self.file_input_shape) == 3

    def static_values(self) -> Dict[str, np.ndarray]:
        return {name: np.asarray(vals, np.int64).reshape(shape) for name, shape, vals in self.statics}


# ---------------------------------------------------------------------------------------------------------------
# the operators, on batched arrays in the file's layout


def window_pads(node: OnnxNode, spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int]) -> List[Tuple[int, int]]:
    """The padding ``[(lo, hi)]`` per spatial axis of a Conv / AveragePool node over an input of spatial size
    ``spatial``, from its ``pads`` or ``auto_pad`` (ONNX's rules: SAME_UPPER puts the odd pixel at the end)."""
    auto = node.attr("auto_pad", "NOTSET")
    nd = len(spatial)
    if auto == "VALID":
        return [(0, 0)] * nd
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for size, k, s, d in zip(spatial, kernel, strides, dilations):
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            out.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return out
    pads = node.attr("pads", (0,) * (2 * nd))
    return [(int(pads[i]), int(pads[i + nd])) for i in range(nd)]


def _spatial_attrs(node: OnnxNode, kernel: Sequence[int]):
    nd = len(kernel)
    strides = tuple(node.attr("strides", (1,) * nd))
    dilations = tuple(node.attr("dilations", (1,) * nd))
    if len(strides) != nd or len(dilations) != nd or len(node.attr("pads", (0,) * 2 * nd)) != 2 * nd:
        raise ValueError(f"strides {strides}, dilations {dilations}, pads {node.attr('pads')} do not fit a "
                         f"{nd}-d kernel {tuple(kernel)}")
    return strides, dilations


def _conv(node: OnnxNode, x, w, b=None):
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"expected a 2-d convolution of an (N, C, H, W) input, got input {x.shape}, "
                         f"weight {w.shape}")
    kernel = tuple(int(k) for k in w.shape[2:])
    if node.attr("kernel_shape") is not None and tuple(node.attr("kernel_shape")) != kernel:
        raise ValueError(f"kernel_shape {node.attr('kernel_shape')} differs from the weight's {kernel}")
    if w.shape[1] != x.shape[1]:
        raise ValueError(f"weight {w.shape} expects {w.shape[1]} input channels, got {x.shape[1]}")
    strides, dilations = _spatial_attrs(node, kernel)
    pads = window_pads(node, x.shape[2:], kernel, strides, dilations)
    y = lax.conv_general_dilated(x, w, strides, pads, rhs_dilation=dilations,
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"), precision=_HI)
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def _average_pool(node: OnnxNode, x):
    kernel = tuple(int(k) for k in node.attr("kernel_shape"))
    if x.ndim != 2 + len(kernel):
        raise ValueError(f"kernel_shape {kernel} does not fit an input of shape {x.shape}")
    strides, dilations = _spatial_attrs(node, kernel)
    pads = window_pads(node, x.shape[2:], kernel, strides, dilations)
    window, steps = (1, 1) + kernel, (1, 1) + strides
    dil, pad = (1, 1) + dilations, [(0, 0), (0, 0)] + pads
    total = lax.reduce_window(x, 0.0, lax.add, window, steps, pad, window_dilation=dil)
    if node.attr("count_include_pad", 0):
        return total / math.prod(kernel)
    ones = jnp.ones((1, 1) + tuple(x.shape[2:]), x.dtype)
    count = lax.reduce_window(ones, 0.0, lax.add, window, steps, pad, window_dilation=dil)
    return total / count


def _batch_norm(node: OnnxNode, x, scale, bias, mean, var):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = scale / jnp.sqrt(var + node.attr("epsilon", 1e-5))
    return (x - mean.reshape(shape)) * inv.reshape(shape) + bias.reshape(shape)


def _gemm(node: OnnxNode, a, b, c=None):
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"expected 2-d operands, got {a.shape} and {b.shape}")
    a = a.T if node.attr("transA", 0) else a
    b = b.T if node.attr("transB", 0) else b
    y = node.attr("alpha", 1.0) * jnp.matmul(a, b, precision=_HI)
    return y if c is None else y + node.attr("beta", 1.0) * c


def _flatten(node: OnnxNode, x):
    axis = node.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    if not 0 <= axis <= x.ndim:
        raise ValueError(f"axis {node.attr('axis')} out of range for an input of rank {x.ndim}")
    if axis != 1 and x.ndim > 1:
        raise ValueError(f"axis {node.attr('axis')} would merge or split the batch dimension (only axis 1)")
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def _reshape(node: OnnxNode, x, shape):
    if isinstance(shape, jax.core.Tracer) or not isinstance(shape, np.ndarray):
        raise ValueError("the target shape must be a constant integer tensor (an initializer or Constant)")
    target = [int(s) for s in shape.ravel()]
    if not node.attr("allowzero", 0):
        target = [x.shape[i] if s == 0 else s for i, s in enumerate(target)]
    try:
        y = x.reshape(target)
    except (TypeError, ValueError):
        y = None
    if y is None or y.ndim == 0 or y.shape[0] != x.shape[0]:
        raise ValueError(f"cannot reshape {tuple(x.shape)} to {tuple(int(s) for s in shape.ravel())} keeping the "
                         f"batch (the toolkit evaluates any batch size: the target must start with 0 or -1)")
    return y


def _transpose(node: OnnxNode, x):
    perm = tuple(reversed(range(x.ndim))) if node.attr("perm") is None else tuple(node.attr("perm"))
    if sorted(perm) != list(range(x.ndim)) or (x.ndim > 1 and perm[0] != 0):
        raise ValueError(f"perm {perm} must be a permutation of the {x.ndim} axes keeping the batch first")
    return jnp.transpose(x, perm)


def _is_shape_value(v) -> bool:
    return isinstance(v, np.ndarray)


def _axes(node: OnnxNode, axes, rank: int, what: str):
    """The ``axes`` of a Squeeze / Unsqueeze (its second input from opset 13, else its attribute) in
    ``[0, rank)``."""
    if axes is None:
        axes = node.attr("axes")
    elif not _is_shape_value(axes):
        raise ValueError(f"{what} must be a constant integer tensor")
    if axes is None:
        return None
    out = sorted(int(a) + rank if int(a) < 0 else int(a) for a in np.ravel(axes))
    if any(not 0 <= a < rank for a in out) or len(set(out)) != len(out):
        raise ValueError(f"axes {tuple(np.ravel(axes))} out of range for rank {rank}")
    return out


def _shape(node: OnnxNode, x):
    dims = np.asarray(x.shape, np.int64)
    return dims[slice(node.attr("start", 0), node.attr("end"))]


def _gather(node: OnnxNode, data, indices):
    if not _is_shape_value(indices):
        raise ValueError("the indices must be a constant integer tensor (or computed from shapes)")
    axis = node.attr("axis", 0)
    axis = axis + data.ndim if axis < 0 else axis
    if not 0 <= axis < data.ndim:
        raise ValueError(f"axis {node.attr('axis', 0)} out of range for rank {data.ndim}")
    size = data.shape[axis]
    if np.any(indices < -size) or np.any(indices >= size):
        raise ValueError(f"indices {indices.ravel().tolist()} out of range for a dimension of {size}")
    idx = np.where(indices < 0, indices + size, indices)
    if _is_shape_value(data):
        return np.asarray(np.take(data, idx, axis=axis))         # (a 0-d index gives a 0-d array, not a scalar)
    if axis == 0:
        raise ValueError("gathering along the batch axis of an activation is not supported")
    return jnp.take(data, jnp.asarray(idx), axis=axis)


def _squeeze(node: OnnxNode, x, axes=None):
    ax = _axes(node, axes, x.ndim, "the axes")
    if ax is None and not _is_shape_value(x):
        raise ValueError("axes are required on an activation (without them a batch of 1 would be squeezed)")
    if ax is None:
        ax = [i for i, d in enumerate(x.shape) if d == 1]
    if any(x.shape[a] != 1 for a in ax):
        raise ValueError(f"cannot squeeze axes {ax} of shape {tuple(x.shape)}")
    if not _is_shape_value(x) and 0 in ax:
        raise ValueError("squeezing the batch axis of an activation is not supported")
    return (np if _is_shape_value(x) else jnp).squeeze(x, axis=tuple(ax))


def _unsqueeze(node: OnnxNode, x, axes=None):
    ax = _axes(node, axes, x.ndim + len(np.ravel(axes if axes is not None else node.attr("axes", ()))),
               "the axes")
    if ax is None:
        raise ValueError("axes are required")
    if not _is_shape_value(x) and 0 in ax:
        raise ValueError("a new axis before the batch of an activation is not supported")
    return (np if _is_shape_value(x) else jnp).expand_dims(x, tuple(ax))


def _concat(node: OnnxNode, *xs):
    if node.attr("axis") is None:
        raise ValueError("axis is required")
    if all(_is_shape_value(v) for v in xs):
        return np.concatenate(xs, axis=node.attr("axis"))
    if node.attr("axis") % xs[0].ndim == 0:
        raise ValueError("concatenating activations along the batch axis is not supported")
    return jnp.concatenate([jnp.asarray(v, jnp.float32) for v in xs], axis=node.attr("axis"))


#: ONNX TensorProto element types Cast converts to: float and double (to float32, the toolkit's precision; half
#: precisions would round differently: refused) and integers (shape values only).
_CAST_FLOAT = (1, 11)
_CAST_INT = (6, 7)


def _cast(node: OnnxNode, x):
    to = node.attr("to")
    if to in _CAST_FLOAT:
        return x.astype(np.float32) if _is_shape_value(x) else jnp.asarray(x, jnp.float32)
    if to in _CAST_INT and _is_shape_value(x):
        return x.astype(np.int64)
    raise ValueError(f"cast to element type {to} is not supported (float or double, or int32 / int64 of a "
                     f"shape value)")


_EVAL: Dict[str, Callable[..., Any]] = {
    "Add": lambda node, a, b: a + b,
    "Sub": lambda node, a, b: a - b,
    "Mul": lambda node, a, b: a * b,
    "Div": lambda node, a, b: a / b,
    "AveragePool": _average_pool,
    "BatchNormalization": _batch_norm,
    "Conv": _conv,
    "Flatten": _flatten,
    "Gemm": _gemm,
    "GlobalAveragePool": lambda node, x: jnp.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True),
    "Identity": lambda node, x: x,
    "MatMul": lambda node, a, b: jnp.matmul(a, b, precision=_HI),
    "Relu": lambda node, x: jnp.maximum(x, 0.0),
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Shape": _shape,
    "Gather": _gather,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Concat": _concat,
    "Cast": _cast,
}

#: how many inputs each operator takes: (required, at most)
_ARITY = {"Add": (2, 2), "Sub": (2, 2), "Mul": (2, 2), "Div": (2, 2), "AveragePool": (1, 1),
          "BatchNormalization": (5, 5), "Conv": (2, 3), "Flatten": (1, 1), "Gemm": (2, 3),
          "GlobalAveragePool": (1, 1), "Identity": (1, 1), "MatMul": (2, 2), "Relu": (1, 1),
          "Reshape": (2, 2), "Transpose": (1, 1), "Shape": (1, 1), "Gather": (2, 2), "Squeeze": (1, 2),
          "Unsqueeze": (1, 2), "Concat": (1, 1 << 16), "Cast": (1, 1)}


def eval_node(node: OnnxNode, inputs: Sequence[Any]) -> Any:
    """The output of one node for its input arrays (``None`` for an absent optional input), batched, in
    the file's layout. Errors name the node: ``ValueError("node 'c1' (Conv): ...")``."""
    args = list(inputs)
    while args and args[-1] is None:
        args.pop()
    try:
        return _EVAL[node.op](node, *args)
    except (TypeError, ValueError, IndexError) as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith("node ") else f"{node.where()}: {msg}") from None


def _apply(graph: OnnxGraph, params: Dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """Logits ``(n, K)`` of ``x (n, ...)`` (``n * prod(input_shape)`` values, toolkit layout)."""
    x = jnp.asarray(x, jnp.float32)
    x = x.reshape((x.shape[0],) + tuple(graph.input_shape))
    if graph.nchw:
        x = jnp.transpose(x, (0, 3, 1, 2))          # NHWC (toolkit) -> NCHW (file), once
    env: Dict[str, Any] = dict(graph.static_values())
    env.update(params)
    env[graph.input_name] = x
    for node in graph.nodes:
        env[node.outputs[0]] = eval_node(node, [env[name] if name else None for name in node.inputs])
    return env[graph.output_name]


@functools.lru_cache(maxsize=64)
def _jitted_apply(graph: OnnxGraph) -> Callable:
    return jax.jit(functools.partial(_apply, graph))


@jax.tree_util.register_pytree_node_class
class OnnxFn:
    """An ONNX model as a pytree callable: ``OnnxFn(graph, params)(x (n, *input_shape)) -> (n, K)``.

    ``params`` (``{tensor name: float32 array}``) are the leaves, ``graph``
    (an :class:`OnnxGraph`) the static part: one compiled program per graph
    structure and shape, shared by every set of weights. Called eagerly it
    runs one jitted program per graph (``compiled``).
    """

    compiled = True

    def __init__(self, graph: OnnxGraph, params: Dict[str, Any]):
        self.graph = graph
        self.params = params

    @property
    def input_shape(self) -> Tuple[int, ...]:
        return self.graph.input_shape

    def __call__(self, x):
        return _jitted_apply(self.graph)(self.params, x)

    def tree_flatten(self):
        return (self.params,), self.graph

    @classmethod
    def tree_unflatten(cls, graph, children):
        return cls(graph, children[0])

    def __repr__(self) -> str:
        n = sum(int(getattr(a, "size", 0)) for a in jax.tree_util.tree_leaves(self.params))
        return f"OnnxFn({len(self.graph.nodes)} nodes, input {self.graph.input_shape}, {n:,} parameters)"


# ---------------------------------------------------------------------------------------------------------------
# reading a file


def _hashable(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(i) for i in v)
    if isinstance(v, (np.integer, int)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return float(v)
    return v


def _node_attrs(proto, where: str) -> Dict[str, Any]:
    from onnx import helper

    out = {}
    for a in proto.attribute:
        try:
            out[a.name] = helper.get_attribute_value(a)
        except Exception as e:  # noqa: BLE001 - an attribute onnx itself cannot read
            raise ValueError(f"{where}: cannot read attribute {a.name!r} ({e})") from None
    return out


def _check_node(node: OnnxNode, raw_attrs: Dict[str, Any], n_inputs: int) -> None:
    """``ValueError`` unless the node is one this module evaluates exactly."""
    where = node.where()
    unknown = sorted(set(raw_attrs) - set(OPERATORS[node.op]))
    if unknown:
        raise ValueError(f"{where}: attribute {unknown[0]!r} is not supported (supported: "
                         f"{', '.join(OPERATORS[node.op]) or 'none'})")
    lo, hi = _ARITY[node.op]
    if not lo <= n_inputs <= hi or any(not node.inputs[i] for i in range(lo)):
        raise ValueError(f"{where}: expected {lo}{'' if lo == hi else f'-{hi}'} inputs, got {node.inputs}")
    if node.outputs[1:] and any(node.outputs[1:]):
        raise ValueError(f"{where}: only the first output is supported (the node lists {node.outputs})")
    a = node.attr
    if node.op in ("Conv", "AveragePool") and a("auto_pad", "NOTSET") not in _AUTO_PADS:
        raise ValueError(f"{where}: auto_pad {a('auto_pad')!r} is not one of {_AUTO_PADS}")
    if node.op == "Conv" and a("group", 1) != 1:
        raise ValueError(f"{where}: group={a('group')} is not supported (grouped and depthwise convolutions "
                         f"are not implemented; only group=1)")
    if node.op == "AveragePool":
        if a("ceil_mode", 0):
            raise ValueError(f"{where}: ceil_mode=1 is not supported (only 0)")
        if a("kernel_shape") is None:
            raise ValueError(f"{where}: kernel_shape is required")
    if node.op == "BatchNormalization":
        if a("training_mode", 0):
            raise ValueError(f"{where}: training_mode=1 is not supported (inference only)")
        if a("is_test", 1) == 0:
            raise ValueError(f"{where}: is_test=0 (training) is not supported (inference only)")
        if a("spatial", 1) != 1:
            raise ValueError(f"{where}: spatial=0 is not supported")
    if node.op == "Gemm" and (a("transA", 0) not in (0, 1) or a("transB", 0) not in (0, 1)):
        raise ValueError(f"{where}: transA / transB must be 0 or 1")


def _constant_value(node: OnnxNode, raw: Dict[str, Any]) -> np.ndarray:
    from onnx import numpy_helper

    if len(raw) != 1:
        raise ValueError(f"{node.where()}: expected exactly one of {OPERATORS['Constant']}, got {sorted(raw)}")
    (key, v), = raw.items()
    if key == "value":
        return numpy_helper.to_array(v)
    return np.asarray(v, np.float32 if key.startswith("value_float") else np.int64)


def _tensor_kind(arr: np.ndarray, what: str) -> str:
    if np.issubdtype(arr.dtype, np.floating):
        return "float"
    if np.issubdtype(arr.dtype, np.integer):
        return "int"
    raise ValueError(f"{what}: dtype {arr.dtype} is not supported (float or integer tensors only)")


def _input_shape(value_info, where: str) -> Tuple[int, ...]:
    from onnx import TensorProto

    t = value_info.type.tensor_type
    if t.elem_type not in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16):
        raise ValueError(f"{where}: expected a floating-point input, got element type {t.elem_type}")
    if not t.HasField("shape"):
        raise ValueError(f"{where}: the file does not declare the input's shape")
    dims = list(t.shape.dim)
    if len(dims) < 2:
        raise ValueError(f"{where}: expected a batched input (N, ...), got rank {len(dims)}")
    out = []
    for i, d in enumerate(dims[1:], start=1):
        if not d.HasField("dim_value") or d.dim_value < 1:
            raise ValueError(f"{where}: dimension {i} is {d.dim_param or 'unknown'!r}; all but the batch "
                             f"dimension must be fixed")
        out.append(int(d.dim_value))
    return tuple(out)


def _batch_of_one(value_info) -> bool:
    """True when the file declares its batch dimension as the fixed size 1 (PyTorch's export of one example)."""
    d = value_info.type.tensor_type.shape.dim[0]
    return d.HasField("dim_value") and d.dim_value == 1


def _batch_free_targets(nodes: List[OnnxNode], statics: List[Tuple[str, Tuple[int, ...], Tuple[int, ...]]]):
    """``(nodes, statics)`` of a file declared with a batch of 1, where each ``Reshape`` whose constant target
    starts with that 1 (``[1, 784]``, ``[1, 784, 1]``) reads it as the batch: the target becomes ``[0, ...]``
    (``0`` copies the batch; ``-1`` under ``allowzero=1`` when the target has no other ``-1``), a new constant.
    Every activation keeps the batch first (the evaluation refuses anything else), so on a batch of 1 the
    graph is the file's, and on a batch of n it computes the file's function point by point."""
    consts = {name: (shape, vals) for name, shape, vals in statics}
    out_nodes, extra = [], {}
    for n in nodes:
        t = n.inputs[1] if n.op == "Reshape" and len(n.inputs) > 1 else ""
        shape, vals = consts.get(t, ((), ()))
        if len(shape) == 1 and vals and vals[0] == 1:
            if not n.attr("allowzero", 0):
                first = 0
            elif -1 not in vals:
                first = -1
            else:
                out_nodes.append(n)
                continue
            name = f"{t}:batch"
            extra[name] = (name, shape, (first,) + tuple(vals[1:]))
            n = dataclasses.replace(n, inputs=(n.inputs[0], name) + tuple(n.inputs[2:]))
        out_nodes.append(n)
    return out_nodes, statics + list(extra.values())


#: ``layout`` values of :func:`load_onnx`.
LAYOUTS = ("auto", "nchw", "nhwc")


def _layout(layout: str, file_shape: Tuple[int, ...], first_ops: Sequence[Tuple[str, Any]] = ()) -> str:
    """The file's image layout: ``layout`` itself, or for ``'auto'``: NHWC when the input goes into a
    ``Transpose`` with ``perm (0, 3, 1, 2)`` (how NHWC exporters reach a ``Conv``), NCHW when it goes straight
    into a ``Conv``; else NHWC when the point's last dim looks like channels and its first does not (``(H, W,
    C)`` with ``C <= 4 < H``: ``(28, 28, 1)``, ``(32, 32, 3)``), else ONNX's NCHW. ``first_ops``: ``(op,
    perm)`` of the nodes reading the input."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
    if layout != "auto":
        return layout
    if any(op == "Transpose" and tuple(perm or ()) == (0, 3, 1, 2) for op, perm in first_ops):
        return "nhwc"
    if any(op == "Conv" for op, _ in first_ops):
        return "nchw"
    return "nhwc" if len(file_shape) == 3 and file_shape[2] <= 4 < file_shape[0] else "nchw"


def read_onnx(model_or_path: Any, layout: str = "auto") -> Tuple[OnnxGraph, Dict[str, jax.Array], Dict[str, Any]]:
    """``(graph, params, info)`` of an ONNX file or ``onnx.ModelProto``, checked (see the module docstring);
    ``layout`` as :func:`load_onnx`'s.

    Raises:
      ValueError: the file cannot be read, or names the first node whose operator, attribute or
        input is not supported.
    """
    import onnx

    _layout(layout, ())                                    # a bad value fails before the file is read
    if isinstance(model_or_path, onnx.ModelProto):
        proto, where = model_or_path, "model"
    else:
        path = os.fspath(model_or_path)
        where = f"model {path!r}"
        if not os.path.isfile(path):
            raise ValueError(f"{where}: no such file")
        try:
            proto = onnx.load(path)
        except Exception as e:  # noqa: BLE001 - any parse failure of a user's file
            raise ValueError(f"{where}: not a readable ONNX file ({type(e).__name__}: {e})") from None
    g = proto.graph
    if g.sparse_initializer:
        raise ValueError(f"{where}: sparse initializers are not supported")

    tensors: Dict[str, np.ndarray] = {}
    for t in g.initializer:
        tensors[t.name] = onnx.numpy_helper.to_array(t)
    inputs = [v for v in g.input if v.name not in tensors]
    if len(inputs) != 1 or len(g.output) != 1:
        raise ValueError(f"{where}: expected one input and one output, got inputs "
                         f"{[v.name for v in inputs]} and outputs {[v.name for v in g.output]}")
    file_shape = _input_shape(inputs[0], f"{where}: input {inputs[0].name!r}")
    input_name = inputs[0].name

    nodes: List[OnnxNode] = []
    known = set(tensors) | {input_name}
    for i, p in enumerate(g.node):
        name = p.name or f"#{i} {p.op_type}"
        probe = OnnxNode(p.op_type, name, tuple(p.input), tuple(p.output))
        if p.domain not in ("", "ai.onnx"):
            raise ValueError(f"{probe.where()}: operator domain {p.domain!r} is not supported (only the default)")
        if p.op_type not in OPERATORS:
            raise ValueError(f"{probe.where()}: operator {p.op_type} is not supported (supported: "
                             f"{', '.join(sorted(OPERATORS))})")
        raw = _node_attrs(p, probe.where())
        missing = [t for t in p.input if t and t not in known]
        if missing:
            raise ValueError(f"{probe.where()}: input {missing[0]!r} is not computed before it "
                             f"(nodes must be in topological order)")
        known.update(o for o in p.output if o)
        if p.op_type == "Constant":
            if len(p.output) != 1:
                raise ValueError(f"{probe.where()}: expected one output")
            tensors[p.output[0]] = _constant_value(probe, raw)
            continue
        node = OnnxNode(p.op_type, name, tuple(p.input), tuple(p.output),
                        tuple(sorted((k, _hashable(v)) for k, v in raw.items())))
        _check_node(node, raw, len(p.input))
        nodes.append(node)

    try:        # after the node checks, which name the node of an unsupported operator or attribute
        onnx.checker.check_model(proto)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{where}: the ONNX checker rejects it ({str(e).splitlines()[0] if str(e) else e})") from None
    output_name = g.output[0].name
    if output_name not in known:
        raise ValueError(f"{where}: output {output_name!r} is not computed by any node")
    used = {t for n in nodes for t in n.inputs if t} | {output_name}
    params: Dict[str, jax.Array] = {}
    statics = []
    for name, arr in tensors.items():
        if name not in used:
            continue
        if _tensor_kind(arr, f"{where}: tensor {name!r}") == "float":
            params[name] = jnp.asarray(np.asarray(arr, np.float32))
        else:
            statics.append((name, tuple(int(s) for s in arr.shape), tuple(int(v) for v in arr.ravel())))
    if _batch_of_one(inputs[0]):
        nodes, statics = _batch_free_targets(nodes, statics)
    static = {name for name, _, _ in statics}        # shape values: integer constants and what shapes give
    for n in nodes:
        ins = [t for t in n.inputs if t]
        for j, t in enumerate(n.inputs):
            if not t:
                continue
            if n.op == "Reshape" and j == 1 and t not in static:
                raise ValueError(f"{n.where()}: the target shape {t!r} must be a constant (an initializer or "
                                 f"Constant) or computed from shapes, not from the input's values")
            if n.op in ("Gather", "Squeeze", "Unsqueeze") and j == 1 and t not in static:
                raise ValueError(f"{n.where()}: input {t!r} must be a constant integer tensor (or computed "
                                 f"from shapes)")
            if t in static and n.op not in SHAPE_OPS and not (n.op == "Reshape" and j == 1):
                raise ValueError(f"{n.where()}: input {t!r} must be a floating-point tensor")
        if n.op == "Shape" or (n.op in SHAPE_OPS and ins and all(t in static for t in ins)):
            static.add(n.outputs[0])
    if output_name in static:
        raise ValueError(f"{where}: the output {output_name!r} is a shape value, not logits")

    layout = _layout(layout, file_shape, [(n.op, n.attr("perm")) for n in nodes if input_name in n.inputs])
    nchw = layout == "nchw" and len(file_shape) == 3
    input_shape = (file_shape[1], file_shape[2], file_shape[0]) if nchw else file_shape
    graph = OnnxGraph(tuple(nodes), input_name, output_name, input_shape, file_shape, tuple(statics), layout)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    info = {"format": "onnx", "input_shape": list(input_shape), "file_input_shape": list(file_shape),
            "layout": "NHWC (file NCHW)" if nchw else "NHWC (as in the file)" if len(file_shape) == 3
            else "as in the file", "opset": opset,
            "producer": f"{proto.producer_name} {proto.producer_version}".strip(),
            "operators": sorted({n.op for n in nodes})}
    info["n_classes"] = _check_runs(graph, params, where)
    return graph, params, info


def _check_runs(graph: OnnxGraph, params: Dict[str, Any], where: str) -> int:
    """The number of logits, after checking the graph gives ``(n, K)`` for batches of 2 and 3."""
    shapes = []
    for n in (2, 3):
        spec = jax.ShapeDtypeStruct((n,) + tuple(graph.input_shape), jnp.float32)
        try:
            out = jax.eval_shape(functools.partial(_apply, graph), params, spec)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        except Exception as e:  # noqa: BLE001 - anything else the evaluation hits
            raise ValueError(f"{where}: the graph cannot be evaluated on a batch of {n} "
                             f"({type(e).__name__}: {e})") from None
        shapes.append(tuple(out.shape))
    if len(shapes[0]) != 2 or shapes[0][0] != 2 or shapes[1] != (3, shapes[0][1]):
        raise ValueError(f"{where}: expected logits of shape (n, K) for any batch n, got {shapes[0]} for n=2 "
                         f"and {shapes[1]} for n=3")
    return int(shapes[0][-1])


def load_onnx(path: Any, label: Optional[str] = None, layout: str = "auto") -> LoadedModel:
    """An ONNX classifier as a :class:`~rcurves.models.LoadedModel`.

    Args:
      path: an ``.onnx`` file (external data next to it is read by ``onnx``).
      label: its name in tables and files (default: the file name without ``.onnx``).
      layout: the layout of a 4-d input: ``'nchw'`` (ONNX's convention, e.g. PyTorch exports; the toolkit's
        NHWC points are transposed on entry), ``'nhwc'`` (the file takes NHWC, e.g. JAX or TensorFlow
        exports) or ``'auto'`` (default): NHWC when the input goes into a ``Transpose`` to NCHW, NCHW when it
        goes into a ``Conv``, else NHWC when the declared point shape is ``(H, W, C)`` with ``C <= 4 < H``,
        else NCHW. Either way ``logits_fn`` takes NHWC.

    Returns:
      ``LoadedModel(label, logits_fn, identity, info)``: ``logits_fn`` an
      :class:`OnnxFn` taking ``(n, *info['input_shape'])`` (NHWC for image
      models, see the module docstring) and returning ``(n, K)``;
      ``identity`` ``'onnx:<sha256 of the file>'``; ``info`` JSON-ready
      (source, layout, opset, producer, operators, n_classes). ``model`` and
      ``params`` are None (they hold a toolkit ``ModelConfig``);
      ``rcurves.certify.from_onnx`` turns the model into a verifiable network.

    Raises:
      ValueError: the file is missing or unreadable, or names the node and operator that is not
        supported (see the module docstring for what is).

    Example::

        m = load_onnx("mnist_mlp.onnx")
        logits = m.logits_fn(x)          # x (n, 28, 28, 1) or (n, 784)
    """
    try:
        p = os.fspath(path)
    except TypeError:
        raise ValueError(f"path: expected a file path, got {type(path).__name__}") from None
    graph, params, info = read_onnx(p, layout)
    with open(p, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    name = label or os.path.splitext(os.path.basename(p))[0]
    return LoadedModel(name, OnnxFn(graph, params), f"onnx:{digest}",
                       {"source": os.path.abspath(p), **info})


__all__ = ["LAYOUTS", "OPERATORS", "SHAPE_OPS", "OnnxFn", "OnnxGraph", "OnnxNode", "eval_node", "load_onnx",
           "read_onnx", "window_pads"]
