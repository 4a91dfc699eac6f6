"""Attack objectives on one point's logits (maximised by the attacks).

Each loss maps ``(logits (K,), y ())`` to a scalar that the attacker
*maximises*. For every loss here, ``margin(logits, y) > 0`` exactly when
``argmax(logits) != y`` (up to ties), which is what the attacks use to track
adversarial iterates for free from the forward pass.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp


def margin(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Logit margin max_{j != y} z_j - z_y (Carlini & Wagner's f6, negated).

    Positive iff the point is misclassified (strictly; a tie is not counted).
    """
    z_y = logits[y]
    other = jnp.where(jnp.arange(logits.shape[-1]) == y, -jnp.inf, logits)
    return jnp.max(other) - z_y


def cross_entropy(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Cross-entropy -log softmax(z)_y (Madry et al. 2018's PGD objective)."""
    return jax.nn.logsumexp(logits) - logits[y]


def _sorted_desc(logits: jax.Array, k: int) -> jax.Array:
    """The ``k`` largest logits, in descending order."""
    return jax.lax.top_k(logits, k)[0]


def dlr(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Difference of logits ratio (Croce & Hein 2020, eq. 6), to be maximised:

        DLR = -(z_y - max_{j != y} z_j) / (z_pi1 - z_pi3)

    with ``z_pi1 >= z_pi2 >= ...`` the sorted logits: the logit margin made
    invariant to shifts and rescalings of the logits (needs ``K >= 3``).
    """
    top = _sorted_desc(logits, 3)
    return margin(logits, y) / (top[0] - top[2] + 1e-12)


def dlr_targeted(logits: jax.Array, y: jax.Array, t: jax.Array) -> jax.Array:
    """Targeted DLR (Croce & Hein 2020, eq. 7), to be maximised toward class ``t``:

        DLR-T = -(z_y - z_t) / (z_pi1 - (z_pi3 + z_pi4) / 2)

    (needs ``K >= 4``).
    """
    top = _sorted_desc(logits, 4)
    return (logits[t] - logits[y]) / (top[0] - 0.5 * (top[2] + top[3]) + 1e-12)


def margin_targeted(logits: jax.Array, y: jax.Array, t: jax.Array) -> jax.Array:
    """Targeted logit margin ``z_t - z_y``, to be maximised toward class ``t``."""
    return logits[t] - logits[y]


def is_adversarial(logits: jax.Array, y: jax.Array) -> jax.Array:
    """The verification criterion: argmax(logits) != y, with every logit finite (a model that
    returns NaN or inf at a point has not been fooled there, it has failed)."""
    return (jnp.argmax(logits) != y) & jnp.all(jnp.isfinite(logits))


#: Relative logit-margin tolerance of :func:`confidently_adversarial`.
CONFIDENCE_RTOL = 1e-5


def confidently_adversarial(logits: jax.Array, y: jax.Array, rtol: float = CONFIDENCE_RTOL) -> jax.Array:
    """Misclassified with a margin above float noise: ``margin > rtol * max(1, max|z|)``.

    The attacks only *keep* iterates that pass this stricter test, so that the
    final re-check (a separate, batched forward pass whose float rounding may
    differ in the last bits) confirms them.
    """
    tol = rtol * jnp.maximum(1.0, jnp.max(jnp.abs(logits)))
    return (margin(logits, y) > tol) & (jnp.argmax(logits) != y)


LOSSES = {"margin": margin, "ce": cross_entropy, "dlr": dlr}
#: Losses of one more argument, the target class: ``loss(logits, y, t)``.
TARGETED_LOSSES = {"dlr-t": dlr_targeted, "margin-t": margin_targeted}
#: Fewest classes each loss is defined for.
MIN_CLASSES = {"margin": 2, "ce": 2, "dlr": 3, "dlr-t": 4, "margin-t": 2}


def get_loss(name: str) -> Callable:
    """The loss called ``name``: ``loss(logits, y)``, or ``loss(logits, y, t)``
    for the targeted ones (``TARGETED_LOSSES``)."""
    table = {**LOSSES, **TARGETED_LOSSES}
    if name not in table:
        raise ValueError(f"loss: expected one of {sorted(table)}, got {name!r}")
    return table[name]


__all__ = ["CONFIDENCE_RTOL", "LOSSES", "MIN_CLASSES", "TARGETED_LOSSES", "confidently_adversarial", "cross_entropy",
           "dlr", "dlr_targeted", "get_loss", "margin_targeted", "is_adversarial", "margin"]
