"""Sound bounds on a ReLU network over an l_p ball: IBP, CROWN-IBP, CROWN, alpha-CROWN.

Everything here is written for one point ``x`` and one radius ``eps`` and is
``vmap``ped by the callers. The input set is
``S = {x' : ||x' - x||_p <= eps} ∩ [lo, hi]^d`` (no box when ``domain`` is
None). With ``h_k = B_k(a_{k-1})``, ``a_k = relu(h_k)``, ``a_0 = x'`` (see
``network``), a *spec* ``C (R, K)`` asks for lower bounds of ``C z`` over
``S``, where ``z`` are the logits.

* IBP (Gowal et al. 2018): intervals pushed through each layer,
  ``c' = W c + b``, ``r' = |W| r``; the first block is bounded exactly (its
  rows' dual norms), the spec is applied to the last block's weights before
  the last interval step.
* CROWN (Zhang et al. 2018, "Efficient neural network robustness
  certification with general activation functions", Theorem 3.2 / eq. 6-7):
  a lower bound of ``Lam . h_k`` is pulled back through the network. At a ReLU
  with pre-activation bounds ``l < 0 < u`` the relaxations are
  ``alpha h <= relu(h) <= u (h - l) / (u - l)``; positive coefficients take
  the lower line, negative ones the upper; ``alpha = [u > -l]`` (the adaptive
  choice of the paper). Through an affine block, ``Lam . B(a) = (B_lin^T
  Lam) . a + Lam . B(0)``, with ``B_lin^T`` from ``jax.linear_transpose``
  (convolutions included). At the input, ``min_{x' in S} Lam . x'`` is bounded
  by the box ``[max(x - eps, lo), min(x + eps, hi)]`` (exact for l_inf) and,
  for l_2 and l_1, also by the dual norm, ``Lam . x - eps ||Lam||_q``; the
  larger of the two is kept. Every hidden layer's bounds come from such a
  back-substitution (starting from the block's dense matrix, for all units
  and their negatives at once) and are intersected with IBP's.
* CROWN-IBP (Zhang et al. 2020): IBP for the hidden layers, CROWN for the spec.
* Certified training (``rcurves.models.training``, 'ibp' and 'crown-ibp')
  calls these same functions through :func:`training_margins`: every bound
  here is traceable and differentiable in the network's arrays (build the
  network with ``layers.from_model`` from traced parameters).
* alpha-CROWN (Xu et al. 2021): the lower slopes ``alpha in [0, 1]`` (one per
  hidden unit and per row of each back-substitution: every hidden layer's
  bounds and every spec row have their own) are optimised with Adam (optax)
  to raise the violated spec bounds; every iterate's bounds are sound, so the
  elementwise best over the iterates is kept. On the zoo's MLPs it raises
  CROWN's radii by only ~0.3% (20 steps; CROWN's adaptive slopes are close to
  optimal there) at ~40x the cost.

Besides the bound, each CROWN-type spec bound returns its *affine form in
eps*: with the relaxations fixed at ``eps``, ``Lam . x' + b >= c - e ||Lam||_q``
holds on the ball of any radius ``e <= eps`` (the hidden layers' bounds at
``eps`` hold on the smaller ball too), so ``min_j c_j / ||Lam_j||_q`` (capped
at ``eps``) is a certified radius of its own. For a network without hidden
layers it is exactly Lemma 1 of paper 000: ``(z_y - z_j) / ||W_y - W_j||_q``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import List, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import optax

from rcurves.nets import local as local_path
from attacks.precision import exact_precision
from rcurves.nets.layers import Network, block_apply, block_interval, block_jacobian, block_transpose

METHODS = ("ibp", "crown-ibp", "crown", "alpha-crown")
DUAL = {"linf": 1.0, "l2": 2.0, "l1": math.inf}


@dataclasses.dataclass(frozen=True)
class BoundConfig:
    """Static settings of a bound computation.

    Attributes:
      norm: 'linf', 'l2' or 'l1' (the ball's norm).
      method: one of :data:`METHODS`.
      domain: ``(lo, hi)`` input box or None (unbounded inputs).
      alpha_steps: Adam steps of alpha-CROWN.
      alpha_lr: Adam learning rate of alpha-CROWN.
    """

    norm: str = "linf"
    method: str = "crown"
    domain: Optional[Tuple[float, float]] = (0.0, 1.0)
    alpha_steps: int = 20
    alpha_lr: float = 0.1


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Point-independent arrays of a network, computed once per call.

    ``jacs[k]``: dense matrix of block ``k+1``'s linear part, ``(m, *in_shape)``,
    or None where it is not needed (block 1, bounded by intervals and row
    norms; block 2 when ``local`` handles it); ``consts[k]``: the block's
    output at 0 (its bias), ``(m,)``; ``first_norms``: the dual norms of block
    1's rows ``(m_1,)`` (None for l_inf); ``local``: whether the second
    layer's bounds are computed on receptive fields (``certify.local``).
    """

    net: Network
    jacs: Tuple[Optional[jax.Array], ...]
    consts: Tuple[jax.Array, ...]
    first_norms: Optional[jax.Array]
    local: bool = dataclasses.field(metadata=dict(static=True))


jax.tree_util.register_dataclass(Prepared)


def _dual_norm_rows(lf: jax.Array, norm: str) -> jax.Array:
    q = DUAL[norm]
    if q == 1.0:
        return jnp.sum(jnp.abs(lf), axis=1)
    if q == 2.0:
        sq = jnp.sum(lf * lf, axis=1)
        return jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)  # finite gradient at 0
    return jnp.max(jnp.abs(lf), axis=1)


