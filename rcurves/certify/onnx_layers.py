"""ONNX models as verifiable networks: :func:`from_onnx` writes a read ONNX graph as a :class:`Network`.

The graph is read by :func:`rcurves.models.onnx_reader.read_onnx` (which
checks every operator); here it is walked once, in order, and written as the
layers of :mod:`rcurves.nets.layers`, which compute the same function on
the toolkit's input (NHWC images, flat vectors as in the file):

* ``Gemm`` / ``MatMul`` with a constant weight -> :class:`Dense`;
* ``Conv`` (``group=1``, no dilation, equal strides, padding equal to the
  'SAME' padding of that stride, as PyTorch's ``padding=k // 2`` often is)
  -> :class:`Conv` with the kernel ``(F, C, kh, kw)`` transposed to
  ``(kh, kw, C, F)``;
* ``AveragePool`` whose padding is 'SAME' (and, if not zero, counted:
  ``count_include_pad=1``) -> a :class:`Conv` with a ``1 / (kh kw)``
  diagonal kernel; ``GlobalAveragePool`` -> a :class:`Dense` averaging map;
* elementwise affine maps with constants -- ``Add`` / ``Sub`` / ``Mul`` /
  ``Div`` (input normalisation) and ``BatchNormalization`` -- are folded
  into the preceding ``Dense`` (any constant) or ``Conv`` (per-channel
  constants) of the same block; where there is none (on the input, right
  after a ReLU) they become a 1x1 :class:`Conv` (per-channel constants) or
  a diagonal :class:`Dense` (per-element constants). A normalisation is
  never folded into a *following* padded convolution: its zero padding is
  zero in normalised units;
* ``Flatten`` / ``Reshape`` -> :class:`Reshape`; since the network stores
  images as HWC and the file flattens them as CHW, the order of a flattened
  vector is tracked and folded into the next ``Dense``'s columns (or the
  previous one's rows), so no layer permutes values at run time;
* ``Transpose`` only changes which file axis is which (bookkeeping; an NHWC
  file's input is stored as it is, and its ``Transpose`` to NCHW before a
  ``Conv`` is bookkeeping too); ``Relu`` -> :class:`ReLU`; ``Identity``,
  constant subgraphs and shape arithmetic (``Shape`` of the activation, read
  with a batch of 1, and what is computed from it) vanish.

Graphs the layers cannot express raise ``ValueError`` naming the node: a
residual ``Add`` of two activations or any other branching (a
:class:`Network` is a chain), products of activations, a convolution whose
padding, stride or dilation is not that of :class:`Conv`, a reshape that
would need a permutation no neighbouring ``Dense`` can absorb.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Dict, List, Optional, Tuple

import jax.numpy as jnp
import numpy as np

from rcurves.nets.layers import Conv, Dense, Network, ReLU, Reshape, network
from rcurves.models.loaded import LoadedModel
from rcurves.models.onnx_reader import OnnxFn, OnnxGraph, OnnxNode, eval_node, read_onnx, window_pads

#: largest diagonal ``Dense`` written for a per-element affine map (features), beyond which it is an error
MAX_DIAGONAL = 8192


@dataclasses.dataclass(frozen=True)
class _Act:
    """The activation being computed, per point: its file shape and how the network stores it.

    ``image``: file shape ``(C, H, W)`` stored as ``file.transpose(perm)``; ``perm == (1, 2, 0)`` is HWC.
    flat: file shape ``(D,)``, stored so that ``stored[i] == file[index[i]]`` (``index`` None: the same order).
    """

    name: str
    shape: Tuple[int, ...]
    perm: Tuple[int, ...] = ()
    index: Optional[np.ndarray] = None

    @property
    def image(self) -> bool:
        return len(self.shape) == 3

    @property
    def stored_shape(self) -> Tuple[int, ...]:
        return tuple(self.shape[p] for p in self.perm) if self.image else self.shape

    def stored(self, a: np.ndarray) -> np.ndarray:
        """A per-point array in file layout, in the network's storage layout."""
        return a.transpose(self.perm) if self.image else (a if self.index is None else a[self.index])


_HWC = (1, 2, 0)


