"""Branch and bound (rcurves/certify/bab*.py): the frontier reused across radii, NaN, l_2.

Soundness is checked against brute force on 2-D inputs: every grid point the
network classifies differently from ``y`` is an adversarial example, so the
nearest one bounds the true minimal distance from above, and no certified
radius may exceed it. (The MILP comparisons for l_inf and l_1 are in
test_certify.py.)
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcurves import certify
from rcurves.certify import bab, bab_bounds, bab_cuts, bab_host, bab_lp, bab_root
from rcurves.nets import bounds as cb
from tests.certify.test_certify import BOX, _grid_search, _random_mlp


def test_a_round_from_a_reused_frontier_never_overflows_and_stays_sound():
    # a deep narrow net and a small budget: rounds that fail leave a full frontier
    net = _random_mlp([2, 32, 32, 32, 3], 11)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    cfg = bab.bab_config(bc, 32, steps=5)
    prep = cb.prepare(net, bc)

    @jax.jit
    def two_rounds(x, y, e1, e2):
        ok1, _, _, f1 = bab.bab_certify_point(prep, x, y, e1, cfg)
        ok2, _, _, f2 = bab.bab_certify_point(prep, x, y, e2, cfg, f1, ~ok1)
        return ok1, f1.whole, jnp.sum(f1.alive), ok2, f2.whole

    xs = np.random.default_rng(3).uniform(-0.9, 0.9, (12, 2)).astype(np.float32)
    ys = np.argmax(np.asarray(net.logits(xs)), 1)
    d = _grid_search(net, xs, ys, "linf")[0]
    reused = 0
    for x, y, di in zip(xs, ys, d):
        for a, b in ((1.02, 0.9), (0.95, 0.85), (0.9, 0.8)):
            ok1, whole1, left, ok2, whole2 = (np.asarray(v).item() for v in
                                             two_rounds(jnp.asarray(x), jnp.int32(y), jnp.float32(a * di),
                                                        jnp.float32(b * di)))
            if a > 1:
                assert not ok1, "certified a ball that holds a misclassified grid point"
            if not ok1 and whole1 and left > 0:
                reused += 1
                assert whole2, "a round that reused a whole frontier overflowed"
    assert reused >= 10   # the reuse path was exercised, often from a large frontier


def test_a_nan_radius_is_never_certified():
    net = _random_mlp([2, 16, 16, 3], 0)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    cfg = bab.bab_config(bc, 16, steps=3)
    prep = cb.prepare(net, bc)
    x = jnp.zeros(2, jnp.float32)
    y = jnp.int32(np.argmax(np.asarray(net.logits(np.zeros((1, 2), np.float32)))))
    ok, _, _, _ = jax.jit(lambda e: bab.bab_certify_point(prep, x, y, e, cfg))(jnp.float32(np.nan))
    assert not bool(ok)


@pytest.mark.accelerator("bf16")
@pytest.mark.parametrize("seed", [0, 3, 5])   # (seed 1: one class on the whole box, no grid adversarial)
def test_l2_radius_never_exceeds_the_nearest_misclassified_grid_point(seed):
    net = _random_mlp([2, 16, 16, 3], seed)
    xs = np.random.default_rng(seed + 10).uniform(-0.8, 0.8, (8, 2)).astype(np.float32)
    ys = np.argmax(np.asarray(net.logits(xs)), 1).astype(np.int32)
    d = _grid_search(net, xs, ys, "l2")[0]
    crown = np.asarray(certify.certified_radius(net, xs, ys, norm="l2", bounds=BOX, upper=1.5 * d))
    r = np.asarray(certify.certified_radius(net, xs, ys, norm="l2", method="bab", budget=64, bounds=BOX,
                                            upper=1.5 * d))   # the cap cannot hide an error
    assert np.all(r <= d * (1 + 1e-5)), (r, d)
    assert np.all(r >= crown)
    assert np.median(r / d) > np.median(crown / d)   # and it helps


# ---------------------------------------------------------------------------------------------------------------
# bab_search: one ball, driven from the host


def _grid_min(net, x, y, eps, n=161):
    """The smallest margin ``z_y - max_{j != y} z_j`` of a 2-D MLP over an ``n x n`` grid of the l_inf ball
    (clipped to the box)."""
    g = np.linspace(-1, 1, n, dtype=np.float32)
    pts = np.stack(np.meshgrid(np.clip(x[0] + eps * g, *BOX), np.clip(x[1] + eps * g, *BOX)), -1)
    z = np.asarray(net.logits(pts.reshape(-1, 2)), np.float64)
    return float((z[:, y] - np.delete(z, y, axis=1).max(1)).min())


def _balls(net, n, factors, seed):
    """``(x, y, eps, grid min margin on the ball)`` at ``factors`` times each point's grid distance."""
    xs = np.random.default_rng(seed).uniform(-0.8, 0.8, (n, 2)).astype(np.float32)
    ys = np.argmax(np.asarray(net.logits(xs)), 1)
    d = _grid_search(net, xs, ys, "linf")[0]
    out = []
    for x, y, di in zip(xs, ys, d):
        for f in factors:
            eps = np.float32(f * di)
            out.append((x, int(y), eps, _grid_min(net, x, int(y), eps)))
    return out


@pytest.mark.slow
def test_search_proves_only_clean_balls_and_its_lower_bound_holds():
    """(Slow: its own compilation. ``test_verify`` checks ``bab_search`` by default, through ``verify``.)"""
    net = _random_mlp([2, 24, 24, 24, 3], 4)
    cfg = bab.bab_config(cb.BoundConfig(norm="linf", method="crown", domain=BOX), 1024, steps=10)
    assert cfg.branching == "fsb"
    split = 0
    for i, (x, y, eps, m) in enumerate(_balls(net, 4, (0.9, 1.03), 1)):
        res = bab.bab_search(net, x, y, eps, cfg)
        assert res.lower <= m + 1e-4 * (1 + abs(m)), (i, res, m)           # below the grid's minimum
        if res.verified:
            assert m > 0 and res.lower > 0 and res.left == 0, (i, res, m)
            split += res.bounded > 1
        elif res.reason == "falsified":                                    # a primal point the net misclassifies
            z = np.asarray(net.logits(res.x_adv[None].astype(np.float32)))[0]
            assert m <= 0 and z[y] <= np.delete(z, y).max(), (i, res, m)
            # inside the ball up to the float32 rounding of x +- eps, and inside the domain
            assert np.max(np.abs(res.x_adv - x)) <= eps + 1e-6 and np.all(np.abs(res.x_adv) <= 1), res
        else:
            assert res.reason in ("budget", "stuck") and (res.left > 0 or res.reason == "stuck"), res
    assert split >= 2                                                       # proofs that needed splits