@exact_precision
def prepare(net: Network, cfg: BoundConfig, local: Optional[bool] = None) -> Prepared:
    """Dense matrices, biases and first-layer row norms (traceable).

    ``local``: None uses the receptive-field path for the second layer when it
    applies (``certify.local.applies``); False forces the dense path.
    """
    shapes, blocks = net.shapes, net.blocks
    n_blocks = len(blocks)
    use_local = local_path.applies(net) if local is None else (bool(local) and local_path.applies(net))
    crown = cfg.method in ("crown", "alpha-crown")
    jacs, consts = [], []
    for k, block in enumerate(blocks):
        needed = k == n_blocks - 1 or (k > 0 and crown and not (k == 1 and use_local))
        jacs.append(block_jacobian(block, shapes[k], shapes[k + 1]) if needed else None)
        out = jnp.zeros(shapes[k], jnp.float32)
        for layer in block:
            out = layer.apply(out)
        consts.append(out.reshape(-1))
    first = None
    if cfg.norm != "linf" and n_blocks > 1:
        first = _dual_norm_rows(_rows(block_jacobian(blocks[0], shapes[0], shapes[1])), cfg.norm)
    return Prepared(net, tuple(jacs), tuple(consts), first, use_local)


class Relax(NamedTuple):
    """Linear bounds ``sl h <= relu(h) <= su h + tu`` of one hidden layer (shape of ``h``)."""

    sl: jax.Array
    su: jax.Array
    tu: jax.Array


@exact_precision
def relax(l: jax.Array, u: jax.Array, alpha: Optional[jax.Array] = None) -> Relax:
    """CROWN's ReLU relaxation on ``[l, u]``; ``alpha`` the lower slopes of unstable units."""
    active, inactive = l >= 0, u <= 0
    unstable = ~(active | inactive)
    width = jnp.where(unstable, u - l, 1.0)
    su = jnp.where(active, 1.0, jnp.where(unstable, u / width, 0.0))
    tu = jnp.where(unstable, -su * l, 0.0)
    if alpha is None:
        alpha = (u > -l).astype(jnp.float32)
    sl = jnp.where(active, 1.0, jnp.where(unstable, alpha, 0.0))
    return Relax(sl, su, tu)


def _rows(a: jax.Array) -> jax.Array:
    return a.reshape(a.shape[0], -1)


