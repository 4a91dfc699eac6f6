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


def is_adversarial(logits: jax.Array, y: jax.Array) -> jax.Array:
    """The verification criterion: argmax(logits) != y."""
    return jnp.argmax(logits) != y


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


LOSSES = {"margin": margin, "ce": cross_entropy}


def get_loss(name: str) -> Callable:
    if name not in LOSSES:
        raise ValueError(f"loss: expected one of {sorted(LOSSES)}, got {name!r}")
    return LOSSES[name]


__all__ = ["CONFIDENCE_RTOL", "LOSSES", "confidently_adversarial", "cross_entropy", "get_loss", "is_adversarial", "margin"]