@pytest.mark.slow
def test_fsb_needs_fewer_subdomains_than_babsr():
    net = _random_mlp([2, 24, 24, 24, 3], 4)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    n = {}
    for rule in ("babsr", "fsb"):
        cfg = bab.bab_config(bc, 2048, steps=10, branching=rule)
        for i, (x, y, eps, m) in enumerate(_balls(net, 6, (0.9, 0.98, 1.03), 1)):
            res = bab.bab_search(net, x, y, eps, cfg)
            assert res.lower <= m + 1e-4 * (1 + abs(m)) and (not res.verified or m > 0), (rule, i, res, m)
            if res.verified:
                n.setdefault(i, {})[rule] = res.bounded
    both = [v for v in n.values() if len(v) == 2]
    assert len(both) >= 8 and sum(v["babsr"] > 1 for v in both) >= 4       # proofs that needed splits
    assert sum(v["fsb"] for v in both) < sum(v["babsr"] for v in both), both


@pytest.mark.slow
def test_recomputing_only_the_root_unstable_units_changes_no_verdict():
    """``recompute='unstable'`` recomputes per subdomain only the units unstable at the root: a stable unit's
    relaxation is exact whatever its bounds, so the margin bounds, the splits and the verdicts are those of
    recomputing every unit ('all'), and both stay below the grid's minimum margin."""
    net = _random_mlp([2, 24, 24, 24, 3], 4)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    prep = cb.prepare(net, bc)
    seen = 0
    for i, (x, y, eps, m) in enumerate(_balls(net, 3, (0.95, 1.03), 1)):
        res = {r: bab.bab_search(net, x, y, eps, bab.bab_config(bc, 512, steps=10, recompute=r))
               for r in ("unstable", "all")}
        for r, v in res.items():
            assert v.lower <= m + 1e-4 * (1 + abs(m)) and (not v.verified or m > 0), (r, i, v, m)
        a, b = res["unstable"], res["all"]
        assert (a.verified, a.reason, a.bounded) == (b.verified, b.reason, b.bounded), (i, a, b)
        assert a.lower == pytest.approx(b.lower, rel=1e-4, abs=1e-5)
        seen += a.bounded > 1
        root = bab_root._root(prep, jnp.asarray(x), jnp.int32(y), jnp.float32(eps), bab.bab_config(bc, 512))
        rows = bab_host._unstable_rows(prep, root)
        assert rows[0] is None
        for (l, u), r in zip(root.bounds[1:], rows[1:]):
            unstable = np.flatnonzero(((np.asarray(l) < 0) & (np.asarray(u) > 0)).reshape(-1))
            assert set(np.asarray(r)) == set(unstable) or unstable.size == 0
            assert np.asarray(r).size < 2 * max(unstable.size, 1) and np.asarray(r).size <= l.size
    assert seen >= 1                                                        # a search that split


def _ball_6d(sizes, net_seed, seed):
    """``(net, bc, prep, rng, x, y)``: a random MLP on 6 inputs in ``[-1, 1]`` and a random point with its class."""
    net = _random_mlp(sizes, net_seed)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=(-1.0, 1.0))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.5, 0.5, 6).astype(np.float32)
    y = int(np.argmax(np.asarray(net.logits(x[None]))[0]))
    return net, bc, cb.prepare(net, bc), rng, x, y


def _ball_samples(rng, x, eps, n=20000):
    """``n`` uniform points of the l_inf ball of a 6-input point and its 64 vertices, clipped to ``[-1, 1]``,
    float32 (what the network sees)."""
    corners = np.array(np.meshgrid(*[[-1.0, 1.0]] * 6)).reshape(6, -1).T
    pts = np.concatenate([rng.uniform(-1, 1, (n, 6)), corners]) * eps + x
    return np.clip(pts, -1.0, 1.0).astype(np.float32)


def test_tightened_root_bounds_hold_on_the_box_and_are_never_wider_than_crown():
    """alpha-CROWN's hidden bounds at the root (``BaBConfig.tighten``): every pre-activation of 20,000
    random points and all 2^6 vertices of the box lies inside them; each is inside CROWN's and the layers
    after the first are narrower on some unit (the optimisation did something); the first layer is CROWN's
    (exact intervals). And the search on them stays below the brute-force minimum margin."""
    net, bc, prep, rng, x, y = _ball_6d([6, 24, 24, 24, 3], 7, 0)
    eps = 0.3
    r0, r1 = (bab_root._root(prep, jnp.asarray(x), jnp.int32(y), jnp.float32(eps), bab.bab_config(bc, 64, tighten=t))
              for t in (0, 30))
    pts = _ball_samples(rng, x, eps)
    h, narrower = pts, []
    denses = [layer for layer in net.layers if isinstance(layer, certify.Dense)]
    for k, ((l0, u0), (l1, u1), dense) in enumerate(zip(r0.bounds, r1.bounds, denses)):
        h = (h if k == 0 else np.maximum(h, 0.0)) @ np.asarray(dense.w).T + np.asarray(dense.b)
        l0, u0, l1, u1 = (np.asarray(v).reshape(-1) for v in (l0, u0, l1, u1))
        tol = 1e-4 * (1 + np.abs(h))
        assert np.all(h >= l1 - tol) and np.all(h <= u1 + tol), k            # sound
        assert np.all(l1 >= l0) and np.all(u1 <= u0), k                        # never looser than CROWN
        narrower.append(float(np.sum(u0 - l0) - np.sum(u1 - l1)))
    assert narrower[0] == 0.0 and narrower[1] > 0 and narrower[2] > 0, narrower
    net2 = _random_mlp([2, 24, 24, 24, 3], 4)         # 2-D: the grid's minimum margin is known
    cfg = bab.bab_config(cb.BoundConfig(norm="linf", method="crown", domain=BOX), 256, steps=10, tighten=30)
    for i, (xb, yb, e, m) in enumerate(_balls(net2, 1, (0.95, 1.03), 1)):
        res = bab.bab_search(net2, xb, yb, e, cfg)
        assert res.lower <= m + 1e-4 * (1 + abs(m)) and (not res.verified or m > 0), (i, res, m)