@exact_precision
def concretize(lam: jax.Array, bias: jax.Array, x: jax.Array, eps, cfg: BoundConfig):
    """Lower bounds of ``lam . x' + bias`` over the input set of ``(x, eps)``.

    Args:
      lam: ``(R, *input_shape)``; bias: ``(R,)``; x: ``(*input_shape)``; eps: ``()``.

    Returns:
      ``(lb, c, nq)``, each ``(R,)``: the bound, and its affine form in the
      radius ``c - eps * nq`` (``c = lam . x + bias``, ``nq = ||lam||_q``),
      which is a bound on any smaller ball too.
    """
    lf, xf = _rows(lam), x.reshape(-1)
    lo, hi = _box(xf, eps, cfg)
    box = jnp.sum(jnp.maximum(lf, 0.0) * lo + jnp.minimum(lf, 0.0) * hi, axis=1) + bias
    c = lf @ xf + bias
    nq = _dual_norm_rows(lf, cfg.norm)
    lb = box if cfg.norm == "linf" else jnp.maximum(box, c - eps * nq)
    return lb, c, nq


@exact_precision
def backsub(prep: Prepared, relaxes: Sequence[Relax], lam: jax.Array, bias: jax.Array, k: int):
    """Pull ``lam . a_k + bias`` (``lam (R, *shape of a_k)``) back to the input.

    ``k`` is the index of the hidden layer ``lam`` is over (0: already the
    input); ``relaxes[j - 1]`` is layer ``j``'s relaxation. Returns ``(lam over
    x, bias)`` such that ``lam . a_k + bias >= lam' . x' + bias'`` on the set.
    """
    net = prep.net
    shapes, blocks = net.shapes, net.blocks
    for j in range(k, 0, -1):
        r = relaxes[j - 1]
        pos, neg = jnp.maximum(lam, 0.0), jnp.minimum(lam, 0.0)
        bias = bias + jnp.sum(_rows(neg * r.tu), axis=1)
        lam = pos * r.sl + neg * r.su
        bias = bias + _rows(lam) @ prep.consts[j - 1]
        lam = jax.vmap(block_transpose(blocks[j - 1], shapes[j - 1]))(lam)
    return lam, bias


def _both(jac: jax.Array, const: jax.Array):
    return jnp.concatenate([jac, -jac]), jnp.concatenate([const, -const])


@exact_precision
def hidden_bounds(prep: Prepared, x: jax.Array, eps, cfg: BoundConfig, alphas=None):
    """Bounds ``(l_k, u_k)`` of every hidden pre-activation and their relaxations.

    ``alphas``: None (CROWN's adaptive slopes), or alpha-CROWN's slopes per
    start node: ``alphas[k - 2][j - 1]`` of shape ``(2 m_k, *h_j)`` are the
    lower slopes of layer ``j`` when bounding layer ``k`` (one per row of the
    back-substitution; None where ``certify.local`` bounds layer 2).

    Returns ``(bounds, relaxes)``: lists over hidden layers ``k = 1..L-1`` of
    ``(l, u)`` (each of the shape of ``h_k``) and CROWN's :class:`Relax`.
    """
    net = prep.net
    shapes, blocks = net.shapes, net.blocks
    crown = cfg.method in ("crown", "alpha-crown")
    bounds: List[Tuple[jax.Array, jax.Array]] = []
    relaxes: List[Relax] = []
    lo, hi = _box(x, eps, cfg)
    for k in range(1, len(blocks)):
        jac, const = prep.jacs[k - 1], prep.consts[k - 1]
        if k == 1:
            # One affine block: intervals are exact for l_inf (and the box);
            # for l_2 / l_1 the rows' dual norms bound the ball as well.
            l, u = block_interval(blocks[0], lo, hi)
            if prep.first_norms is not None:
                mid = block_apply(blocks[0], x).reshape(-1)
                rad = eps * prep.first_norms
                l = jnp.maximum(l.reshape(-1), mid - rad)
                u = jnp.minimum(u.reshape(-1), mid + rad)
        else:
            pl, pu = bounds[-1]
            l, u = block_interval(blocks[k - 1], jnp.maximum(pl, 0.0), jnp.maximum(pu, 0.0))
            l, u = l.reshape(-1), u.reshape(-1)
            if crown:
                if k == 2 and prep.local:
                    img = _image(blocks[0], x)
                    lb = local_path.second_layer_lower(
                        net, relaxes[0], _image(blocks[0], lo), _image(blocks[0], hi), img, eps, cfg.norm)
                    lb = lb.reshape(2, -1)
                    cl, cu = lb[0], -lb[1]
                else:
                    m = jac.shape[0]
                    lam, b = _both(jac, const)
                    rel = relaxes
                    if alphas is not None and alphas[k - 2] is not None:
                        rel = [relax(pl_, pu_, a) for (pl_, pu_), a in zip(bounds, alphas[k - 2])]
                    lam, b = backsub(prep, rel, lam, b, k - 1)
                    lb = concretize(lam, b, x, eps, cfg)[0]
                    cl, cu = lb[:m], -lb[m:]
                l, u = jnp.maximum(l, cl), jnp.minimum(u, cu)
        l, u = l.reshape(shapes[k]), u.reshape(shapes[k])
        bounds.append((l, u))
        relaxes.append(relax(l, u))
    return bounds, relaxes


