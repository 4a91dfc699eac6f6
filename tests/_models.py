"""Small models with exactly known minimal adversarial distances (test helpers)."""
import jax.numpy as jnp
import numpy as np


def linear_data(d: int = 50, n: int = 48, seed: int = 1, b: float = 0.2):
    """A random binary linear problem: ``(w (d,), b, x (n, d), y (n,))``, y = [w.x + b > 0]."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    b = np.float32(b)
    y = (x @ w + b > 0).astype(np.int32)
    return w, b, x, y


def binary_linear(w, b):
    """Two-logit form [-(w.x+b)/2, (w.x+b)/2] of sign(w.x + b) (DESIGN.md)."""
    w = jnp.asarray(w, jnp.float32)

    def logits_fn(x):
        s = x.reshape(x.shape[0], -1) @ w + b
        return jnp.stack([-s / 2, s / 2], axis=-1)

    return logits_fn


def multiclass_linear(W, b):
    W = jnp.asarray(W, jnp.float32)
    b = jnp.asarray(b, jnp.float32)

    def logits_fn(x):
        return x.reshape(x.shape[0], -1) @ W.T + b

    return logits_fn


def dual_norm_q(p):
    return {"linf": 1, "l2": 2, "l1": np.inf}[p]


def exact_binary(w, b, x, norm):
    """Lemma 1 in float64."""
    w = np.asarray(w, np.float64)
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    return np.abs(x @ w + b) / np.linalg.norm(w, dual_norm_q(norm))


def exact_multiclass(W, b, x, y, norm):
    """min_{j != y} |(w_y - w_j).x + b_y - b_j| / ||w_y - w_j||_q; 0 if misclassified."""
    W = np.asarray(W, np.float64)
    b = np.asarray(b, np.float64)
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    z = x @ W.T + b
    out = np.empty(len(x))
    q = dual_norm_q(norm)
    for i in range(len(x)):
        if np.argmax(z[i]) != y[i]:
            out[i] = 0.0
            continue
        best = np.inf
        for j in range(W.shape[0]):
            if j == y[i]:
                continue
            dw = W[y[i]] - W[j]
            best = min(best, (z[i, y[i]] - z[i, j]) / np.linalg.norm(dw, q))
        out[i] = best
    return out


def ball(center, radius):
    """Class 0 inside the l2 ball B(center, radius), class 1 outside."""
    c = jnp.asarray(center, jnp.float32)

    def logits_fn(x):
        r = jnp.sqrt(jnp.sum(jnp.square(x.reshape(x.shape[0], -1) - c), axis=1))
        s = r - radius
        return jnp.stack([-s, s], axis=-1)

    return logits_fn


def exact_ball(center, radius, x, norm):
    """Exact l2 / linf distance to the sphere ||x - c||_2 = radius, in float64."""
    v = np.asarray(x, np.float64).reshape(len(x), -1) - np.asarray(center, np.float64)
    r = np.linalg.norm(v, axis=1)
    if norm == "l2":
        return np.abs(r - radius)
    out = np.empty(len(v))
    for i, vi in enumerate(v):
        a = np.abs(vi)
        if r[i] < radius:
            # leave the ball: smallest t with ||(|v| + t)||_2 = radius
            d = a.size
            B, C = 2 * a.sum(), (a @ a) - radius**2
            out[i] = (-B + np.sqrt(B * B - 4 * d * C)) / (2 * d)
        else:
            # enter the ball: smallest t with ||max(|v| - t, 0)||_2 = radius (monotone)
            lo, hi = 0.0, a.max()
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if np.linalg.norm(np.maximum(a - mid, 0)) > radius:
                    lo = mid
                else:
                    hi = mid
            out[i] = hi
    return out


def counting_linear(w, b, counts):
    """``binary_linear(w, b)`` that counts its evaluations: ``counts['forward']``
    (every call, differentiated or not) and ``counts['backward']`` (every
    gradient), via host callbacks (once per call for a batch of one)."""
    import jax

    base = binary_linear(w, b)

    def bump(key):
        def cb(_):
            counts[key] = counts.get(key, 0) + 1
        return cb

    @jax.custom_vjp
    def logits_fn(x):
        jax.debug.callback(bump("forward"), x.reshape(-1)[0])
        return base(x)

    def fwd(x):
        return logits_fn(x), x

    def bwd(x, ct):
        jax.debug.callback(bump("backward"), x.reshape(-1)[0])
        return jax.vjp(base, x)[1](ct)

    logits_fn.defvjp(fwd, bwd)
    return logits_fn