@pytest.mark.highest
def test_second_layer_by_split_corrections_equals_the_full_pull_back_and_holds_on_the_subdomain(monkeypatch):
    """``BaBConfig.first_splits``: the second layer's bounds on a subdomain as the root's pull-back plus one
    correction per split first-layer unit (``bab_bounds._second_layer``) equal the full pull-back through the
    subdomain's relaxation (CROWN, as ``recompute`` did) while at most ``S`` first-layer units are split;
    with more (the extra splits keep the root's relaxation, which holds on the whole ball) as with fewer,
    the lower and upper bounds contain the true pre-activations of random points of the subdomain (sound),
    and the search on them stays below the grid's minimum margin."""
    net, bc, prep, rng, x, y = _ball_6d([6, 32, 24, 3], 5, 1)
    eps = jnp.float32(0.4)
    root = bab_root._root(prep, jnp.asarray(x), jnp.int32(y), eps, bab.bab_config(bc, 64))
    l0, u0 = (np.asarray(v).reshape(-1) for v in root.bounds[0])
    unstable = np.flatnonzero((l0 < 0) & (u0 > 0))
    assert unstable.size >= 12, unstable.size
    dense1 = [layer for layer in net.layers if isinstance(layer, certify.Dense)]

    def full(s0):
        l = np.where(s0 < 0, np.maximum(l0, 0), l0)
        u = np.where(s0 > 0, np.minimum(u0, 0), u0)
        lam, b = cb._both(prep.jacs[1], prep.consts[1])
        lam, b = cb.backsub(prep, [cb.relax(jnp.asarray(l), jnp.asarray(u))], lam, b, 1)
        return np.asarray(cb.concretize(lam, b, jnp.asarray(x), eps, bc)[0])

    S = 4
    fast = jax.jit(bab_bounds._second_layer(prep, root, jnp.asarray(x), eps, bc, None, S))
    rows = jnp.asarray([0, 3, 7, 11, 3], jnp.int32)          # a subset of the second layer, one repeated (padding)
    some = jax.jit(bab_bounds._second_layer(prep, root, jnp.asarray(x), eps, bc, rows, S))
    monkeypatch.setattr(bab_bounds, "FIRST_JACOBIAN_MAX", 0)      # the first layer's rows by its transpose instead
    by_transpose = jax.jit(bab_bounds._second_layer(prep, root, jnp.asarray(x), eps, bc, None, S))
    pts0 = np.clip(x + eps * rng.uniform(-1, 1, (40000, 6)), -1, 1).astype(np.float32)
    z1 = pts0 @ np.asarray(dense1[0].w).T + np.asarray(dense1[0].b)
    z2 = np.maximum(z1, 0) @ np.asarray(dense1[1].w).T + np.asarray(dense1[1].b)
    checked = 0
    for trial in range(21):
        k = trial % 7 + 1                                        # 1..7 split units: some above S
        s0 = np.zeros(l0.size, np.int8)
        pick = rng.choice(unstable, k, replace=False)
        s0[pick] = rng.choice([-1, 1], k)
        a, b = np.asarray(fast(jnp.asarray(s0))), full(s0)
        np.testing.assert_allclose(np.asarray(by_transpose(jnp.asarray(s0))), a, rtol=1e-5, atol=1e-5)
        half, r_ = a.size // 2, np.asarray(rows)
        np.testing.assert_allclose(np.asarray(some(jnp.asarray(s0))), np.concatenate([a[:half][r_], a[half:][r_]]),
                                   rtol=1e-5, atol=1e-5)
        if k <= S:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=f"{k} splits")
        inside = np.all(np.where(s0 < 0, z1 >= 0, True) & np.where(s0 > 0, z1 <= 0, True), axis=1)
        if inside.any():
            m = z2.shape[1]
            lo, hi = a[:m], -a[m:]
            zi = z2[inside]
            assert np.all(zi >= lo - 1e-4 * (1 + np.abs(zi))) and np.all(zi <= hi + 1e-4 * (1 + np.abs(zi)))
            checked += 1
    assert checked >= 8, checked
    monkeypatch.undo()
    net2 = _random_mlp([2, 24, 24, 24, 3], 4)         # 2-D: the grid's minimum margin is known
    for s_ in (2,):
        cfg = bab.bab_config(cb.BoundConfig(norm="linf", method="crown", domain=BOX), 256, steps=10,
                             first_splits=s_)
        for i, (xb, yb, e, m) in enumerate(_balls(net2, 2, (0.95, 1.03), 1)):
            res = bab.bab_search(net2, xb, yb, e, cfg)
            assert res.lower <= m + 1e-4 * (1 + abs(m)) and (not res.verified or m > 0), (s_, i, res, m)