def _box(x, eps, cfg: BoundConfig):
    """The box ``[x - eps, x + eps]`` (clipped to the domain) containing the ball."""
    lo, hi = x - eps, x + eps
    if cfg.domain is not None:
        lo, hi = jnp.clip(lo, *cfg.domain), jnp.clip(hi, *cfg.domain)
    return lo, hi


def _image(block, z):
    """``z`` through the reshapes that open ``block`` (conv1's input)."""
    for layer in block[:-1]:
        z = layer.apply(z)
    return z


class SpecBound(NamedTuple):
    """Lower bounds of ``C z`` over the set, each ``(R,)``.

    ``c - e * nq`` bounds ``C z`` on the ball of any radius ``e <= eps``
    (``nq = inf`` where no such affine form is known, as for IBP).
    """

    lb: jax.Array
    c: jax.Array
    nq: jax.Array


def _spec_start(prep: Prepared, C: jax.Array):
    jac, const = prep.jacs[-1], prep.consts[-1]
    lam = (C @ _rows(jac)).reshape((C.shape[0],) + prep.net.shapes[-2])
    return lam, C @ const


def _crown_spec(prep, x, eps, C, cfg, alphas=None) -> SpecBound:
    """CROWN's bound of ``C z``; ``alphas = (per hidden start node, for the spec)`` for alpha-CROWN."""
    bounds, relaxes = hidden_bounds(prep, x, eps, cfg, None if alphas is None else alphas[0])
    if alphas is not None:
        relaxes = [relax(l, u, a) for (l, u), a in zip(bounds, alphas[1])]
    lam, b = _spec_start(prep, C)
    lam, b = backsub(prep, relaxes, lam, b, len(relaxes))
    return SpecBound(*concretize(lam, b, x, eps, cfg))


@exact_precision
def spec_bound(prep: Prepared, x: jax.Array, eps, C: jax.Array, cfg: BoundConfig) -> SpecBound:
    """Lower bounds of ``C z`` (``C (R, K)``) over the input set of ``(x, eps)``."""
    return bounds_and_spec(prep, x, eps, C, cfg)[1]


@exact_precision
def bounds_and_spec(prep: Prepared, x: jax.Array, eps, C: jax.Array, cfg: BoundConfig):
    """``(hidden bounds, spec bound)``, both from one pass of ``cfg.method``
    (for alpha-CROWN the hidden bounds are CROWN's)."""
    n_hidden = len(prep.net.blocks) - 1
    if cfg.method == "alpha-crown" and n_hidden:
        bounds, _ = hidden_bounds(prep, x, eps, dataclasses.replace(cfg, method="crown"))
        return bounds, _alpha_spec(prep, x, eps, C, cfg, bounds)
    bounds, relaxes = hidden_bounds(prep, x, eps, cfg)
    lam, b = _spec_start(prep, C)
    if cfg.method == "ibp" and n_hidden:
        lb = _ibp_spec(bounds, lam, b)
        return bounds, SpecBound(lb, lb, jnp.full_like(lb, jnp.inf))
    lam, b = backsub(prep, relaxes, lam, b, len(relaxes))
    return bounds, SpecBound(*concretize(lam, b, x, eps, cfg))


