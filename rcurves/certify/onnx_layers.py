"""ONNX models as verifiable networks: :func:`from_onnx` writes a read ONNX graph as a :class:`Network`.

The graph is read by :func:`rcurves.models.onnx_reader.read_onnx` (which
checks every operator); here it is walked once, in order, and written as the
layers of :mod:`rcurves.nets.layers`, which compute the same function on
the toolkit's input (the reader's ``input_shape``: NHWC images, anything
else as in the file).

**Input layouts.** One point of the file's input ``(N, *dims)`` is either an
image, ``dims`` of rank 3 (NCHW, stored HWC; or NHWC, stored as it is: the
reader decides, see its ``layout``), or a tensor of any other rank stored
flat in the file's row-major order: ``(d,)``, ``(d, 1)``, ``(1, d)`` (as
PyTorch exports one column or row: ``(1, 784, 1)``), ``(M, d)``. A 4-d
``(N, 1, d, 1)`` is a one-channel image whose flat order is the vector's.
Either way ``X_i`` of a VNN-LIB property is the ``i``-th value in the file's
order: NCHW images are reordered to NHWC (``RobustnessProperty.box_nhwc``),
everything else is taken as it is.

**Operators.**

* ``Gemm`` (``transB`` 0 or 1, ``alpha``, ``beta``) and ``MatMul`` with a
  constant weight -> :class:`Dense`; a ``MatMul`` of one point's ``(..., M,
  D)`` by ``B (D, K)``, or ``A (K, M)`` times it (a column ``(D, 1)``), is the
  Dense of ``B^T`` or ``A`` (block-diagonal over any other rows, at most
  :data:`MAX_DENSE` entries);
* ``Conv`` (``group=1``) -> :class:`Conv` (kernel ``(F, C, kh, kw)``
  transposed to ``(kh, kw, C, F)``) when a 'SAME' convolution of the same
  stride computes it: 'SAME' padding, or any ``pads`` / ``dilations`` that
  give as many outputs, the kernel then placed (dilated) inside a larger
  kernel of zeros (PyTorch's ``kernel 3, stride 2, padding 1`` is a 4x4
  'SAME' kernel); otherwise (no padding, unequal strides, ...) the
  :class:`Dense` of its matrix, computed from unit images, up to
  :data:`MAX_DENSE` entries;
* ``AveragePool`` the same way, with a ``1 / (kh kw)`` diagonal kernel (a
  Dense where ``count_include_pad=0`` meets padding);
  ``GlobalAveragePool`` -> a :class:`Dense` averaging map;
* elementwise affine maps with constants -- ``Add`` / ``Sub`` / ``Mul`` /
  ``Div`` (input normalisation; the bias ``Add`` after a ``MatMul``) and
  ``BatchNormalization`` -- are folded into the preceding ``Dense`` (any
  constant) or ``Conv`` (per-channel constants) of the same block; where
  there is none (on the input, right after a ReLU) they become a 1x1
  :class:`Conv` (per-channel constants) or a diagonal :class:`Dense`
  (per-element constants). A normalisation is never folded into a
  *following* padded convolution: its zero padding is zero in normalised
  units;
* ``Flatten`` / ``Reshape`` / ``Squeeze`` / ``Unsqueeze`` (constant shapes,
  the batch kept first: ``[-1, 784]``, ``[0, 784, 1]``, and ``[1, 784]`` in a
  file of one example) -> :class:`Reshape` where the storage changes; since
  the network stores images as HWC and the file flattens them as CHW, the
  order of a flattened tensor is tracked and folded into the next
  ``Dense``'s columns (or the previous one's rows), so no layer permutes
  values at run time;
* ``Transpose`` only changes which file axis is which (bookkeeping, on
  images and on tensors; an NHWC file's ``Transpose`` to NCHW before a
  ``Conv`` is bookkeeping too); ``Relu`` -> :class:`ReLU`; ``Identity``,
  ``Cast`` to float, constant subgraphs and shape arithmetic (``Shape`` of
  the activation, read with a batch of 1, and what is computed from it)
  vanish.

Graphs the layers cannot express raise ``ValueError`` naming the node: an
operator the reader evaluates but no layer computes (``Concat`` or
``Gather`` of an activation, ...), a residual ``Add`` of two activations or
any other branching (a :class:`Network` is a chain), products of
activations, a window or ``MatMul`` whose Dense would exceed
:data:`MAX_DENSE`, an image a ``Conv`` or pool needs in an order (HWC) that
no ``Dense`` before it can produce. Operators the reader does not evaluate
are refused by the reader, naming the node (its name, or ``#index op``).
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from rcurves.nets.layers import Conv, Dense, Network, ReLU, Reshape, network
from rcurves.models.loaded import LoadedModel
from rcurves.models.onnx_reader import OnnxFn, OnnxGraph, OnnxNode, eval_node, read_onnx, window_pads

#: largest diagonal ``Dense`` written for a per-element affine map (features), beyond which it is an error
MAX_DIAGONAL = 8192
#: most entries of a ``Dense`` written for a convolution or pooling no 'SAME' ``Conv`` computes, or for a
#: ``MatMul`` applied to several rows of one point (float32: 64 MiB), beyond which it is an error
MAX_DENSE = 1 << 24


@dataclasses.dataclass(frozen=True)
class _Act:
    """The activation being computed, per point: its file shape and how the network stores it.

    An image (``perm`` given): file shape ``(C, H, W)`` stored as ``file.transpose(perm)``; ``perm == (1, 2, 0)``
    is HWC. A tensor (``perm == ()``): a file shape of any rank (``(D,)``, ``(D, 1)``, ``(1, D, 1)``, ``(M, D)``)
    stored flat, ``(prod(shape),)``, so that ``stored[i] == file.ravel()[index[i]]`` (``index`` None: the
    file's row-major order).
    """

    name: str
    shape: Tuple[int, ...]
    perm: Tuple[int, ...] = ()
    index: Optional[np.ndarray] = None

    @property
    def image(self) -> bool:
        return bool(self.perm)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def stored_shape(self) -> Tuple[int, ...]:
        return tuple(self.shape[p] for p in self.perm) if self.image else (self.size,)

    def stored(self, a: np.ndarray) -> np.ndarray:
        """A per-point array in file layout, in the network's storage layout."""
        if self.image:
            return a.transpose(self.perm)
        return a.reshape(-1) if self.index is None else a.reshape(-1)[self.index]


_HWC = (1, 2, 0)


def _same_pads(size: int, k: int, stride: int) -> Tuple[int, int]:
    """``(lo, hi)`` padding of a 'SAME' window (lax's and certify.Conv's: the odd pixel at the end)."""
    total = max((-(-size // stride) - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def _same_embedding(size: int, k: int, lo: int, stride: int, dilation: int) -> Optional[Tuple[int, int]]:
    """``(k2, offset)``: a 'SAME' window of ``k2`` taps (``certify.Conv``'s padding for ``size`` and ``stride``)
    whose taps ``offset + t * dilation`` (``t < k``) read, for every output, the input rows that an ONNX
    window of ``k`` taps with ``dilation`` and leading padding ``lo`` reads; None when there is none. The
    caller checks that both give the same number of outputs; rows outside the input are zero in both."""
    span = (k - 1) * dilation + 1
    for k2 in range(span, 2 * (span + abs(lo) + stride) + 2):
        offset = _same_pads(size, k2, stride)[0] - lo
        if offset >= 0 and offset + span <= k2:
            return k2, offset
    return None


def _same_kernel(w: np.ndarray, spatial: Tuple[int, int], pads, strides, dilations) -> Optional[np.ndarray]:
    """The kernel ``(kh2, kw2, C, F)`` of a :class:`Conv` computing the ONNX convolution of kernel ``w (F, C, kh,
    kw)`` with ``pads [(top, bottom), (left, right)]``, ``strides`` and ``dilations`` on a ``spatial (H, W)``
    input: ``w`` placed, dilated, inside a larger kernel of zeros; None when no 'SAME' convolution computes it
    (strides that differ, another number of outputs)."""
    if strides[0] != strides[1]:
        return None
    s = int(strides[0])
    place = []
    for size, k, (lo, hi), d in zip(spatial, w.shape[2:], pads, dilations):
        span = (k - 1) * d + 1
        if size + lo + hi < span or (size + lo + hi - span) // s + 1 != -(-size // s):
            return None
        emb = _same_embedding(size, k, lo, s, d)
        if emb is None:
            return None
        place.append((emb[0], emb[1] + d * np.arange(k)))
    (kh2, rows), (kw2, cols) = place
    out = np.zeros(w.shape[:2] + (kh2, kw2))
    out[:, :, rows[:, None], cols[None, :]] = w
    return out.transpose(2, 3, 1, 0)


def _f32(a) -> jnp.ndarray:
    return jnp.asarray(np.asarray(a, np.float32))


class _Builder:
    def __init__(self, graph: OnnxGraph, params: Dict[str, Any]):
        self.graph = graph
        self.consts: Dict[str, np.ndarray] = {k: np.asarray(v) for k, v in graph.static_values().items()}
        self.consts.update({k: np.asarray(v, np.float64) for k, v in params.items()})
        shape = tuple(graph.file_input_shape)
        self.layers: List[Any] = []
        if len(shape) == 3:       # stored HWC: an NCHW file's (C, H, W) transposed, an NHWC file's as it is
            self.act = _Act(graph.input_name, shape, _HWC if graph.nchw else (0, 1, 2))
        else:                     # (D,), (D, 1), (1, D), (M, D), ...: flat, in the file's order
            self.act = _Act(graph.input_name, shape)
            if len(shape) != 1:
                self.layers.append(Reshape((self.act.size,)))

    # -- helpers --------------------------------------------------------------------------------------------

    def _block_linear(self, skip_reshapes: bool):
        """Index of the last Dense / Conv of the current block (after the last ReLU), or None."""
        for i in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[i]
            if isinstance(layer, (Dense, Conv)):
                return i
            if not (skip_reshapes and isinstance(layer, Reshape)):
                return None
        return None

    def _per_point(self, node: OnnxNode, c: np.ndarray) -> np.ndarray:
        """A constant operand broadcast against the batched activation, as one point's array (file layout)."""
        full = (1,) + self.act.shape
        if c.ndim > len(full):
            raise ValueError(f"{node.where()}: a constant of shape {c.shape} does not broadcast to {full}")
        try:
            return np.broadcast_to(c, full)[0].astype(np.float64)
        except ValueError:
            raise ValueError(f"{node.where()}: a constant of shape {c.shape} does not broadcast to "
                             f"one point's {full}") from None

    def _affine(self, node: OnnxNode, scale: np.ndarray, shift: np.ndarray) -> None:
        """``z -> scale * z + shift`` elementwise (per-point arrays in file layout)."""
        a, c = self.act.stored(scale), self.act.stored(shift)
        shape = a.shape
        per_channel = self.act.image and self.act.perm == _HWC and np.all(a == a[:1, :1]) and np.all(c == c[:1, :1])
        i = self._block_linear(skip_reshapes=True)
        if i is not None and isinstance(self.layers[i], Dense):
            d = self.layers[i]
            w, b = np.asarray(d.w, np.float64), np.asarray(d.b, np.float64)
            self.layers[i] = Dense(_f32(a.reshape(-1, 1) * w), _f32(a.ravel() * b + c.ravel()))
            return
        if i == len(self.layers) - 1 and i is not None and per_channel:       # a Conv right before
            conv = self.layers[i]
            k, b = np.asarray(conv.kernel, np.float64), np.asarray(conv.bias, np.float64)
            self.layers[i] = Conv(_f32(k * a[0, 0]), _f32(b * a[0, 0] + c[0, 0]), conv.stride)
            return
        if per_channel:
            ch = a.shape[-1]
            self.layers.append(Conv(_f32(np.diag(a[0, 0]).reshape(1, 1, ch, ch)), _f32(c[0, 0]), 1))
            return
        d = math.prod(shape)
        if d > MAX_DIAGONAL:
            raise ValueError(f"{node.where()}: a per-element affine map of {d} features would need a {d} x {d} "
                             f"Dense layer (at most {MAX_DIAGONAL})")
        if len(shape) > 1:
            self.layers.append(Reshape((d,)))
        self.layers.append(Dense(_f32(np.diag(a.ravel())), _f32(c.ravel())))
        if len(shape) > 1:
            self.layers.append(Reshape(shape))

    def _to_tensor(self) -> None:
        """Store the current image flat: a tensor of the same file shape, its file order (C, H, W) tracked."""
        act = self.act
        if not act.image:
            return
        d = act.size
        index = np.arange(d).reshape(act.shape).transpose(act.perm).ravel()
        self.layers.append(Reshape((d,)))
        self.act = _Act(act.name, act.shape, (), None if np.all(index == np.arange(d)) else index)

    def _to_image(self, node: OnnxNode, shape: Tuple[int, ...], required: bool = True) -> bool:
        """Store the current values as the file-layout image ``shape (C, H, W)``, HWC; where that reorders
        them (CHW file order, HWC network order) the permutation goes into the rows of the block's last Dense.
        Without one: ValueError, or False (``required=False``; the activation is then left a tensor)."""
        self._to_tensor()
        d = math.prod(shape)
        # stored position j of the HWC image holds file index want[j]; the tensor holds file index index[i]
        want = np.arange(d).reshape(shape).transpose(_HWC).ravel()
        inverse = np.arange(d) if self.act.index is None else np.argsort(self.act.index)
        gather = inverse[want]
        if not np.all(gather == np.arange(d)):
            i = self._block_linear(skip_reshapes=True)
            if i is None or not isinstance(self.layers[i], Dense):
                if not required:
                    return False
                raise ValueError(f"{node.where()}: an image of shape {shape} here reorders values (CHW file "
                                 f"order, HWC network order) and no Dense layer before it can absorb the "
                                 f"permutation")
            dense = self.layers[i]
            self.layers[i] = Dense(dense.w[gather], dense.b[gather])
        self.layers.append(Reshape(tuple(shape[p] for p in _HWC)))
        self.act = _Act(self.act.name, tuple(shape), _HWC)
        return True

    def _reshape(self, node: OnnxNode, shape: Sequence[int]) -> None:
        """The current values, row-major as in the file, as one point of file shape ``shape``: bookkeeping,
        plus a Reshape layer where the storage changes (a 3-d shape is stored as an image when that costs no
        permutation layer)."""
        shape = tuple(int(s) for s in shape)
        act = self.act
        if act.image and act.shape == shape and act.perm == _HWC:
            return
        self._to_tensor()
        self.act = dataclasses.replace(self.act, shape=shape)
        if len(shape) == 3:
            self._to_image(node, shape, required=False)

    def _hwc(self, node: OnnxNode) -> Tuple[int, int, int]:
        """The file shape ``(C, H, W)`` of the current image, stored HWC (a 3-d tensor is stored so first)."""
        if not self.act.image and len(self.act.shape) == 3:
            self._to_image(node, self.act.shape)
        if not self.act.image or self.act.perm != _HWC:
            raise ValueError(f"{node.where()}: expected an image in the file's (C, H, W) layout here, got one "
                             f"of shape {self.act.shape}" + (f" transposed by {self.act.perm}" if self.act.perm
                                                                else ""))
        return self.act.shape

    def _window(self, node: OnnxNode, kernel: np.ndarray, bias: np.ndarray, pads, strides, dilations,
                linear) -> None:
        """A convolution (``kernel (F, C, kh, kw)``, ``bias (F,)``, ONNX's ``pads [(top, bottom), (left,
        right)]``, ``strides``, ``dilations``) of the current image: a :class:`Conv` where a 'SAME' one
        computes it (:func:`_same_kernel`), else the Dense of its matrix (``linear``: the node without bias on
        a batch of file-layout images)."""
        c, h, w = self._hwc(node)
        k2 = _same_kernel(kernel, (h, w), pads, strides, dilations)
        if k2 is None:
            self._window_dense(node, bias, pads, strides, dilations, linear)
            return
        s = int(strides[0])
        self.layers.append(Conv(_f32(k2), _f32(bias), s))
        self.act = _Act(self.act.name, (int(kernel.shape[0]), -(-h // s), -(-w // s)), _HWC)

    def _window_dense(self, node: OnnxNode, bias: np.ndarray, pads, strides, dilations, linear) -> None:
        """The linear window map ``linear`` (file-layout images ``(n, C, H, W) -> (n, F, Ho, Wo)``) plus a
        per-channel ``bias`` as one Dense: its matrix is ``linear`` of the unit images."""
        c, h, w = self._hwc(node)
        d = c * h * w
        out = tuple(int(v) for v in jax.eval_shape(linear, jax.ShapeDtypeStruct((1, c, h, w), jnp.float32)).shape[1:])
        if d * math.prod(out) > MAX_DENSE:
            raise ValueError(f"{node.where()}: padding {[tuple(p) for p in pads]} (top/bottom, left/right), "
                             f"strides {tuple(strides)}, dilations {tuple(dilations)} on a {h}x{w} input is not a "
                             f"'SAME' certify.Conv, and its matrix ({math.prod(out)} x {d}) exceeds MAX_DENSE "
                             f"({MAX_DENSE} entries)")
        unit = jnp.eye(d, dtype=jnp.float32).reshape(d, c, h, w)
        m = np.asarray(linear(unit), np.float64).reshape(d, -1).T          # (out, in), file orders
        self._dense(node, m, np.broadcast_to(np.reshape(bias, (-1, 1, 1)), out).ravel(), out)
        self._to_image(node, out)

    # -- the walk -------------------------------------------------------------------------------------------

    def add(self, node: OnnxNode) -> None:
        acts = [t for t in node.inputs if t and t not in self.consts]
        if not acts:      # a constant subgraph: evaluate it now
            value = eval_node(node, [self.consts[t] if t else None for t in node.inputs])
            self.consts[node.outputs[0]] = np.asarray(value)
            return
        for t in acts:
            if t != self.act.name:
                raise ValueError(f"{node.where()}: reads {t!r}, an activation computed before {self.act.name!r}: "
                                 f"the graph branches (a residual or skip connection), and a certify.Network "
                                 f"is a chain of layers")
        if node.op == "Shape":    # a shape value (one point, batch 1), not a step of the chain
            self.consts[node.outputs[0]] = np.asarray(eval_node(node, [np.zeros((1,) + self.act.shape)]))
            return
        if not hasattr(self, "_op_" + node.op):
            raise ValueError(f"{node.where()}: {node.op} of an activation is not a layer of a certify.Network")
        if len(acts) > 1:
            what = "a residual connection" if node.op == "Add" else "a product of activations"
            raise ValueError(f"{node.where()}: combines two activations ({what}), which no layer of a "
                             f"certify.Network computes")
        getattr(self, "_op_" + node.op)(node)
        self.act = dataclasses.replace(self.act, name=node.outputs[0])

    def _const(self, node: OnnxNode, k: int) -> Optional[np.ndarray]:
        t = node.inputs[k] if k < len(node.inputs) else ""
        if not t:
            return None
        if t not in self.consts:
            raise ValueError(f"{node.where()}: input {k} ({t!r}) must be a constant for the network")
        return self.consts[t]

    def _dense(self, node: OnnxNode, w: np.ndarray, b: np.ndarray, shape: Optional[Tuple[int, ...]] = None) -> None:
        """Append ``Dense(w, b)`` with ``w (out, in)`` over the file's order of the flattened input; the result is a
        tensor of file shape ``shape`` (default ``(out,)``)."""
        self._to_tensor()
        if self.act.index is not None:
            w = w[:, self.act.index]
        self.layers.append(Dense(_f32(w), _f32(b)))
        self.act = _Act(self.act.name, tuple(shape) if shape else (int(w.shape[0]),))

    def _op_Gemm(self, node: OnnxNode) -> None:
        if node.inputs[0] != self.act.name or node.attr("transA", 0) or self.act.image or len(self.act.shape) != 1:
            raise ValueError(f"{node.where()}: expected the activation as A (N, D), not transposed")
        b = self._const(node, 1)
        b = b.T if node.attr("transB", 0) else b
        w = node.attr("alpha", 1.0) * b.T
        c = self._const(node, 2)
        bias = np.zeros(w.shape[0]) if c is None else np.broadcast_to(node.attr("beta", 1.0) * c, (1, w.shape[0]))[0]
        self._dense(node, w, bias)

    def _op_MatMul(self, node: OnnxNode) -> None:
        """``x (..., M, D) @ B (D, K)`` or ``A (K, M) @ x (..., M, D)`` per point, ``x`` the activation: a Dense
        (``B^T`` or ``A`` itself for one row or column, ``(M, D) = (1, D)`` or ``(D, 1)``; else the
        block-diagonal matrix over the other axes)."""
        first = node.inputs[0] == self.act.name
        c = self._const(node, 1 if first else 0)
        if c.ndim != 2:
            raise ValueError(f"{node.where()}: expected a 2-d constant weight, got shape {c.shape}")
        s = self.act.shape
        if first and s[-1] != c.shape[0] or not first and (len(s) < 2 or s[-2] != c.shape[1]):
            raise ValueError(f"{node.where()}: cannot multiply " + (f"one point's {s} by {c.shape}" if first else
                                                                     f"{c.shape} by one point's {s}"))
        if first:           # row by row: out[..., k] = sum_d x[..., d] B[d, k]
            rows, cols, out = math.prod(s[:-1]), 1, s[:-1] + (int(c.shape[1]),)
        else:               # column by column: out[..., k, j] = sum_m A[k, m] x[..., m, j]
            rows, cols, out = math.prod(s[:-2]), s[-1], s[:-2] + (int(c.shape[0]), s[-1])
        entries = (rows * cols) ** 2 * c.size
        if entries > MAX_DENSE:
            raise ValueError(f"{node.where()}: one point's {s} times a constant {c.shape} is a Dense of "
                             f"{entries} entries (at most MAX_DENSE = {MAX_DENSE})")
        w = c.T if first else (np.kron(c, np.eye(cols)) if cols > 1 else c)
        self._dense(node, np.kron(np.eye(rows), w) if rows > 1 else w, np.zeros(math.prod(out)), out)

    def _op_Add(self, node: OnnxNode) -> None:
        c = self._const(node, 1 if node.inputs[0] == self.act.name else 0)
        self._affine(node, np.ones(self.act.shape), self._per_point(node, c))

    def _op_Sub(self, node: OnnxNode) -> None:
        first = node.inputs[0] == self.act.name
        c = self._per_point(node, self._const(node, 1 if first else 0))
        self._affine(node, np.full(self.act.shape, 1.0 if first else -1.0), -c if first else c)

    def _op_Mul(self, node: OnnxNode) -> None:
        c = self._const(node, 1 if node.inputs[0] == self.act.name else 0)
        self._affine(node, self._per_point(node, c), np.zeros(self.act.shape))

    def _op_Div(self, node: OnnxNode) -> None:
        if node.inputs[0] != self.act.name:
            raise ValueError(f"{node.where()}: divides by an activation, which is not affine")
        self._affine(node, 1.0 / self._per_point(node, self._const(node, 1)), np.zeros(self.act.shape))

    def _op_BatchNormalization(self, node: OnnxNode) -> None:
        scale, bias, mean, var = (self._const(node, k) for k in range(1, 5))
        a = scale / np.sqrt(var + node.attr("epsilon", 1e-5))
        shape = (-1,) + (1,) * (len(self.act.shape) - 1)
        self._affine(node, self._per_point(node, a.reshape(shape)), self._per_point(node, (bias - mean * a).reshape(shape)))

    def _op_Relu(self, node: OnnxNode) -> None:
        if self.layers and isinstance(self.layers[-1], ReLU):
            return                       # relu(relu(z)) = relu(z)
        if not self.layers:
            self.layers.append(Reshape(self.act.stored_shape))   # an identity, so that the ReLU follows a layer
        self.layers.append(ReLU())

    def _op_Identity(self, node: OnnxNode) -> None:
        pass

    _op_Cast = _op_Identity         # of an activation: to float or double, both float32 here (the reader's check)

    def _op_Flatten(self, node: OnnxNode) -> None:
        self._reshape(node, (self.act.size,))

    def _op_Reshape(self, node: OnnxNode) -> None:
        target = [int(s) for s in self._const(node, 1).ravel()]
        if not node.attr("allowzero", 0):
            target = [(1 if i == 0 else self.act.shape[i - 1]) if s == 0 else s for i, s in enumerate(target)]
        per_point = target[1:]
        d = self.act.size
        if -1 in per_point:
            known = math.prod(s for s in per_point if s != -1)
            per_point = [d // known if s == -1 else s for s in per_point]
        if math.prod(per_point) != d:
            raise ValueError(f"{node.where()}: cannot reshape one point's {self.act.shape} to {tuple(per_point)}")
        self._reshape(node, per_point)

    def _op_Squeeze(self, node: OnnxNode) -> None:
        """``Squeeze`` / ``Unsqueeze`` of an activation (never its batch axis: the reader's check): a reshape."""
        args = [jnp.zeros((2,) + self.act.shape, jnp.float32) if t == self.act.name else
                (self.consts[t] if t else None) for t in node.inputs]
        self._reshape(node, eval_node(node, args).shape[1:])

    _op_Unsqueeze = _op_Squeeze

    def _op_Transpose(self, node: OnnxNode) -> None:
        rank = len(self.act.shape)
        perm = tuple(node.attr("perm") or reversed(range(rank + 1)))
        if perm[0] != 0 or sorted(perm) != list(range(rank + 1)):
            raise ValueError(f"{node.where()}: perm {perm} moves the batch")
        q = tuple(p - 1 for p in perm[1:])
        shape = tuple(self.act.shape[i] for i in q)
        if self.act.image:
            inv = tuple(int(i) for i in np.argsort(q))
            self.act = dataclasses.replace(self.act, shape=shape, perm=tuple(inv[p] for p in self.act.perm))
            return
        # new file position j holds old file position moved[j]; the stored order stays, its file indices change
        moved = np.arange(self.act.size).reshape(self.act.shape).transpose(q).ravel()
        where = np.argsort(moved)
        index = where if self.act.index is None else where[self.act.index]
        self.act = dataclasses.replace(self.act, shape=shape,
                                       index=None if np.all(index == np.arange(index.size)) else index)

    def _op_Conv(self, node: OnnxNode) -> None:
        w = self._const(node, 1)
        b = self._const(node, 2)
        _, h, wd = self._hwc(node)
        kernel = tuple(int(k) for k in w.shape[2:])
        strides = tuple(node.attr("strides", (1, 1)))
        dilations = tuple(node.attr("dilations", (1, 1)))
        pads = window_pads(node, (h, wd), kernel, strides, dilations)
        w32 = jnp.asarray(w, jnp.float32)
        self._window(node, w, np.zeros(w.shape[0]) if b is None else b, pads, strides, dilations,
                     lambda x: eval_node(node, [x, w32]))

    def _op_AveragePool(self, node: OnnxNode) -> None:
        c, h, wd = self._hwc(node)
        kernel = tuple(int(k) for k in node.attr("kernel_shape"))
        if len(kernel) != 2:
            raise ValueError(f"{node.where()}: expected a 2-d pool, got kernel_shape {kernel}")
        strides = tuple(node.attr("strides", (1,) * len(kernel)))
        dilations = tuple(node.attr("dilations", (1,) * len(kernel)))
        pads = window_pads(node, (h, wd), kernel, strides, dilations)
        pool = lambda x: eval_node(node, [x])          # noqa: E731
        if any(p for pair in pads for p in pair) and not node.attr("count_include_pad", 0):
            # the divisor varies at the border: not a convolution, but still a linear map
            self._window_dense(node, np.zeros(c), pads, strides, dilations, pool)
            return
        k = np.zeros((c, c) + kernel)
        k[np.arange(c), np.arange(c)] = 1.0 / math.prod(kernel)
        self._window(node, k, np.zeros(c), pads, strides, dilations, pool)

    def _op_GlobalAveragePool(self, node: OnnxNode) -> None:
        c, h, w = self._hwc(node)
        m = np.zeros((c, h * w, c))
        m[np.arange(c), :, np.arange(c)] = 1.0 / (h * w)
        self.layers += [Reshape((h * w * c,)), Dense(_f32(m.reshape(c, h * w * c)), _f32(np.zeros(c))),
                        Reshape((1, 1, c))]
        self.act = _Act(self.act.name, (c, 1, 1), _HWC)

    def finish(self) -> Network:
        if self.act.name != self.graph.output_name:
            raise ValueError(f"model: the output {self.graph.output_name!r} is not the end of the chain "
                             f"({self.act.name!r})")
        self._to_tensor()
        if self.act.index is not None:
            i = self._block_linear(skip_reshapes=True)
            if i is None or not isinstance(self.layers[i], Dense):
                raise ValueError("model: the logits come out permuted and no Dense layer can absorb it")
            inverse = np.argsort(self.act.index)
            self.layers[i] = Dense(self.layers[i].w[inverse], self.layers[i].b[inverse])
        return network(self.layers, self.graph.input_shape)


def from_onnx(model: Any) -> Network:
    """An ONNX classifier as a :class:`~rcurves.certify.Network` the verifiers bound.

    Args:
      model: a path to an ``.onnx`` file, a :class:`~rcurves.models.LoadedModel` of one
        (:func:`rcurves.models.load_onnx`), its ``logits_fn`` (an ``OnnxFn``), or an ``onnx.ModelProto``.

    Returns:
      a :class:`Network` with ``input_shape`` the toolkit's, the reader's (``(H, W, C)`` for an NCHW image
      model, the file's point shape otherwise: ``(D,)``, ``(784, 1)`` for a ``(1, 784, 1)`` input) computing
      the file's logits: ``net.logits(x)`` equals ``load_onnx(path).logits_fn(x)`` up to float rounding.

    Raises:
      ValueError: naming the node the layers cannot express (see the module docstring), or the
        reader's error for a file it cannot read.
    """
    if isinstance(model, LoadedModel):
        model = model.logits_fn
    if isinstance(model, OnnxFn):
        graph, params = model.graph, model.params
    elif isinstance(model, (str, os.PathLike)) or type(model).__name__ == "ModelProto":
        graph, params, _ = read_onnx(model)
    else:
        raise ValueError(f"model: expected an .onnx path, a LoadedModel of one or its OnnxFn, "
                         f"got {type(model).__name__}")
    builder = _Builder(graph, params)
    for node in graph.nodes:
        builder.add(node)
    return builder.finish()


__all__ = ["MAX_DENSE", "MAX_DIAGONAL", "from_onnx"]