def test_inherited_hidden_bounds_only_narrow_and_hold_on_the_subdomain():
    """``BaBConfig.refresh``: a child's hidden bounds recomputed and intersected with its parent's (``fresh``)
    lie inside the parent's, and its second layer's inside the recompute intersected with the root's (refresh
    0: the same recompute, on the same first-layer bounds); not recomputed,
    its layers after the second are the parent's with the new split clipped, its second layer still
    recomputed. Either way every pre-activation of random points of the child's subdomain lies inside them
    (sound), and the search that inherits them (every third split recomputed) stays below the grid's
    minimum margin, recomputing the later layers at the root and every third split."""
    net, bc, prep, rng, x, y = _ball_6d([6, 32, 24, 24, 3], 5, 2)
    eps = jnp.float32(0.4)
    cfg = bab.bab_config(bc, 64, refresh=3)
    root = bab_root._root(prep, jnp.asarray(x), jnp.int32(y), eps, cfg)
    sub = jax.jit(bab_bounds._bounder(prep, root, jnp.asarray(x), eps, cfg)[3], static_argnums=2)
    flat = lambda bs: [(np.asarray(l).reshape(-1), np.asarray(u).reshape(-1)) for l, u in bs]   # noqa: E731
    lr = flat(root.bounds)
    sizes = [l.size for l, _ in lr]
    unstable = np.flatnonzero(np.concatenate([(l < 0) & (u > 0) for l, u in lr]))
    assert ((lr[2][0] < 0) & (lr[2][1] > 0)).sum() >= 4        # unstable units in the third layer too
    pts = np.clip(x + eps * rng.uniform(-1, 1, (40000, 6)), -1, 1).astype(np.float32)
    zs, h = [], pts
    for dense in [layer for layer in net.layers if isinstance(layer, certify.Dense)][:3]:
        zs.append(h @ np.asarray(dense.w).T + np.asarray(dense.b))
        h = np.maximum(zs[-1], 0.0)
    z = np.concatenate(zs, axis=1)
    tol = 1e-5
    checked = 0
    for trial in range(12):
        parent = np.zeros(sum(sizes), np.int8)
        pick = rng.choice(unstable, trial % 4 + 2, replace=False)
        signs = np.where(z[rng.integers(z.shape[0]), pick] >= 0, -1, 1)   # the states at a random point
        parent[pick[:-1]] = signs[:-1]
        child = parent.copy()
        child[pick[-1]] = signs[-1]
        pb = sub(jnp.asarray(parent), None, True)[0]
        inherited = pb[1:]
        c0, c1, c2 = (flat(sub(jnp.asarray(child), inh, fr)[0])
                      for inh, fr in ((None, True), (inherited, True), (inherited, False)))
        pb = flat(pb)
        for j in range(1, len(sizes)):
            s_j = child[sum(sizes[:j]):sum(sizes[:j + 1])]
            (l0, u0), (l1, u1), (l2, u2), (lp, up) = c0[j], c1[j], c2[j], pb[j]
            assert np.all(l1 >= lp - tol) and np.all(u1 <= up + tol), (trial, j)
            if j == 1:
                assert np.all(l1 >= l0 - tol) and np.all(u1 <= u0 + tol), trial
            if j >= 2:                          # the parent's, the child's split clipped
                np.testing.assert_array_equal(l2, np.where(s_j < 0, np.maximum(lp, 0), lp))
                np.testing.assert_array_equal(u2, np.where(s_j > 0, np.minimum(up, 0), up))
            else:
                np.testing.assert_allclose(l2, l1, atol=tol)
                np.testing.assert_allclose(u2, u1, atol=tol)
        inside = np.all(np.where(child < 0, z >= 0, True) & np.where(child > 0, z <= 0, True), axis=1)
        if inside.any():
            zi = z[inside]
            for bs in (c1, c2):
                lo, hi = np.concatenate([l for l, _ in bs]), np.concatenate([u for _, u in bs])
                assert np.all(zi >= lo - 1e-4 * (1 + np.abs(zi))) and np.all(zi <= hi + 1e-4 * (1 + np.abs(zi)))
            checked += 1
    assert checked == 12, checked
    net2 = _random_mlp([2, 24, 24, 24, 3], 4)         # 2-D: the grid's minimum margin is known
    cfg2 = bab.bab_config(cb.BoundConfig(norm="linf", method="crown", domain=BOX), 512, steps=10, refresh=3)
    search_split, seen = bab_host._search_split, []

    def spy(*a, **kw):
        seen.append(kw["fresh"])
        return search_split(*a, **kw)

    split = 0
    for i, (xb, yb, e, m) in enumerate(_balls(net2, 2, (0.95, 1.03), 1)):
        seen.clear()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bab_host, "_search_split", spy)
            res = bab.bab_search(net2, xb, yb, e, cfg2)
        assert res.lower <= m + 1e-4 * (1 + abs(m)) and (not res.verified or m > 0), (i, res, m)
        # the root, then the first two splits from its bounds, then every batch with a parent 2 splits old
        assert seen[:4] == [True, False, False, True][:len(seen)], seen
        if res.verified and res.bounded > 8 * 2 * 3:
            split += 1
            assert seen.count(False) >= 2 and seen.count(True) >= 2, seen
    assert split >= 1                                  # a proof past the first recompute


@pytest.mark.parametrize("few", [0, 1])
def test_batches_with_few_first_layer_splits_get_the_same_bounds(monkeypatch, few):
    """``bab_host.FEW_FIRST_SPLITS``: batches whose subdomains have at most that many split first-layer units run
    the program that corrects only that many; none is left out, so the search is the one that corrects
    ``first_splits`` (8 here) everywhere: the same verdicts, subdomains and lower bounds, below the grid's
    minimum margin (with 1, both programs run within a search; 0 turns it off)."""
    net = _random_mlp([2, 24, 24, 24, 3], 4)
    cfg = bab.bab_config(cb.BoundConfig(norm="linf", method="crown", domain=BOX), 512, steps=10, first_splits=8)
    split, seen = bab_host._search_split, []

    def spy(*a, **kw):
        seen.append(kw["cfg"].first_splits)
        return split(*a, **kw)

    monkeypatch.setattr(bab_host, "_search_split", spy)
    balls = _balls(net, 2, (0.95, 1.03), 1)
    out = {}
    for f in (few, 8):
        monkeypatch.setattr(bab_host, "FEW_FIRST_SPLITS", f)
        out[f] = [bab.bab_search(net, x, y, e, cfg) for x, y, e, m in balls]
        if f == few:
            assert set(seen) == ({1, 8} if few else {8}), set(seen)
    for (x, y, e, m), a, b in zip(balls, out[few], out[8]):
        assert a.lower <= m + 1e-4 * (1 + abs(m)) and (not a.verified or m > 0), (a, m)
        assert (a.verified, a.reason, a.bounded) == (b.verified, b.reason, b.bounded), (a, b)
        assert a.lower == pytest.approx(b.lower, rel=1e-4, abs=1e-5)


def test_bad_branch_and_bound_settings_are_value_errors_naming_them():
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    for kw, name in (({"branching": "best"}, "branching"), ({"recompute": "some"}, "recompute"),
                     ({"tighten": -1}, "tighten"), ({"tighten": 2.5}, "tighten"), ({"tighten": True}, "tighten"),
                     ({"first_splits": -1}, "first_splits"), ({"first_splits": 1.5}, "first_splits"),
                     ({"refresh": -1}, "refresh"), ({"refresh": 2.5}, "refresh"),
                     ({"cuts": -1}, "cuts"), ({"cuts": 0.5}, "cuts")):
        with pytest.raises(ValueError, match=f"^{name}: "):
            bab.bab_config(bc, 64, **kw)