def _ibp_spec(bounds, lam: jax.Array, b: jax.Array) -> jax.Array:
    """IBP's last step with the spec merged into the last block (Gowal et al. 2018's
    elision of the last layer): ``lam (R, *shape of a_{L-1})`` times the interval
    ``[relu(l), relu(u)]`` of the last hidden layer, plus ``b (R,)``; ``(R,)``."""
    l, u = bounds[-1]
    la, ua = jnp.maximum(l, 0.0).reshape(-1), jnp.maximum(u, 0.0).reshape(-1)
    lf = _rows(lam)
    return jnp.sum(jnp.maximum(lf, 0.0) * la + jnp.minimum(lf, 0.0) * ua, axis=1) + b


def training_margins(net: Network, x: jax.Array, y: jax.Array, eps, beta, *, norm: str,
                     domain: Optional[Tuple[float, float]], crown: bool) -> jax.Array:
    """Lower bounds ``(n, K)`` of the margins ``z_y - z_j`` over each point's ball,
    for certified training (``rcurves.models.training``, methods 'ibp' and 'crown-ibp').

    Args:
      net: the network; its arrays may be traced (``from_model`` of traced
        parameters): the result is differentiable in them.
      x: ``(n, *net.input_shape)`` centres; y: ``(n,)`` int labels.
      eps: ``()`` radius in ``norm`` units (traced; 0 gives the clean margins).
      beta: ``()`` weight of CROWN-IBP (traced; ignored when ``crown`` is False).
      norm: 'linf', 'l2' or 'l1'; domain: the input box or None.
      crown: False: IBP's bound ``m_IBP`` (Gowal et al. 2018: intervals through
        the hidden layers, eq. 6, the margin spec merged into the last
        layer). True: ``beta * m_CROWN-IBP + (1 - beta) * m_IBP`` (Zhang et
        al. 2020), where ``m_CROWN-IBP`` back-substitutes the spec through
        CROWN's relaxations of IBP's hidden bounds (:func:`spec_bound` with
        method 'crown-ibp'). Both bounds share one IBP pass; a convex
        combination of two sound lower bounds is sound. When ``beta == 0``
        the back-substitution is skipped (``lax.cond`` on the batch).

    Column ``y`` is 0 (the zero row of :func:`margin_spec`). These are the
    functions :func:`bounds_and_spec` computes for 'ibp' and 'crown-ibp' (the
    verifiers' numbers), batched over points.
    """
    cfg = BoundConfig(norm=norm, method="crown-ibp", domain=domain)
    prep = prepare(net, cfg)
    k = net.n_classes

    def start(xi, yi):
        bounds, relaxes = hidden_bounds(prep, xi, eps, cfg)
        lam, b = _spec_start(prep, margin_spec(yi, k))
        return bounds, relaxes, lam, b

    def ibp_one(xi, yi):
        bounds, _, lam, b = start(xi, yi)
        if not bounds:                      # no hidden layer: the exact bound of an affine map
            return concretize(lam, b, xi, eps, cfg)[0]
        return _ibp_spec(bounds, lam, b)

    def mixed_one(xi, yi):
        bounds, relaxes, lam, b = start(xi, yi)
        lam_c, b_c = backsub(prep, relaxes, lam, b, len(relaxes))
        crown_lb = concretize(lam_c, b_c, xi, eps, cfg)[0]
        if not bounds:
            return crown_lb
        return beta * crown_lb + (1.0 - beta) * _ibp_spec(bounds, lam, b)

    ibp = jax.vmap(ibp_one)
    if not crown:
        return ibp(x, y)
    return jax.lax.cond(beta > 0, jax.vmap(mixed_one), ibp, x, y)


