"""attacks: adversarial attacks as pure, jitted JAX functions.

Depends on nothing of ``rcurves``. Every public function takes a
``logits_fn(x_batch) -> logits_batch``, arrays ``x (n, *input_shape)`` and
``y (n,)``, an explicit ``key``, and is one jitted program.
"""
from attacks import checks, xla
from attacks.losses import cross_entropy, margin
from attacks.minimal import minimal_distance
from attacks.pgd import pgd
from attacks.result import MinimalResult, verify
from attacks.cw import carlini_wagner_l2
from attacks.ddn import ddn
from attacks.fmn import fmn
from attacks.cap import ConstrainedResult, cap_pgd, cap_pgd_result, project_cap
from attacks.vertex import vertex_pgd, vertex_pgd_result
from attacks.ensemble import APGDT, CW, DDN, FMN, EnsembleResult, Search, default_attacks, ensemble