def test_the_device_frontier_hands_out_its_lowest_subdomains_and_stores_the_open_children():
    """``bab_pool``: against a NumPy reference, ``_take`` gives the ``B`` lowest bounds (lowest first) with their
    rows, padded with copies of the first and frees their slots; ``_tail`` puts the open children (valid, bound
    not positive) in the lowest free slots, ages them, counts NaN / candidate / leaf / open children and reads the
    next step's numbers; ``_drop`` frees slots; ``_grow`` keeps every subdomain in its slot."""
    from rcurves.certify import bab_pool as P

    lb0 = np.array([5.0, 3.0, -1.0, 7.0, 0.5, -2.0], np.float32)
    k, H = lb0.size, 6
    sgn0 = np.zeros((k, H), np.int8)
    sgn0[np.arange(k), np.arange(k)] = -1                       # row i: unit i split (first layer: units 0-3)
    nxt0 = (np.arange(k, dtype=np.int32) + 1) % H
    pool = P._new_pool(jnp.asarray(sgn0), jnp.asarray(lb0), jnp.asarray(nxt0), (jnp.asarray(lb0[:, None] * 10),),
                       capacity=8)
    assert pool.lb.shape == (8,) and np.isinf(np.asarray(pool.lb)[k:]).all()
    pool, sgn, nxt, leaves, age = P._take(pool, batch=4)
    order = np.argsort(lb0, kind="stable")[:4]                  # -2, -1, 0.5, 3
    np.testing.assert_array_equal(np.asarray(sgn), sgn0[order])
    np.testing.assert_array_equal(np.asarray(nxt), nxt0[order])
    np.testing.assert_array_equal(np.asarray(leaves[0])[:, 0], lb0[order] * 10)
    left = np.asarray(pool.lb)
    assert sorted(left[np.isfinite(left)].tolist()) == [5.0, 7.0]
    # children: 2 x 4, the 3rd parent's invalid (m = 2 real parents); bounds with a proof, a NaN-free leaf
    klb = np.array([-0.5, 1.0, 9.0, 9.0, -3.0, -0.1, 9.0, 9.0], np.float32)   # valid: 0, 1, 4, 5
    knxt = np.array([2, 3, 0, 0, -1, 1, 0, 0], np.int32)
    kmarg = np.array([0.3, -0.2, -5.0, -5.0, 1.0, 0.0, -5.0, -5.0], np.float32)
    kids = np.zeros((8, H), np.int8)
    kids[5, :3] = -1                                            # three first-layer splits
    kids[4, 5] = 1                                              # one in a later layer
    pool, counts, values, dest = P._tail(pool, jnp.asarray(kids), jnp.asarray(klb), jnp.asarray(knxt),
                                         (jnp.asarray(klb[:, None]),), jnp.asarray(kmarg),
                                         jnp.asarray([4, 1, 0, 0], jnp.int32), jnp.int32(2), batch=4, h1=4,
                                         fresh=False)
    counts, values, dest = np.asarray(counts), np.asarray(values), np.asarray(dest)
    # NaN 0; candidates 1 (child 1) and 5 (0.0); the leaf is child 4; open 0, 4, 5
    np.testing.assert_array_equal(counts[:4], [0, 2, 1, 3])
    assert values[0] == 1.0 and values[1] == 5.0 and values[2] == -3.0      # proven min, lowest before / after
    free = [i for i in range(8) if i not in (0, 3)]             # the slots of 5 and 7 stay taken
    np.testing.assert_array_equal(dest[[0, 4, 5]], free[:3])
    assert (dest[[1, 2, 3, 6, 7]] == 8).all()
    lbp, agep = np.asarray(pool.lb), np.asarray(pool.age)
    assert lbp[free[0]] == -0.5 and lbp[free[1]] == -3.0 and lbp[free[2]] == np.float32(-0.1)
    np.testing.assert_array_equal(agep[free[:3]], [5, 5, 2])      # not fresh: the parent's age + 1
    np.testing.assert_array_equal(np.asarray(pool.sgn)[free[1]], kids[4])
    assert np.asarray(pool.leaves[0])[free[2], 0] == np.float32(-0.1)
    # the next four: -3 (child 4: no unit next), -0.5 (child 0: next unit 2), -0.1 (child 5: 3 split, next unit
    # 1), 5 (row 0: unit 0 split, next 1): most split first-layer units with the next one 3 + 1, oldest age 5
    assert counts[4] == 4 and counts[5] == 5
    pool = P._drop(pool, jnp.asarray([free[1], 8], jnp.int32))
    info, low = P._peek(pool, batch=4, h1=4)
    assert float(low) == np.float32(-0.5) and np.isinf(np.asarray(pool.lb)[free[1]])
    grown = P._grow(pool, capacity=16)
    before = np.asarray(P._peek(pool, batch=4, h1=4)[0])
    np.testing.assert_array_equal(np.asarray(grown.lb)[:8], np.asarray(pool.lb))
    assert np.isinf(np.asarray(grown.lb)[8:]).all() and (np.asarray(grown.sgn)[:8] == np.asarray(pool.sgn)).all()
    np.testing.assert_array_equal(np.asarray(P._peek(grown, batch=4, h1=4)[0]), before)
    np.testing.assert_array_equal(before, np.asarray(info))
    assert P.capacity_for(1, 4) == P.INITIAL_CAPACITY and P.capacity_for(5000, 8) == 8192


def _same(a, b):
    """Two ``SearchResult`` are equal (the counterexample compared as an array)."""
    return a._replace(x_adv=None) == b._replace(x_adv=None) and (
        (a.x_adv is None and b.x_adv is None) or np.array_equal(a.x_adv, b.x_adv))


def test_the_frontier_grows_past_a_tiny_initial_capacity_and_the_search_is_the_same(monkeypatch):
    """A frontier of 4 slots (batch 2) doubles on the device as the search needs; each search is the one a
    frontier of 1,024 slots runs (same verdict, subdomains, peak, bound), and no bound is above the grid's minimum."""
    from rcurves.certify import bab_pool

    net = _random_mlp([2, 24, 24, 24, 3], 4)
    cfg = bab.bab_config(cb.BoundConfig(norm="linf", method="crown", domain=BOX), 400, steps=10, batch=2)
    balls = _balls(net, 2, (0.95, 1.03), 1)
    big = [bab.bab_search(net, x, y, e, cfg) for x, y, e, m in balls]
    grown = []
    real = bab_pool._grow

    def spy(pool, *, capacity):
        grown.append(capacity)
        return real(pool, capacity=capacity)

    monkeypatch.setattr(bab_pool, "INITIAL_CAPACITY", 1)
    monkeypatch.setattr(bab_host, "_grow", spy)
    small = [bab.bab_search(net, x, y, e, cfg) for x, y, e, m in balls]
    assert max(r.peak for r in small) > 8 and min(grown) == 8 and 16 in grown, grown   # 4 slots, then 8, 16, ...
    for (x, y, e, m), a, b in zip(balls, small, big):
        assert _same(a, b), (a, b)
        assert a.lower <= m + 1e-4 * (1 + abs(m)) and (not a.verified or m > 0), (a, m)