def _alpha_spec(prep, x, eps, C, cfg, bounds) -> SpecBound:
    """alpha-CROWN (Xu et al. 2021): the lower slopes of every unstable ReLU, one
    per row of each back-substitution (each hidden layer's bounds and each spec
    row have their own), optimised by Adam to raise the violated spec bounds,
    projected to [0, 1]; they start at CROWN's adaptive choice, so the first
    iterate is CROWN, and the best bound of each row over the iterates is kept
    (every iterate's is sound)."""
    base = [(u > -l).astype(jnp.float32) for l, u in bounds]  # CROWN's slopes at CROWN's bounds
    shapes = prep.net.shapes
    per_node = []
    for k in range(2, len(bounds) + 1):
        if k == 2 and prep.local:
            per_node.append(None)
        else:
            rows = 2 * math.prod(shapes[k])
            per_node.append([jnp.broadcast_to(a, (rows,) + a.shape) for a in base[:k - 1]])
    spec = [jnp.broadcast_to(a, (C.shape[0],) + a.shape) for a in base]
    alphas = (per_node, spec)
    opt = optax.adam(cfg.alpha_lr)

    def loss(a):
        sb = _crown_spec(prep, x, eps, C, cfg, a)
        return -jnp.sum(jnp.minimum(sb.lb, 0.0)), sb

    def step(carry, _):
        a, st, best = carry
        (_, sb), g = jax.value_and_grad(loss, has_aux=True)(a)
        upd, st = opt.update(g, st, a)
        a = jax.tree_util.tree_map(lambda ai, ui: jnp.clip(ai + ui, 0.0, 1.0), a, upd)
        return (a, st, _best(best, sb)), None

    k = C.shape[0]
    none = SpecBound(jnp.full((k,), -jnp.inf), jnp.full((k,), -jnp.inf), jnp.ones((k,)))
    (a, _, best), _ = jax.lax.scan(step, (alphas, opt.init(alphas), none), None, length=cfg.alpha_steps)
    return _best(best, _crown_spec(prep, x, eps, C, cfg, a))


def _best(a: SpecBound, b: SpecBound) -> SpecBound:
    # Each row's bound and each row's affine form are sound separately; the
    # radius of an affine form is c / nq, so keep the larger ratio.
    ra = jnp.where(a.nq > 0, a.c / jnp.where(a.nq > 0, a.nq, 1.0), jnp.where(a.c > 0, jnp.inf, -jnp.inf))
    rb = jnp.where(b.nq > 0, b.c / jnp.where(b.nq > 0, b.nq, 1.0), jnp.where(b.c > 0, jnp.inf, -jnp.inf))
    take_b = rb > ra
    return SpecBound(jnp.maximum(a.lb, b.lb), jnp.where(take_b, b.c, a.c), jnp.where(take_b, b.nq, a.nq))


def margin_spec(y: jax.Array, k: int) -> jax.Array:
    """``C (K, K)`` with row ``j`` = ``e_y - e_j`` (row ``y`` is zero)."""
    return jax.nn.one_hot(y, k, dtype=jnp.float32)[None, :] - jnp.eye(k, dtype=jnp.float32)


@exact_precision
def affine_radius(sb: SpecBound, mask: jax.Array, eps) -> jax.Array:
    """Largest ``e <= eps`` with ``c_j - e nq_j > 0`` for every row in ``mask`` (0 if none)."""
    pos = sb.c > 0
    r = jnp.where(pos, jnp.where(sb.nq > 0, sb.c / jnp.where(sb.nq > 0, sb.nq, 1.0), jnp.inf), 0.0)
    r = jnp.where(jnp.isnan(r), 0.0, r)
    r = jnp.min(jnp.where(mask, r, jnp.inf))
    return jnp.clip(r, 0.0, eps)


@exact_precision
def certify_point(prep: Prepared, x: jax.Array, y: jax.Array, eps, cfg: BoundConfig):
    """Is the ball of radius ``eps`` around ``x`` certified for class ``y``?

    Returns ``(ok, r, m)``: ``ok`` when every margin ``z_y - z_j`` has a
    positive lower bound on the set; ``r <= eps`` a radius certified by the
    bound's affine form (see the module docstring); ``m`` the smallest margin
    lower bound (``ok`` is ``m > 0``).
    """
    k = prep.net.n_classes
    sb = spec_bound(prep, x, eps, margin_spec(y, k), cfg)
    other = jnp.arange(k) != y
    m = jnp.min(jnp.where(other, sb.lb, jnp.inf))
    return m > 0, affine_radius(sb, other, eps), m


__all__ = [
    "BoundConfig", "DUAL", "METHODS", "Prepared", "Relax", "SpecBound", "affine_radius",
    "backsub", "bounds_and_spec", "certify_point", "concretize", "hidden_bounds", "margin_spec", "prepare",
    "relax", "spec_bound", "training_margins",
]