def _same_pads(size: int, k: int, stride: int) -> Tuple[int, int]:
    """``(lo, hi)`` padding of a 'SAME' window (lax's and certify.Conv's: the odd pixel at the end)."""
    total = max((-(-size // stride) - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def _f32(a) -> jnp.ndarray:
    return jnp.asarray(np.asarray(a, np.float32))


class _Builder:
    def __init__(self, graph: OnnxGraph, params: Dict[str, Any]):
        self.graph = graph
        self.consts: Dict[str, np.ndarray] = {k: np.asarray(v) for k, v in graph.static_values().items()}
        self.consts.update({k: np.asarray(v, np.float64) for k, v in params.items()})
        shape = tuple(graph.file_input_shape)
        if len(shape) == 3:       # stored HWC: an NCHW file's (C, H, W) transposed, an NHWC file's as it is
            self.act = _Act(graph.input_name, shape, _HWC if graph.nchw else (0, 1, 2))
        elif len(shape) == 1:
            self.act = _Act(graph.input_name, shape)
        else:
            raise ValueError(f"model: an input of shape {shape} per point is neither an NCHW image nor a vector")
        self.layers: List[Any] = []

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

    def _to_flat(self) -> None:
        """Flatten the current image (file order C, H, W): a Reshape of the stored array, order tracked."""
        act = self.act
        if not act.image:
            return
        d = math.prod(act.shape)
        index = np.arange(d).reshape(act.shape).transpose(act.perm).ravel()
        self.layers.append(Reshape((d,)))
        self.act = dataclasses.replace(act, shape=(d,), perm=(), index=None if np.all(index == np.arange(d)) else index)

    def _to_image(self, node: OnnxNode, shape: Tuple[int, ...]) -> None:
        """Unflatten the current vector into a file-layout image ``(C, H, W)`` stored as HWC."""
        d = math.prod(shape)
        # stored position j of the HWC image holds file index want[j]; the vector holds file index index[i]
        want = np.arange(d).reshape(shape).transpose(_HWC).ravel()
        inverse = np.arange(d) if self.act.index is None else np.argsort(self.act.index)
        gather = inverse[want]
        if not np.all(gather == np.arange(d)):
            i = self._block_linear(skip_reshapes=True)
            if i is None or not isinstance(self.layers[i], Dense):
                raise ValueError(f"{node.where()}: reshaping to {shape} reorders values (CHW file order, HWC "
                                 f"network order) and no Dense layer before it can absorb the permutation")
            dense = self.layers[i]
            self.layers[i] = Dense(dense.w[gather], dense.b[gather])
        self.layers.append(Reshape(tuple(shape[p] for p in _HWC)))
        self.act = _Act(self.act.name, tuple(shape), _HWC)

    def _hwc(self, node: OnnxNode) -> Tuple[int, int, int]:
        if not self.act.image or self.act.perm != _HWC:
            raise ValueError(f"{node.where()}: expected an image in the file's (C, H, W) layout here, got one "
                             f"of shape {self.act.shape} transposed by {self.act.perm}")
        return self.act.shape

    def _same(self, node: OnnxNode, kernel, strides, dilations, pads_of) -> int:
        """The stride of a window op whose padding is 'SAME' for that stride, or ValueError."""
        c, h, w = self._hwc(node)
        if any(d != 1 for d in dilations):
            raise ValueError(f"{node.where()}: dilations {tuple(dilations)} cannot be written as a certify.Conv")
        if strides[0] != strides[1]:
            raise ValueError(f"{node.where()}: strides {tuple(strides)} differ; certify.Conv has one stride")
        s = int(strides[0])
        got = pads_of((h, w))
        same = [_same_pads(h, kernel[0], s), _same_pads(w, kernel[1], s)]
        if [tuple(p) for p in got] != same:
            raise ValueError(f"{node.where()}: padding {[tuple(p) for p in got]} (top/bottom, left/right) on a "
                             f"{h}x{w} input is not the 'SAME' padding {same} of certify.Conv with stride {s}")
        return s

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

    def _dense(self, node: OnnxNode, w: np.ndarray, b: np.ndarray) -> None:
        """Append ``Dense(w, b)`` with ``w (out, in)`` over the file's order of the flat input."""
        if self.act.image:
            self._to_flat()
        if self.act.index is not None:
            w = w[:, self.act.index]
        self.layers.append(Dense(_f32(w), _f32(b)))
        self.act = _Act(self.act.name, (int(w.shape[0]),))

    def _op_Gemm(self, node: OnnxNode) -> None:
        if node.inputs[0] != self.act.name or node.attr("transA", 0) or self.act.image:
            raise ValueError(f"{node.where()}: expected the activation as A (N, D), not transposed")
        b = self._const(node, 1)
        b = b.T if node.attr("transB", 0) else b
        w = node.attr("alpha", 1.0) * b.T
        c = self._const(node, 2)
        bias = np.zeros(w.shape[0]) if c is None else np.broadcast_to(node.attr("beta", 1.0) * c, (1, w.shape[0]))[0]
        self._dense(node, w, bias)

    def _op_MatMul(self, node: OnnxNode) -> None:
        if node.inputs[0] != self.act.name or self.act.image:
            raise ValueError(f"{node.where()}: expected the activation (N, D) times a constant (D, K)")
        b = self._const(node, 1)
        if b.ndim != 2:
            raise ValueError(f"{node.where()}: expected a 2-d constant weight, got shape {b.shape}")
        self._dense(node, b.T, np.zeros(b.shape[1]))

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

    def _op_Flatten(self, node: OnnxNode) -> None:
        self._to_flat()

    def _op_Reshape(self, node: OnnxNode) -> None:
        target = [int(s) for s in self._const(node, 1).ravel()]
        if not node.attr("allowzero", 0):
            target = [(1 if i == 0 else self.act.shape[i - 1]) if s == 0 else s for i, s in enumerate(target)]
        per_point = target[1:]
        d = math.prod(self.act.shape)
        if -1 in per_point:
            known = math.prod(s for s in per_point if s != -1)
            per_point = [d // known if s == -1 else s for s in per_point]
        if math.prod(per_point) != d:
            raise ValueError(f"{node.where()}: cannot reshape one point's {self.act.shape} to {tuple(per_point)}")
        if len(per_point) == 1:
            self._to_flat()
        elif len(per_point) == 3:
            if tuple(per_point) != self.act.shape or self.act.perm != _HWC:
                self._to_flat()
                self._to_image(node, tuple(per_point))
        else:
            raise ValueError(f"{node.where()}: a reshape to {tuple(per_point)} per point is neither a vector "
                             f"nor an image")

    def _op_Transpose(self, node: OnnxNode) -> None:
        perm = node.attr("perm")
        if not self.act.image:
            if perm is not None and tuple(perm) != (0, 1):
                raise ValueError(f"{node.where()}: perm {perm} moves the batch")
            return
        q = tuple(p - 1 for p in perm[1:])
        inv = tuple(int(i) for i in np.argsort(q))
        self.act = dataclasses.replace(self.act, shape=tuple(self.act.shape[i] for i in q),
                                       perm=tuple(inv[p] for p in self.act.perm))

    def _op_Conv(self, node: OnnxNode) -> None:
        w = self._const(node, 1)
        b = self._const(node, 2)
        kernel = tuple(int(k) for k in w.shape[2:])
        strides = node.attr("strides", (1, 1))
        dilations = node.attr("dilations", (1, 1))
        s = self._same(node, kernel, strides, dilations, lambda hw: window_pads(node, hw, kernel, strides, dilations))
        f = int(w.shape[0])
        self.layers.append(Conv(_f32(w.transpose(2, 3, 1, 0)), _f32(np.zeros(f) if b is None else b), s))
        _, h, wd = self.act.shape
        self.act = _Act(self.act.name, (f, -(-h // s), -(-wd // s)), _HWC)

    def _op_AveragePool(self, node: OnnxNode) -> None:
        kernel = tuple(int(k) for k in node.attr("kernel_shape"))
        strides = node.attr("strides", (1,) * len(kernel))
        dilations = node.attr("dilations", (1,) * len(kernel))
        if len(kernel) != 2:
            raise ValueError(f"{node.where()}: expected a 2-d pool, got kernel_shape {kernel}")
        pads = window_pads(node, self.act.shape[1:], kernel, strides, dilations)
        if any(p for pair in pads for p in pair) and not node.attr("count_include_pad", 0):
            raise ValueError(f"{node.where()}: with padding and count_include_pad=0 the divisor varies at the "
                             f"border: not a convolution")
        s = self._same(node, kernel, strides, dilations, lambda hw: pads)
        c, h, wd = self.act.shape
        k = np.zeros(kernel + (c, c))
        k[:, :, np.arange(c), np.arange(c)] = 1.0 / math.prod(kernel)
        self.layers.append(Conv(_f32(k), _f32(np.zeros(c)), s))
        self.act = _Act(self.act.name, (c, -(-h // s), -(-wd // s)), _HWC)

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
        if self.act.image:
            self._to_flat()
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
      a :class:`Network` with ``input_shape`` the toolkit's (``(H, W, C)`` for an NCHW image model, the
      file's ``(D,)`` for a vector model) computing the file's logits: ``net.logits(x)`` equals
      ``load_onnx(path).logits_fn(x)`` up to float rounding.

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


__all__ = ["MAX_DIAGONAL", "from_onnx"]