def test_a_proof_splits_the_same_subdomains_whatever_the_batch():
    """Every subdomain's bound and split depend only on the subdomain (and its parent's parameters), so a
    completed proof bounds the same subdomains in batches of 2 or 8 parents (and its bound is theirs); no ball
    proven at one batch is falsified at the other, and every lower bound stays below the grid's minimum margin."""
    net = _random_mlp([2, 24, 24, 24, 3], 4)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    proofs = 0
    for x, y, e, m in _balls(net, 3, (0.9, 0.97), 2):
        res = {b: bab.bab_search(net, x, y, e, bab.bab_config(bc, 400, steps=10, batch=b)) for b in (2, 8)}
        for r in res.values():
            assert r.lower <= m + 1e-4 * (1 + abs(m)), (r, m)
            assert not r.verified or m > 0, (r, m)
        assert {res[2].reason, res[8].reason} != {"verified", "falsified"}, res
        if res[2].verified and res[8].verified:
            proofs += res[2].bounded > 1
            assert res[2].bounded == res[8].bounded, res
            assert res[8].lower == pytest.approx(res[2].lower, rel=1e-4, abs=1e-5), res
    assert proofs >= 2


def test_batch_auto_fits_the_memory_and_bad_batches_are_value_errors_before_compiling(monkeypatch):
    """``batch="auto"``: XLA's bytes of the bound step grow with the batch (and the two-point line predicts a
    third); the choice is a power of two in [1, 4096], the device's cap where memory allows, else the largest
    that fits the budget with its safety factor (1 when none fits); the host search and certified_radius run
    with it. ``batch`` neither a positive integer nor "auto" is a ValueError naming it, before anything
    compiles."""
    from attacks.memory import LinearBytes, compiled_bytes
    from rcurves.certify import bab_batch

    net = _random_mlp([2, 16, 16, 3], 0)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    cfg = bab.bab_config(bc, 256, steps=3, batch="auto")
    assert cfg.batch == "auto"
    x, y, e, m = _balls(net, 1, (0.95,), 3)[0]
    lower = bab_host.step_lowering(net, x, y, e, cfg)
    mem = [compiled_bytes(lower(b).compile()) for b in (2, 8, 32)]
    assert mem[0] < mem[1] < mem[2], mem
    assert LinearBytes.fit(2, mem[0], 8, mem[1]).bytes_for(32) == pytest.approx(mem[2], rel=0.25), mem
    choice = bab_batch.choose(lower, ("test", "device"))
    assert isinstance(choice.batch, int) and 1 <= choice.batch <= bab_batch.MAX_BATCH
    assert choice.batch & (choice.batch - 1) == 0 and choice.fits
    assert choice.batch == bab_batch.device_cap()                # a tiny net: the memory does not bind
    # a budget that holds about 5 parents: 4 (a power of two), and 8 would not fit (choose's line: 8 and the cap)
    line = LinearBytes.fit(8, mem[1], 32, mem[2])
    b5 = int(bab_batch.SAFETY * line.bytes_for(5)) + 1
    five = bab_batch.choose(lower, ("test", 5), cap=32, budget_bytes=b5)
    assert five.batch == 4 and five.fits and five.line == line
    assert bab_batch.SAFETY * line.bytes_for(8) > b5
    tiny = bab_batch.choose(lower, ("test", 0), cap=32, budget_bytes=1000)
    assert tiny.batch == 1 and not tiny.fits
    # the searches resolve it: the host search within half the budget, certified_radius within budget // 2
    auto = bab.bab_search(net, x, y, e, cfg)
    fixed = bab.bab_search(net, x, y, e, bab.bab_config(bc, 256, steps=3, batch=min(choice.batch, 128)))
    assert _same(auto, fixed)
    # a budget of 4 subdomains: batch 2, and nothing compiled at a larger batch to find it out
    caps, real_choose = [], bab_batch.choose
    monkeypatch.setattr(bab_batch, "choose", lambda lower, key, **kw: caps.append(kw.get("cap")) or real_choose(
        lambda b: caps.append(b) or lower(b), key, **kw))
    bab.bab_search(net, x, y, e, bab.bab_config(bc, 4, steps=3, batch="auto"))
    assert caps and max(caps) == 2, caps
    monkeypatch.setattr(bab_batch, "choose", real_choose)
    xs = np.stack([b[0] for b in _balls(net, 3, (1.0,), 4)])
    ys = np.argmax(np.asarray(net.logits(xs)), 1)
    kw = dict(norm="linf", method="bab", budget=16, bounds=BOX, search_steps=3)
    np.testing.assert_array_equal(np.asarray(certify.certified_radius(net, xs, ys, **kw)),
                                  np.asarray(certify.certified_radius(net, xs, ys, batch=min(choice.batch, 8), **kw)))
    # bad batches, before any compilation
    def never(*a, **k):
        raise AssertionError("compiled before the batch was checked")

    monkeypatch.setattr(bab_host, "_search_root", never)
    monkeypatch.setattr(bab_batch, "choose", never)
    for bad in (0, -3, "big", 2.5, True, None):
        with pytest.raises(ValueError, match="^batch: "):
            bab.bab_config(bc, 64, batch=bad)
        with pytest.raises(ValueError, match="^batch: "):
            bab.bab_search(net, x, y, e, bab.BaBConfig(bound=bc, batch=bad))
        with pytest.raises(ValueError, match="^batch: "):
            certify.certified_radius(net, x[None], np.array([y]), norm="linf", method="bab", bounds=BOX, batch=bad)


