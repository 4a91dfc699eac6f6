"""attacks: adversarial attacks as pure, jitted JAX functions.

Depends on nothing of ``rcurves``. Every public function takes a
``logits_fn(x_batch) -> logits_batch``, arrays ``x (n, *input_shape)`` and
``y (n,)``, an explicit ``key``, and is one jitted program.
"""
from attacks import checks
