"""The Maximum Margin Regulariser (MMR) and its universal l_1 + l_inf version (MMR-Universal).

Sources: Croce, Andriushchenko & Hein, "Provable robustness of ReLU networks via
maximization of linear regions" (AISTATS 2019; MMR and MMR + AT, methods 4 of
paper 000, Section 3.1), and Croce & Hein, "Provable robustness against all
adversarial l_p-perturbations for p >= 1" (ICLR 2020; MMR-Universal, method 5).
Neither paper's text is among the project's papers; the definitions below
follow their descriptions and were checked line by line against the authors'
released code (``regularizers.py`` / ``train.py`` of
max-andr/provable-robustness-max-linear-regions and fra31/mmr-universal,
read, not copied). Where we differ from that code it is said.

Geometry (one point ``x``; ``p`` the threat norm, ``1/p + 1/q = 1``)
--------------------------------------------------------------------
A ReLU network is affine on the linear region ``Q(x)`` of ``x`` (the inputs
with the activation pattern of ``x``). With the pattern fixed, every hidden
pre-activation is an affine function ``h_j(x') = <v_j, x'> + a_j`` and so are
the logits ``z_c(x') = <w_c, x'> + b_c``; ``v_j`` and ``w_c`` are the input
gradients at ``x`` (constant on ``Q(x)``). ``Q(x)`` is a polytope whose facets
lie on the hyperplanes ``h_j = 0``; by Lemma 1 of paper 000 (App. B) the l_p
distance of ``x`` to the hyperplane of unit ``j`` is

    d_B,j(x) = |h_j(x)| / ||v_j||_q                                     (facets)

and the distance to the decision hyperplane between the label ``y`` and a
class ``c != y`` *of the region's affine map* is

    d_D,c(x) = (z_y(x) - z_c(x)) / ||w_y - w_c||_q                      (decisions)

-- Lemma 1 again for a correctly classified point; signed, as in the authors'
code, so a misclassified point has ``d_D,c < 0`` for some ``c`` and its hinge
below exceeds 1 (the papers' robustness guarantee takes ``|.|`` and the
predicted class; the two agree wherever ``y`` is predicted). Every unit of every hidden layer
contributes a facet hyperplane (a superset of the actual facets, as in the
paper: the distance to the polytope's boundary is at least the smallest
``d_B,j``).

The regulariser
---------------
For one norm, with ``pi`` sorting each family in increasing distance::

    MMR_p(x) = 1/k_B sum_{i <= k_B} max(0, 1 - d_B,pi(i)(x) / gamma_B)
             + 1/k_D sum_{i <= k_D} max(0, 1 - d_D,pi(i)(x) / gamma_D)

(:func:`mmr_term`), and the training loss of method ``'mmr'`` is
``CE(f(x), y) + lambda * MMR_p(x)``. A linear model has no hidden units: only
the decision sum. MMR-Universal (method ``'mmr-univ'``) adds the l_1 and the
l_inf regulariser, each with its own ``gamma`` (``gamma_B = gamma_D`` per norm, as
in Croce & Hein 2020) and weight::

    MMR-Universal(x) = lambda_1 MMR_1(x; gamma_1) + lambda_inf MMR_inf(x; gamma_inf),

the loss ``CE(f(x), y) + MMR-Universal(x)``; the l_1 distances use ``q = inf``
(``||v||_inf``), the l_inf ones ``q = 1``. Both norms' rows come from the same
Jacobian.

Differences from the authors' code (none changes what is regularised):
the decision sum is divided by ``k_D`` (the formula) where their code divides
by ``K`` (with ``k_D = K - 1``, its weight is ``(K - 1) / K`` of ours); the
distances are exact (their code adds ``1e-5`` to every Jacobian entry smaller
than ``1e-5`` before the norm, which for ``q = 1`` on MNIST can add up to
``0.008`` to a denominator; we only guard a zero norm); ties in the ``k``
smallest are broken by order, not by random jitter; MMR-Universal's facet
sums take each norm's own ``k_B`` smallest (the formula; their code sums both
norms' hinges over the union of the two selections) and its decision sums
the ``k_D`` smallest (default all ``K - 1``, as their code).

How the Jacobian rows are computed
----------------------------------
With the activation pattern fixed (masks from the forward pass, no gradient
through them) the network is a composition of affine blocks and 0/1 masks;
the rows ``v_j`` are obtained from its *linear* parts, taken from the
verifiers' explicit network (:func:`rcurves.models.network.to_network`, which
accepts traced parameters, so everything is differentiable in them: the
regulariser's gradient flows through both ``h_j(x)`` and ``v_j``, as in the
authors' TensorFlow graph).

* All units (``units=None``; the MLP, the linear model, small CNNs): forward
  mode. The ``d`` input basis vectors are pushed through the masked blocks:
  ``V_1 = J(B_1)`` (independent of ``x``, computed once per batch) and
  ``V_l = J(B_l) diag(m_{l-1}) V_{l-1}``; for an MLP these are exactly the
  products of masked weight matrices ``W_l diag(m_{l-1}) ... W_1``, and the
  logits' rows come out of the same recursion. Exact, one pass per input
  coordinate for all units at once.
* A random subset of ``units = m`` hidden units (the C.1 CNN on MNIST):
  reverse mode. For each sampled unit its one-hot cotangent is pulled back
  through the transposed blocks and masks down to the input
  (``e_j^T J(B_l) diag(m_{l-1}) ... J(B_1)``), stopping at the unit's own layer,
  plus ``K`` pull-backs for the logits. Reverse mode costs one pass per *row*,
  forward mode one per *input coordinate*: for the CNN (784 inputs, 4,804
  hidden units) all rows by forward mode would need 784 tangents through the
  convolutions (about 2 GB per batch of 128, too much for the 2-core CPU),
  while ``m + K`` pull-backs of ``m`` = 32 to 128 sampled units cost a small
  multiple of a training step's backward pass. The rows of the sampled units
  are exact; what is approximated is the set over which the ``k_B`` smallest
  are taken.

  Sampling: per point and per step (key ``fold_in(key, step)``, deterministic),
  stratified over hidden layers with proportional allocation (largest
  remainder, at least one unit per layer), uniformly without replacement
  inside a layer, so every unit is drawn with probability ``~ m / U``. The
  ``k_B`` of the schedule is then a fraction of ``m`` (the same quantile of the
  distances as ``k_B / U`` of all units).

  Cost, measured on the project's two shared CPU cores, one training step of
  a batch of 128 MNIST images for the C.1 CNN: ST 0.02 s; MMR with 64 sampled
  units 1.0-1.2 s (the ``K`` logit rows alone about 0.1 s); MMR + AT with 32
  units (PGD with 10 steps on half the batch) 0.7 s, i.e. about 5.5 minutes
  per epoch of 60,000 images.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from attacks import checks
from rcurves.models.architectures import ModelConfig
from attacks.precision import exact_precision

#: architectures whose linear regions the regulariser reads (plain ReLU networks, as the verifiers)
MMR_ARCHS = ("linear", "mlp", "cnn")
#: dual exponent ``q`` of each threat norm: the distance to a hyperplane ``<v, x> + a = 0`` is ``|.| / ||v||_q``
DUAL = {"linf": 1.0, "l2": 2.0, "l1": math.inf}
_TINY = 1e-12          # smallest norm of a Jacobian row (a row that is exactly 0: the unit is constant on Q(x))


class RegionDistances(NamedTuple):
    """Distances of a batch of points to the hyperplanes of their linear regions.

    ``facet (P, n, U')``: to each hidden unit's hyperplane ``h_j = 0``
    (``U' = U`` all units in layer order, flattened row-major per layer, or the
    ``m`` sampled ones); ``decision (P, n, K)``: to ``z_y = z_c`` (signed:
    negative when ``z_c > z_y``), ``+inf`` at ``c = y``; ``units (n, U')``: the
    flat index (over all hidden layers concatenated) of each facet column;
    ``P`` indexes the norms asked for, in order.
    """

    facet: jax.Array
    decision: jax.Array
    units: jax.Array


# ---------------------------------------------------------------------------
# sizes


def hidden_layer_sizes(model_cfg: ModelConfig) -> Tuple[int, ...]:
    """Number of ReLUs of each hidden layer of a linear, MLP or C.1 CNN model (``()`` for linear)."""
    if model_cfg.arch == "linear":
        return ()
    if model_cfg.arch == "mlp":
        return tuple(int(h) for h in model_cfg.hidden)
    if model_cfg.arch == "cnn":
        h, w, _ = model_cfg.image_shape
        h1, w1 = -(-h // 2), -(-w // 2)
        h2, w2 = -(-h1 // 2), -(-w1 // 2)
        return (h1 * w1 * 16, h2 * w2 * 32, 100)
    raise ValueError(f"model_cfg: arch {model_cfg.arch!r} is not one of {MMR_ARCHS}")


def unit_allocation(sizes: Sequence[int], m: int) -> Tuple[int, ...]:
    """Sampled units per hidden layer: ``m`` split in proportion to ``sizes`` (largest
    remainder), at least one per layer, at most the layer's size; sums to ``m``.

    ``m`` must be between ``len(sizes)`` and ``sum(sizes)``.
    """
    sizes = [int(s) for s in sizes]
    total = sum(sizes)
    if not sizes or not len(sizes) <= m <= total:
        raise ValueError(f"units: expected between {len(sizes)} and {total} units, got {m}")
    alloc = [1] * len(sizes)
    rest = m - len(sizes)
    quota = [rest * (s - 1) / max(total - len(sizes), 1) for s in sizes]
    add = [min(int(math.floor(q)), s - 1) for q, s in zip(quota, sizes)]
    alloc = [a + b for a, b in zip(alloc, add)]
    left = m - sum(alloc)
    order = sorted(range(len(sizes)), key=lambda i: (-(quota[i] - math.floor(quota[i])), i))
    while left > 0:
        for i in order:
            if left and alloc[i] < sizes[i]:
                alloc[i] += 1
                left -= 1
    return tuple(alloc)


# ---------------------------------------------------------------------------
# norms and the regulariser


def dual_norm(v: jax.Array, q: float, axis: int = -1) -> jax.Array:
    """``||v||_q`` along ``axis``, at least ``1e-12`` and with finite gradients at ``v = 0``."""
    if q == 1.0:
        n = jnp.sum(jnp.abs(v), axis=axis)
    elif q == 2.0:
        n = jnp.sqrt(jnp.maximum(jnp.sum(v * v, axis=axis), _TINY * _TINY))
    elif q == math.inf:
        n = jnp.max(jnp.abs(v), axis=axis)
    else:
        raise ValueError(f"q: expected 1, 2 or inf, got {q!r}")
    return jnp.maximum(n, _TINY)


def hinge_mean_of_smallest(d: jax.Array, gamma, k) -> jax.Array:
    """``1/k sum_{i <= k} max(0, 1 - d_(i) / gamma)`` over the ``k`` smallest entries
    ``d_(1) <= d_(2) <= ...`` of the last axis; ``k`` may be traced (an int scalar, >= 1).
    0 for an empty last axis."""
    if d.shape[-1] == 0:
        return jnp.zeros(d.shape[:-1], jnp.float32)
    s = jnp.sort(d, axis=-1)
    keep = jnp.arange(d.shape[-1]) < k
    h = jnp.where(keep, jax.nn.relu(1.0 - s / gamma), 0.0)
    return jnp.sum(h, axis=-1) / jnp.asarray(k, jnp.float32)


def mmr_term(facet: jax.Array, decision: jax.Array, *, gamma_b, gamma_d, k_b, k_d) -> jax.Array:
    """``MMR(x)`` per point from its distances: ``facet (..., U)`` to the region's
    hyperplanes and ``decision (..., K)`` to the decision hyperplanes (``+inf`` at the
    label), ``k_b`` / ``k_d`` the numbers of smallest distances averaged::

        1/k_b sum_{i <= k_b} max(0, 1 - d_B,(i) / gamma_b) + 1/k_d sum_{i <= k_d} max(0, 1 - d_D,(i) / gamma_d)

    The facet sum is 0 when ``U = 0`` (a linear model)."""
    return (hinge_mean_of_smallest(facet, gamma_b, k_b)
            + hinge_mean_of_smallest(decision, gamma_d, k_d))


# ---------------------------------------------------------------------------
# the region geometry of one point


def _geometry(net, x, y, sample, qs):
    """Per point: (facet distances (P, U'), decision distances (P, K)) for dual exponents ``qs``.

    ``sample``: None (all units, forward mode) or a tuple of per-layer flat unit
    indices (reverse mode)."""
    from rcurves.nets.layers import block_apply, block_linear, block_transpose

    blocks = net.blocks
    shapes = net.shapes
    n_hidden = len(blocks) - 1
    d = math.prod(net.input_shape)
    hs, masks = [], []
    a = x.reshape(net.input_shape)
    for k in range(n_hidden):
        h = block_apply(blocks[k], a)
        hs.append(h)
        masks.append(jax.lax.stop_gradient((h > 0).astype(h.dtype)))
        a = jax.nn.relu(h)
    z = block_apply(blocks[-1], a)

    if sample is None:                        # forward mode: all units' rows at once
        eye = jnp.eye(d, dtype=jnp.float32).reshape((d,) + tuple(net.input_shape))
        t = jax.vmap(lambda e: block_linear(blocks[0], e))(eye)      # (d, *shape_1), the same for every x
        rows = []
        for k in range(1, len(blocks)):
            rows.append(t.reshape(d, -1))
            m = masks[k - 1]
            t = jax.vmap(lambda e, blk=blocks[k], m=m: block_linear(blk, e * m))(t)
        logit_rows = t.reshape(d, -1).T                              # (K, d)
        unit_rows = [r.T for r in rows]                              # (n_l, d) each
        hvals = [h.reshape(-1) for h in hs]
    else:                                     # reverse mode: pull back each sampled unit's one-hot
        def pull(cot, top):
            v = cot
            for k in range(top, -1, -1):
                v = jax.vmap(block_transpose(blocks[k], shapes[k]))(v)
                if k > 0:
                    v = v * masks[k - 1]
            return v.reshape(v.shape[0], d)

        unit_rows, hvals = [], []
        for layer, idx in enumerate(sample):
            n_l = math.prod(shapes[layer + 1])
            cot = jax.nn.one_hot(idx, n_l, dtype=jnp.float32).reshape((idx.shape[0],) + tuple(shapes[layer + 1]))
            unit_rows.append(pull(cot, layer))
            hvals.append(hs[layer].reshape(-1)[idx])
        k_cls = math.prod(shapes[-1])
        logit_rows = pull(jnp.eye(k_cls, dtype=jnp.float32), len(blocks) - 1)

    rows = jnp.concatenate(unit_rows, axis=0) if unit_rows else jnp.zeros((0, d), jnp.float32)
    habs = jnp.abs(jnp.concatenate(hvals)) if hvals else jnp.zeros((0,), jnp.float32)
    diff = logit_rows[y] - logit_rows                                # (K, d): grad of z_y - z_c
    margin = z[y] - z
    is_y = jnp.arange(z.shape[0]) == y
    facet, decision = [], []
    for q in qs:
        facet.append(habs / dual_norm(rows, q, axis=-1))
        den = jnp.where(is_y, 1.0, dual_norm(diff, q, axis=-1))
        decision.append(jnp.where(is_y, jnp.inf, margin / den))
    return jnp.stack(facet), jnp.stack(decision)


def _sample_units(key, sizes: Sequence[int], alloc: Sequence[int]):
    # the indices of the ``a`` largest of ``s`` iid uniforms: a uniform ``a``-subset of the layer's units
    # (``jax.random.choice(replace=False)`` permutes all units and is ~25x slower on CPU)
    keys = jax.random.split(key, len(sizes))
    return tuple(jax.lax.top_k(jax.random.uniform(k, (s,)), a)[1] for k, s, a in zip(keys, sizes, alloc))


@exact_precision
def region_distances(model_cfg: ModelConfig, params: Any, x: jax.Array, y: jax.Array, *,
                     norms: Sequence[str] = ("linf",), units: Optional[int] = None,
                     key: Optional[jax.Array] = None) -> RegionDistances:
    """Distances of each point of a batch to its region's hyperplanes (facets) and to the
    decision hyperplanes of the region's affine map, in each of ``norms``.

    Args:
      model_cfg: a 'linear', 'mlp' or 'cnn' model.
      params: its parameters (may be traced: the result is differentiable in them).
      x: ``(n, *input_shape)``; y: ``(n,)`` labels.
      norms: threat norms ('linf', 'l2', 'l1'); each distance uses the dual norm.
      units: None for every hidden unit (exact, forward mode), or ``m``: a random
        stratified sample of ``m`` hidden units per point (reverse mode; needs ``key``).
      key: PRNG key of the sample (point ``i`` uses ``fold_in(key, i)``).

    Returns:
      :class:`RegionDistances`.
    """
    from rcurves.models.network import to_network

    if model_cfg.arch not in MMR_ARCHS:
        raise ValueError(f"model_cfg: arch {model_cfg.arch!r} is not one of {MMR_ARCHS} (the regulariser "
                         "reads the linear regions of a plain ReLU network)")
    norms = tuple(checks.check_norm(nm, "norms") for nm in norms)
    qs = tuple(DUAL[nm] for nm in norms)
    if getattr(x, "ndim", 0) < 2 or tuple(x.shape[1:]) != tuple(model_cfg.input_shape):
        raise ValueError(f"x: expected a batch of shape (n, {', '.join(map(str, model_cfg.input_shape))}), "
                         f"got {getattr(x, 'shape', type(x).__name__)}")
    if tuple(getattr(y, "shape", ())) != (x.shape[0],):
        raise ValueError(f"y: expected {x.shape[0]} labels, got shape {getattr(y, 'shape', None)}")
    if checks.is_concrete(y):
        checks.check_labels(y, x.shape[0], "y", model_cfg.n_classes)
    net = to_network(model_cfg, params)
    sizes = hidden_layer_sizes(model_cfg)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32) if sizes else np.zeros(1, np.int32)
    n = x.shape[0]
    if units is None:
        facet, decision = jax.vmap(lambda xi, yi: _geometry(net, xi, yi, None, qs), out_axes=(1, 1))(x, y)
        idx = jnp.broadcast_to(jnp.arange(sum(sizes), dtype=jnp.int32), (n, sum(sizes)))
        return RegionDistances(facet, decision, idx)
    if key is None:
        raise ValueError("key: sampling units needs a PRNG key")
    alloc = unit_allocation(sizes, int(units))
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(n))
    samples = jax.vmap(lambda k: _sample_units(k, sizes, alloc))(keys)
    facet, decision = jax.vmap(lambda xi, yi, s: _geometry(net, xi, yi, s, qs), out_axes=(1, 1))(x, y, samples)
    idx = jnp.concatenate([s.astype(jnp.int32) + int(o) for s, o in zip(samples, offsets)], axis=1)
    return RegionDistances(facet, decision, idx)


@exact_precision
def facet_distances(model_cfg: ModelConfig, params: Any, x: jax.Array, norm: str = "linf") -> jax.Array:
    """``(n, U)`` exact l_p distance of each point to every hidden unit's hyperplane of its
    linear region, ``|h_j(x)| / ||grad_x h_j(x)||_q`` (units in layer order)."""
    y = jnp.zeros((x.shape[0],), jnp.int32)
    return region_distances(model_cfg, params, x, y, norms=(norm,)).facet[0]


@exact_precision
def decision_distances(model_cfg: ModelConfig, params: Any, x: jax.Array, y: jax.Array,
                       norm: str = "linf") -> jax.Array:
    """``(n, K)``: ``(z_y - z_c) / ||grad_x (z_y - z_c)||_q`` on each point's region (Lemma 1 of
    paper 000 on the region's affine map; signed), ``+inf`` at ``c = y``."""
    return region_distances(model_cfg, params, x, y, norms=(norm,)).decision[0]


class MMRValue(NamedTuple):
    """The regulariser per point: ``total (n,)`` (``MMR_p`` for 'mmr', ``MMR-Universal`` with its
    weights for 'mmr-univ'), and for 'mmr-univ' the unweighted ``l1`` and ``linf`` parts (else None)."""

    total: jax.Array
    l1: Optional[jax.Array]
    linf: Optional[jax.Array]


def regularizer(model_cfg: ModelConfig, params: Any, x: jax.Array, y: jax.Array, *, method: str, norm: str,
                k_b, k_d: int, gamma_b: float = 0.2, gamma_d: float = 0.2, lambda_l1: float = 3.0,
                lambda_linf: float = 12.0, gamma_l1: float = 1.0, gamma_linf: float = 0.175,
                units: Optional[int] = None, key: Optional[jax.Array] = None) -> MMRValue:
    """``MMR_norm(x)`` (``method='mmr'``, without ``lambda``) or ``MMR-Universal(x)``
    (``'mmr-univ'``: ``lambda_l1 MMR_1(x; gamma_l1) + lambda_linf MMR_inf(x; gamma_linf)``) per point.

    ``k_b`` (may be traced) and ``k_d`` are the numbers of smallest facet and decision
    distances averaged; the other arguments as :func:`region_distances`.
    """
    if method == "mmr":
        r = region_distances(model_cfg, params, x, y, norms=(norm,), units=units, key=key)
        return MMRValue(mmr_term(r.facet[0], r.decision[0], gamma_b=gamma_b, gamma_d=gamma_d, k_b=k_b, k_d=k_d),
                        None, None)
    if method == "mmr-univ":
        r = region_distances(model_cfg, params, x, y, norms=("l1", "linf"), units=units, key=key)
        m1 = mmr_term(r.facet[0], r.decision[0], gamma_b=gamma_l1, gamma_d=gamma_l1, k_b=k_b, k_d=k_d)
        mi = mmr_term(r.facet[1], r.decision[1], gamma_b=gamma_linf, gamma_d=gamma_linf, k_b=k_b, k_d=k_d)
        return MMRValue(lambda_l1 * m1 + lambda_linf * mi, m1, mi)
    raise ValueError(f"method: expected 'mmr' or 'mmr-univ', got {method!r}")


__all__ = [
    "DUAL", "MMRValue", "MMR_ARCHS", "RegionDistances", "decision_distances", "dual_norm", "facet_distances",
    "hidden_layer_sizes", "hinge_mean_of_smallest", "mmr_term", "region_distances", "regularizer",
    "unit_allocation",
]