def test_an_exact_leaf_lp_is_the_minimum_over_its_activation_region():
    """``bab_lp._exact_leaf`` on subdomains with every root-unstable unit split to the activation pattern of a
    random point of the box (a 2-6-6-3 MLP, l_inf): the LP's minimum equals the smallest margin over the grid
    points of the box with that pattern, up to the grid's resolution (never above it), its point lies in the
    box, has the pattern and the margin the LP gives; a pattern no point of the box has is an empty leaf."""
    net = _random_mlp((2, 6, 6, 3), 4)
    x, y, eps = jnp.asarray([0.1, -0.2], jnp.float32), 0, 0.6
    cfg = bab.bab_config(cb.BoundConfig(norm="linf", method="crown", domain=BOX), 64)
    pcfg = bab_host._program_cfg(cfg)
    prep, root, _ = bab_host._search_root(net, x, jnp.int32(y), jnp.float32(eps), cfg=pcfg)
    blocks = bab_lp._leaf_blocks(prep)
    l0 = np.concatenate([np.asarray(l).reshape(-1) for l, _ in root.bounds])
    u0 = np.concatenate([np.asarray(u).reshape(-1) for _, u in root.bounds])
    unstable = (l0 < 0) & (u0 > 0)
    assert unstable.sum() >= 3
    g = np.linspace(-eps, eps, 401)
    pts = (np.asarray(x)[None] + np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)).astype(np.float64)
    ws = [(np.asarray(layer.w, np.float64), np.asarray(layer.b, np.float64)) for layer in net.layers
          if hasattr(layer, "w")]
    pre, h = [], pts
    for w, b in ws[:-1]:
        z = h @ w.T + b
        pre.append(z)
        h = np.maximum(z, 0.0)
    z = h @ ws[-1][0].T + ws[-1][1]
    margins = z[:, y] - np.max(np.delete(z, y, axis=1), axis=1)
    pattern = np.concatenate(pre, axis=1) > 0                       # (points, H)
    rng = np.random.default_rng(0)
    checked = 0
    for i in rng.choice(len(pts), 6, replace=False):
        sgn = np.where(unstable, np.where(pattern[i], -1, 1), 0).astype(np.int8)
        leaf = bab_host._leaf_bounds(prep, root, x, jnp.float32(eps), jnp.asarray(sgn), None, cfg=pcfg)
        value, point = bab_lp._exact_leaf(blocks, root, leaf, x, eps, cfg)
        same = np.all(pattern[:, unstable] == pattern[i, unstable], axis=1)
        grid_min = margins[same].min()
        assert value <= grid_min + 1e-6 and value >= grid_min - 0.05, (value, grid_min)
        assert np.all(np.abs(point - np.asarray(x)) <= eps + 1e-9)
        zp, hp, pp = point[None], point[None], []
        for w, b in ws[:-1]:
            zp = hp @ w.T + b
            pp.append(zp)
            hp = np.maximum(zp, 0.0)
        zp = hp @ ws[-1][0].T + ws[-1][1]
        assert abs(zp[0, y] - np.max(np.delete(zp[0], y)) - value) < 1e-5
        on = np.concatenate(pp, axis=1)[0][unstable]
        assert np.all(np.where(pattern[i, unstable], on >= -1e-6, on <= 1e-6))
        checked += 1
    missing = [s for s in itertools.product((-1, 1), repeat=int(unstable.sum()))
               if not np.any(np.all(pattern[:, unstable] == (np.asarray(s) < 0), axis=1))]
    assert checked == 6 and missing
    sgn = np.zeros(unstable.size, np.int8)
    sgn[unstable] = missing[0]
    leaf = bab_host._leaf_bounds(prep, root, x, jnp.float32(eps), jnp.asarray(sgn), None, cfg=pcfg)
    emptiness = bab_lp._exact_leaf(blocks, root, leaf, x, eps, cfg)
    assert emptiness == (np.inf, None)                             # the LP is infeasible: an empty leaf


def _mixture_bound(prep, root, x, eps, bc, theta=None):
    """CROWN's bound of the branched rows at the root, the first layer's upper side through ``root.cuts`` mixed
    by ``theta`` (None: the triangle)."""
    rel = [cb.relax(l, u) for l, u in root.bounds]
    sg = [jnp.zeros_like(l) for l, _ in root.bounds]
    cut = None if theta is None else (root.cuts, theta, (root.bounds[0][0] < 0) & (root.bounds[0][1] > 0))
    lam, b = bab_bounds._backsub_split(prep, rel, sg, sg, root.lam0, root.b0, cut)
    return np.asarray(cb.concretize(lam, b, x, eps, bc)[0])


def test_first_layer_cuts_hold_on_the_box_and_mix_to_the_triangle():
    """``_root_cuts`` (Anderson et al. 2020's cuts of the first layer, separated from the root LP): at every one
    of 20,000 random points and the 64 vertices of the box each cut bounds its unit's ReLU from above with ``t``
    its on/off state (the binary formulation they relax); the big-M pair alone, weighted by the triangle's
    slope (the starting logits without the separated cuts), gives CROWN's bound exactly; any other mixture gives a sound bound (below the sampled
    minimum of the row)."""
    net, bc, prep, rng, x, y = _ball_6d([6, 32, 32, 3], 2, 1)
    eps = 0.4
    cfg = bab.bab_config(bc, 64, cuts=3)
    xj, yj, ej = jnp.asarray(x), jnp.int32(y), jnp.float32(eps)
    root = bab_root._root(prep, xj, yj, ej, cfg)
    cuts = bab_cuts._root_cuts(bab_lp._leaf_blocks(prep), root, xj, ej, cfg)
    assert cuts is not None
    h1 = root.bounds[0][0].shape[0]
    real = np.asarray(cuts.unit) < h1
    n_unstable = int(np.sum((np.asarray(root.bounds[0][0]) < 0) & (np.asarray(root.bounds[0][1]) > 0)))
    assert real.sum() > 2 * n_unstable                                     # separation found cuts
    pts = _ball_samples(rng, x, eps).astype(np.float64)
    w1, b1 = (np.asarray(v, np.float64) for v in (net.layers[0].w, net.layers[0].b))
    z = pts @ w1.T + b1                                                    # (P, H_1)
    unit, mat, const, kappa = (np.asarray(v, np.float64) for v in cuts[:4])
    for c in np.flatnonzero(real):
        k = int(unit[c])
        t = (z[:, k] > 0).astype(np.float64)
        g = pts @ mat[c] + const[c] + kappa[c] * t
        assert np.all(np.maximum(z[:, k], 0.0) <= g + 1e-4 * (1 + np.abs(g))), c
    root = root._replace(cuts=cuts)
    r = root.lam0.shape[0]
    tri = _mixture_bound(prep, root, xj, ej, bc)
    pair = np.asarray(cuts.theta0).copy()
    pair[2 * n_unstable:] = -1e4                          # the separated cuts (after each unit's pair) left out
    theta0 = jnp.broadcast_to(jnp.asarray(pair), (r,) + pair.shape)
    np.testing.assert_allclose(_mixture_bound(prep, root, xj, ej, bc, theta0), tri, rtol=1e-4, atol=1e-4)
    # the rows' sampled minimum over the ball
    h = np.maximum(z, 0.0)
    for layer in [l for l in net.layers if isinstance(l, certify.Dense)][1:]:
        h = h @ np.asarray(layer.w, np.float64).T + np.asarray(layer.b, np.float64)
        if h.shape[1] != 3:
            h = np.maximum(h, 0.0)
    C = np.asarray(cb.margin_spec(yj, 3))
    sampled = (h @ C.T).min(0)[np.asarray(jnp.argsort(root.root_lb))[:r]]
    for s in range(20):
        th = jnp.asarray(np.random.default_rng(s).normal(0, 3, (r, cuts.theta0.shape[0])), jnp.float32)
        lb = _mixture_bound(prep, root, xj, ej, bc, th)
        assert np.all(lb <= sampled + 1e-4 * (1 + np.abs(sampled))), (s, lb, sampled)


def test_first_layer_cuts_prove_what_the_triangle_cannot(monkeypatch):
    """One unstable unit ``relu(x1 + x2)`` on ``[-1, 1]^2`` and the margin ``2.5 - relu(x1 + x2) - x1 + x2`` (two
    stable units carry ``x1`` and ``x2``): its minimum is 0.5 (a concave function: at the vertices (1, 1) and (1,
    -1)), the triangle's LP gives -0.5 (``relu <= (z + 2) / 2``, 1 at the vertex (1, -1) where the ReLU is 0).
    The cut ``relu(x1 + x2) <= x2 + 1`` (``I = {2}``), the one separation finds at the triangle's optimum, makes
    the bound exact: with it the root is proven without a split, without it not."""
    w1 = np.array([[1, 1], [1, 0], [0, 1]], np.float32)
    w2 = np.array([[-1, -1, 1], [0, 0, 0]], np.float32)
    net = certify.mlp([(w1, np.array([0, 10, 10], np.float32)), (w2, np.array([2.5, 0], np.float32))])
    bc = cb.BoundConfig(norm="linf", method="crown", domain=(-1.0, 1.0))
    x = np.zeros(2, np.float32)
    monkeypatch.setattr(bab_cuts, "CUT_THETA0", -2.0)
    plain, cut = (bab.bab_search(net, x, 0, 1.0, bab.bab_config(bc, 1, steps=30, cuts=k)) for k in (0, 1))
    assert not plain.verified and plain.lower == pytest.approx(-0.5, abs=1e-5), plain
    assert cut.verified and 0.0 < cut.lower <= 0.5 + 1e-5, cut


def test_cuts_with_inherited_bounds_and_exact_leaves_stay_below_the_grid_minimum():
    """Cuts together with ``refresh`` (the params hold ``(alpha, beta, theta, hidden bounds)``) on a small MLP
    whose searches reach exact leaves: each search ends, its lower bound stays below the grid's minimum margin
    on the ball, a proof only where that minimum is positive, a counterexample only where it is not."""
    net = _random_mlp([2, 6, 6, 3], 4)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    balls = _balls(net, 3, (0.9, 1.03), 1)
    x0 = np.array([0.1, -0.2], np.float32)
    y0 = int(np.argmax(np.asarray(net.logits(x0[None]))[0]))
    balls.append((x0, y0, np.float32(0.4), _grid_min(net, x0, y0, np.float32(0.4), n=401)))
    for i, (x, y, eps, m) in enumerate(balls):
        res = bab.bab_search(net, x, y, eps, bab.bab_config(bc, 200, steps=5, cuts=1, refresh=1, batch=2))
        assert res.lower <= m + 1e-4 * (1 + abs(m)), (i, res, m)
        assert not res.verified or m > 0, (i, res, m)
        if res.reason == "falsified":
            zz = np.asarray(net.logits(res.x_adv[None].astype(np.float32)))[0]
            assert zz[y] <= np.delete(zz, y).max(), (i, res)


def test_second_layer_lp_bounds_come_after_second_after_subdomains_and_keep_searches_sound(monkeypatch):
    """``second_cuts`` on a small MLP (2-8-8-3): a search still open after ``SECOND_AFTER`` subdomains tightens
    the second layer's root bounds (once) and starts again from the root, its count including the first run's;
    one done before never runs the LPs. Every search's lower bound stays below the grid's minimum margin, a
    proof only where that minimum is positive."""
    net = _random_mlp([2, 8, 8, 3], 6)
    bc = cb.BoundConfig(norm="linf", method="crown", domain=BOX)
    calls = []
    real = bab_host._second_tightened
    monkeypatch.setattr(bab_host, "_second_tightened", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(bab_host, "SECOND_AFTER", 8)
    tightened = plain = 0
    for i, (x, y, eps, m) in enumerate(_balls(net, 4, (0.8, 1.05), 3)):
        calls.clear()
        base = bab.bab_search(net, x, y, eps, bab.bab_config(bc, 300, steps=5, cuts=1, batch=2))
        res = bab.bab_search(net, x, y, eps, bab.bab_config(bc, 300, steps=5, cuts=1, batch=2, second_cuts=2))
        assert res.lower <= m + 1e-4 * (1 + abs(m)) and (not res.verified or m > 0), (i, res, m)
        # the same search up to the restart (a batch of 2 parents bounds 4 children per iteration)
        if base.bounded <= 8:
            assert calls == [] and res.bounded == base.bounded, (i, base, res)   # done before: no LPs
            plain += 1
        elif base.bounded >= 8 + 5:
            assert calls == [1] and res.bounded > 8, (i, base, res)
            tightened += 1
    assert tightened >= 2 and plain >= 2, (tightened, plain)
