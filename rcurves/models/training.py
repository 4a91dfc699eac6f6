"""Standard, adversarial, TRADES and certified (IBP, CROWN-IBP) training with optax.

Training objectives (paper 000, Section 3.1; ``TrainConfig.method``):

* ST, standard training: minimise the empirical cross-entropy
  ``E_(x,y) CE(f(x), y)``.
* AT, adversarial training (Madry et al. 2018): minimise the robust loss
  ``E_(x,y) max_{||delta||_p <= eps} CE(f(x + delta), y)``, with the inner
  maximum approximated by fixed-step PGD from a uniform random start
  (``attacks.pgd`` with ``loss='ce'``, step ``rel_step * eps / steps``; Madry
  et al. use 2.5 eps / steps), in l_inf or l_2, clipped to the input box.
  Every example of the batch is replaced by its adversarial example.
* TRADES (Zhang et al. 2019, the objective of their Algorithm 1): minimise
  ``E_(x,y) [CE(f(x), y) + beta * KL(softmax f(x) || softmax f(x_adv))]``,
  ``beta = trades_beta``, where ``x_adv`` approximately maximises the KL
  term over ``{||x' - x||_p <= eps} ∩ box``: ``attack_steps`` steepest-ascent
  steps of size ``rel_step * eps / attack_steps`` (sign of the gradient for
  l_inf, normalised gradient for l_2), each projected onto the ball and
  clipped to the box, from ``x + 0.001 N(0, I)`` clipped to the box; the
  last iterate is used (:func:`trades_attack`). ``softmax f(x)`` is a constant
  of the attack; the outer loss differentiates both of its arguments.
* IBP (Gowal et al. 2018) and CROWN-IBP (Zhang et al. 2020, "Towards stable
  and efficient training of verifiably robust neural networks"): minimise
  ``E_(x,y) [kappa CE(f(x), y) + (1 - kappa) CE(-m(x, eps), y)]`` where
  ``m_j(x, eps) <= min_{x' in ball} z_y(x') - z_j(x')`` is a sound lower
  bound of the margins (``m_y = 0``), so ``-m`` are the worst-case logits
  relative to the true class and the second term upper-bounds the robust
  cross-entropy (``CE(-m, y) >= max_{x'} CE(f(x'), y)``). IBP:
  ``m = m_IBP`` (interval bounds, the spec merged into the last layer);
  CROWN-IBP: ``m = beta_mix m_CROWN-IBP + (1 - beta_mix) m_IBP``. Both
  bounds are those of the verifiers, ``rcurves.nets.bounds``
  (:func:`rcurves.nets.bounds.training_margins` on
  ``models.network.to_network(model_cfg, params)`` with the traced parameters), in
  l_inf, l_2 or l_1, the ball intersected with the input box; architectures
  'linear', 'mlp' and 'cnn' (:data:`rcurves.nets.layers.CERTIFIABLE_ARCHS`).
* MMR (Croce, Andriushchenko & Hein 2019, the Maximum Margin Regulariser):
  minimise ``E_(x,y) [CE(f(x), y) + rho_t lambda MMR_p(x)]``, ``MMR_p`` the
  hinge on the ``k_B`` smallest l_p distances of ``x`` to the hyperplanes of
  its linear region (``gamma_B``) and the ``k_D`` smallest to the decision
  hyperplanes of the region's affine map (``gamma_D``), ``p = norm``
  (:mod:`rcurves.models.mmr`, which has the formulas and how the Jacobian
  rows are computed). MMR + AT (the paper's "MMR + AT", method 4 of paper
  000): ``mmr_at_frac`` of every batch (0.5 in the paper: its first half)
  is replaced by its PGD adversarial examples at radius ``eps`` (as AT, a
  constant radius: the authors do not ramp it) and both terms are taken on
  that mixed batch, as in the authors' code. MMR-Universal (Croce & Hein
  2020, ``'mmr-univ'``, method 5): ``CE + rho_t (lambda_1 MMR_1(x; gamma_1) +
  lambda_inf MMR_inf(x; gamma_inf))`` on clean batches. ``k_B`` is a fraction
  of the hidden units that falls linearly over the run, per epoch (the
  authors: 10 % -> 2 % for MMR, 20 % -> 5 % for MMR-Universal); ``rho_t`` is the
  warm-up ramp below (the authors ramp ``lambda`` over the first 10 epochs).
  Architectures 'linear' (decision term only), 'mlp' and 'cnn'.

Schedules. ``warmup_epochs`` sets a ramp ``rho_t = min(1, (t + 1) / (warmup_epochs
* steps_per_epoch))`` over updates ``t`` (``rho = 1`` without warm-up): every
robust method trains at ``eps_t = rho_t eps``; the certified methods use
``kappa_t = 1 - rho_t (1 - kappa_final)`` (Gowal et al.: 1 -> 0.5) and
CROWN-IBP ``beta_mix_t = 1 - rho_t`` (Zhang et al.: 1 -> 0, so after the ramp
CROWN-IBP trains on IBP's bound; its back-substitution is then skipped). The
three values enter the jitted step as traced scalars (:func:`schedule`).

Optimiser: Adam (paper 000, Appendix C.1: learning rate 1e-3, batch size 128),
with a constant learning rate or a cosine decay to 0 over the run
(``lr_schedule``). An optional linear warm-up of ``eps`` over the first epochs
helps large-eps AT start from a random initialisation.

Data augmentation (``augment``, for the models of paper 004, Table 1): random
shifts of up to ``shift`` pixels with zero fill (``'shift'``), additive
Gaussian noise of standard deviation ``noise_std`` clipped to the box
(``'noise'``), mixup with ``Beta(mixup_alpha, mixup_alpha)`` weights
(``'mixup'``, Zhang et al. 2018), cutout of a ``cutout`` x ``cutout``
square set to 0 (``'cutout'``, DeVries & Taylor 2017), CutMix (``'cutmix'``,
Yun et al. 2019: a box of area fraction ``1 - lam``, ``lam ~ Beta(1, 1)``,
pasted from another image of the batch, labels mixed by area) and RICAP
(``'ricap'``, Takahashi et al. 2018: four images cropped around a boundary
point drawn from ``Beta(ricap_beta, ricap_beta)`` per axis and tiled, labels
mixed by area). ``augment_prob`` < 1 applies it to that fraction of the
examples only (004 Table 3's "50 %" rows). Augmentation is drawn from its
own key inside the jitted step and applied before the AT attack; mixing
augmentations train on soft labels, and AT attacks the label of the
largest share.

One jitted ``train_step(state, x, y, key, eps, lr, kappa, beta_mix, mmr_ramp, mmr_k_b) -> (state, metrics)``
does the attack (or the bound), the gradient and the update; the driver :func:`train` loops over
shuffled mini-batches (gathered on the host, so the loop runs no other
device operations). Everything is deterministic in the key: batch order
uses ``fold_in(data_key, epoch)``, the attack of update ``t`` uses
``fold_in(attack_key, t)``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import attacks
from attacks import checks
from rcurves.models.architectures import ModelConfig, Params, apply_fn, init_params, make_logits_fn

METHODS = ("st", "at", "trades", "ibp", "crown-ibp", "mmr", "mmr-univ")
ROBUST = ("at", "trades", "ibp", "crown-ibp")   # methods that train at a radius eps > 0
CERTIFIED = ("ibp", "crown-ibp")               # methods that train on nets.bounds' margin bounds
MMR_METHODS = ("mmr", "mmr-univ")               # methods that add the Maximum Margin Regulariser (models.mmr)
#: k_B schedule (fraction of the hidden units at the first and the last epoch) of each MMR method,
#: the authors' code: 10 % -> 2 % (Croce et al. 2019), 20 % -> 5 % (Croce & Hein 2020)
MMR_K_B = {"mmr": (0.1, 0.02), "mmr-univ": (0.2, 0.05)}
#: largest number of Jacobian entries (batch x inputs x rows) of the exact, all-units MMR step
MMR_EXACT_BUDGET = 2 ** 27
# fields added with MMR: default, and the methods that use it
_MMR_FIELDS = {
    "mmr_lambda": (0.5, ("mmr",)), "mmr_gamma_b": (0.2, ("mmr",)), "mmr_gamma_d": (0.2, ("mmr",)),
    "mmr_k_b": (None, MMR_METHODS), "mmr_k_d": (None, MMR_METHODS), "mmr_units": (None, MMR_METHODS),
    "mmr_at_frac": (0.0, ("mmr",)),
    "mmr_lambda_l1": (3.0, ("mmr-univ",)), "mmr_lambda_linf": (12.0, ("mmr-univ",)),
    "mmr_gamma_l1": (1.0, ("mmr-univ",)), "mmr_gamma_linf": (0.175, ("mmr-univ",)),
}
TRADES_START_STD = 0.001                        # TRADES's random start x + 0.001 N(0, I) (Zhang et al. 2019)
AUGMENTS = ("none", "shift", "noise", "mixup", "cutout", "cutmix", "ricap")
MIXING = ("mixup", "cutmix", "ricap")   # augmentations that mix images and their labels
LR_SCHEDULES = ("constant", "cosine")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Static description of a training run.

    Attributes:
      method: 'st' (standard), 'at' (PGD adversarial training), 'trades',
        'ibp' or 'crown-ibp' (certified training); see the module docstring.
      norm: threat model of the robust methods, 'linf' or 'l2' (ignored for ST).
      eps: training radius in ``norm`` units (inputs in ``bounds``); > 0 for
        every method but ST.
      epochs: passes over the training set.
      batch_size: examples per step (the last partial batch of an epoch is
        dropped, so every step has the same shape and one compilation).
      lr: Adam learning rate.
      attack_steps: PGD steps of the inner maximisation (AT, TRADES).
      rel_step: PGD step size as a multiple of ``eps / attack_steps``.
      warmup_epochs: epochs of the ramp over which ``eps`` grows linearly
        from 0 (every robust method), ``kappa`` falls from 1 to
        ``kappa_final`` and ``beta_mix`` from 1 to 0 (certified methods);
        > 0 for 'crown-ibp' (without the ramp it is IBP).
      bounds: input box ``(lo, hi)`` or None.
      seed: the training key is ``PRNGKey(seed)`` unless one is passed.
      lr_schedule: 'constant' or 'cosine' (decay from ``lr`` to 0 over all
        updates).
      augment: 'none', 'shift', 'noise', 'mixup' or 'cutout' (module doc).
      shift: largest shift in pixels per axis ('shift'; images only).
      noise_std: standard deviation of the Gaussian noise ('noise').
      mixup_alpha: Beta parameter of the mixing weight ('mixup').
      cutout: side of the square set to 0 ('cutout'; images only).
      ricap_beta: Beta parameter of RICAP's boundary point ('ricap').
      augment_prob: fraction of the examples augmented (each independently).
      trades_beta: TRADES's weight ``beta`` of the KL term (> 0; Zhang et al.
        2019 use 6 on MNIST and CIFAR-10).
      kappa_final: certified methods: weight of the clean cross-entropy at the
        end of the ramp, in [0, 1] (Gowal et al. 2018: 0.5).

    MMR fields (:mod:`rcurves.models.mmr`; each left out of :meth:`to_dict` at its
    default). Defaults are the authors' MNIST values: those of the MMR + AT
    l_inf C.1 CNN of paper 000's Figure 3 (their released model "mnist
    cnn_lenet_small p_norm=inf lmbd=0.5 gamma_rb=0.2 gamma_db=0.2 ae_frac=0.5",
    PGD eps 0.1, 100 epochs, lambda ramped over 10 epochs) and of the
    MMR-Universal MNIST CNN paper 000 evaluates ("mmr_univ_mnist gammas 1.0
    0.175 lambdas 3.0 12.0", learning rate 5e-4, no AT). Their other MNIST
    models: MMR l_inf CNN lambda 1, gamma 0.2; MMR l_inf MLP (1024 units) lambda 2,
    gamma 0.1, with AT lambda 1, gamma 0.1; MMR l_2 CNN lambda 3, gamma 0.45 (lr
    1e-4), with AT lambda 6, gamma 0.45 (lr 5e-5, PGD eps 0.3); MMR l_2 MLP
    lambda 1.5, gamma 0.6 (lr 1e-4), with AT lambda 0.5, gamma 0.45 (lr 5e-5);
    PGD with 40 steps on MNIST.

      mmr_lambda: 'mmr': weight ``lambda`` of ``MMR_p`` (> 0; 0.5).
      mmr_gamma_b: 'mmr': ``gamma_B``, the facet distance (in ``norm`` units)
        beyond which a region hyperplane is not pushed (> 0; 0.2).
      mmr_gamma_d: 'mmr': ``gamma_D``, the same for the decision hyperplanes (0.2).
      mmr_k_b: fraction of the hidden units (of the sampled ones with
        ``mmr_units``) whose facet distances are averaged: a number in (0, 1]
        (constant) or a pair ``(first, last)`` interpolated linearly per epoch,
        ``k_B = max(1, floor(frac_e * U))`` with ``frac_e = first + (last -
        first) * e / epochs`` at epoch ``e = 1..epochs`` (the authors' code);
        None: :data:`MMR_K_B` of the method.
      mmr_k_d: ``k_D``, the number of smallest decision distances averaged
        (1..K-1); None: all ``K - 1`` (the authors').
      mmr_units: None: every hidden unit's row (exact); an int ``m``: a random
        stratified sample of ``m`` hidden units per point and step (needed for
        the C.1 CNN on MNIST; e.g. 64).
      mmr_at_frac: 'mmr': fraction of each batch replaced by PGD adversarial
        examples at radius ``eps`` (MMR + AT: 0.5; 0 is plain MMR, ``eps`` 0).
      mmr_lambda_l1, mmr_lambda_linf: 'mmr-univ': ``lambda_1`` (3) and
        ``lambda_inf`` (12), >= 0, not both 0.
      mmr_gamma_l1, mmr_gamma_linf: 'mmr-univ': ``gamma_1`` (1.0) and
        ``gamma_inf`` (0.175), > 0.
    """

    method: str = "st"
    norm: str = "linf"
    eps: float = 0.0
    epochs: int = 10
    batch_size: int = 128
    lr: float = 1e-3
    attack_steps: int = 10
    rel_step: float = 2.5
    warmup_epochs: float = 0.0
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0)
    seed: int = 0
    lr_schedule: str = "constant"
    augment: str = "none"
    shift: int = 2
    noise_std: float = 0.3
    mixup_alpha: float = 1.0
    cutout: int = 10
    ricap_beta: float = 0.3
    augment_prob: float = 1.0
    trades_beta: float = 6.0
    kappa_final: float = 0.5
    mmr_lambda: float = 0.5
    mmr_gamma_b: float = 0.2
    mmr_gamma_d: float = 0.2
    mmr_k_b: Optional[Tuple[float, float]] = None
    mmr_k_d: Optional[int] = None
    mmr_units: Optional[int] = None
    mmr_at_frac: float = 0.0
    mmr_lambda_l1: float = 3.0
    mmr_lambda_linf: float = 12.0
    mmr_gamma_l1: float = 1.0
    mmr_gamma_linf: float = 0.175

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {self.method!r}")
        object.__setattr__(self, "norm", checks.check_norm(self.norm))
        object.__setattr__(self, "eps", float(checks.check_positive_float(self.eps, "eps", allow_zero=True)))
        if self.method in ROBUST and self.eps <= 0:
            raise ValueError(f"eps: method {self.method!r} trains at a radius eps > 0, got {self.eps!r}")
        checks.check_positive_int(self.epochs, "epochs")
        checks.check_positive_int(self.batch_size, "batch_size")
        checks.check_positive_int(self.attack_steps, "attack_steps")
        object.__setattr__(self, "lr", checks.check_positive_float(self.lr, "lr"))
        object.__setattr__(self, "rel_step", checks.check_positive_float(self.rel_step, "rel_step"))
        object.__setattr__(
            self, "warmup_epochs",
            checks.check_positive_float(self.warmup_epochs, "warmup_epochs", allow_zero=True),
        )
        b = checks.check_bounds(self.bounds)
        object.__setattr__(self, "bounds", b)
        checks.check_choice(self.lr_schedule, LR_SCHEDULES, "lr_schedule")
        checks.check_choice(self.augment, AUGMENTS, "augment")
        checks.check_positive_int(self.shift, "shift", minimum=0)
        checks.check_positive_int(self.cutout, "cutout")
        object.__setattr__(self, "noise_std", checks.check_positive_float(self.noise_std, "noise_std"))
        object.__setattr__(self, "mixup_alpha", checks.check_positive_float(self.mixup_alpha, "mixup_alpha"))
        object.__setattr__(self, "ricap_beta", checks.check_positive_float(self.ricap_beta, "ricap_beta"))
        p = checks.check_positive_float(self.augment_prob, "augment_prob")
        if p > 1.0:
            raise ValueError(f"augment_prob: expected a fraction in (0, 1], got {self.augment_prob!r}")
        object.__setattr__(self, "augment_prob", p)
        object.__setattr__(self, "trades_beta", checks.check_positive_float(self.trades_beta, "trades_beta"))
        try:
            kf = float(self.kappa_final)
        except (TypeError, ValueError):
            kf = math.nan
        if isinstance(self.kappa_final, bool) or not 0.0 <= kf <= 1.0:
            raise ValueError(f"kappa_final: expected a weight in [0, 1], got {self.kappa_final!r}")
        object.__setattr__(self, "kappa_final", kf)
        if self.method == "crown-ibp" and self.warmup_epochs <= 0:
            raise ValueError(
                "warmup_epochs: method 'crown-ibp' mixes CROWN-IBP's bound into IBP's with a weight "
                "that falls from 1 to 0 over the warm-up (Zhang et al. 2020); with warmup_epochs=0 it "
                "is 'ibp': pass warmup_epochs > 0 or method='ibp'")
        self._check_mmr()

    def _check_mmr(self):
        for name in ("mmr_lambda", "mmr_gamma_b", "mmr_gamma_d", "mmr_gamma_l1", "mmr_gamma_linf"):
            object.__setattr__(self, name, checks.check_positive_float(getattr(self, name), name))
        for name in ("mmr_lambda_l1", "mmr_lambda_linf"):
            object.__setattr__(self, name, checks.check_positive_float(getattr(self, name), name, allow_zero=True))
        if self.mmr_lambda_l1 == 0 and self.mmr_lambda_linf == 0:
            raise ValueError("mmr_lambda_l1: mmr_lambda_l1 and mmr_lambda_linf are both 0 (no regulariser)")
        kb = self.mmr_k_b
        if kb is not None:
            pair = tuple(kb) if isinstance(kb, (list, tuple)) else (kb, kb)
            try:
                ok = len(pair) == 2 and not any(isinstance(v, bool) for v in pair)
                pair = tuple(float(v) for v in pair) if ok else ()
            except (TypeError, ValueError):
                pair = ()
            if len(pair) != 2 or not all(0.0 < v <= 1.0 for v in pair):
                raise ValueError(f"mmr_k_b: expected a fraction of the hidden units in (0, 1] or a pair "
                                 f"(first, last) of them, got {kb!r}")
            object.__setattr__(self, "mmr_k_b", pair)
        if self.mmr_k_d is not None:
            checks.check_positive_int(self.mmr_k_d, "mmr_k_d")
        if self.mmr_units is not None:
            checks.check_positive_int(self.mmr_units, "mmr_units")
        try:
            af = float(self.mmr_at_frac)
        except (TypeError, ValueError):
            af = math.nan
        if isinstance(self.mmr_at_frac, bool) or not 0.0 <= af <= 1.0:
            raise ValueError(f"mmr_at_frac: expected a fraction in [0, 1], got {self.mmr_at_frac!r}")
        object.__setattr__(self, "mmr_at_frac", af)
        for name, (default, users) in _MMR_FIELDS.items():
            if self.method not in users and getattr(self, name) != default:
                raise ValueError(f"{name}: used by method {' or '.join(repr(u) for u in users)} only, "
                                 f"not by {self.method!r} (got {getattr(self, name)!r})")
        if self.method == "mmr":
            if self.mmr_at_frac > 0 and self.eps <= 0:
                raise ValueError(f"eps: MMR + AT (mmr_at_frac={self.mmr_at_frac:g}) attacks at a radius eps > 0, "
                                 f"got {self.eps!r}")
            if self.mmr_at_frac == 0 and self.eps != 0:
                raise ValueError(f"eps: method 'mmr' uses eps only as the PGD radius of MMR + AT (mmr_at_frac > 0); "
                                 f"its margins are mmr_gamma_b / mmr_gamma_d; got eps={self.eps!r} with mmr_at_frac=0")
        if self.method == "mmr-univ" and self.eps != 0:
            raise ValueError(f"eps: method 'mmr-univ' trains on clean points (Croce & Hein 2020); its margins are "
                             f"mmr_gamma_l1 / mmr_gamma_linf; got eps={self.eps!r}")

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict; augmentation settings that the chosen ``augment``
        does not use, and the defaults of fields added later, are left out, so
        configurations written before those fields existed keep their cache keys."""
        d = dataclasses.asdict(self)
        d["bounds"] = list(self.bounds) if self.bounds is not None else None
        used = {"shift": "shift", "noise": "noise_std", "mixup": "mixup_alpha", "cutout": "cutout",
                "ricap": "ricap_beta"}
        for name in ("shift", "noise_std", "mixup_alpha", "cutout", "ricap_beta"):
            if used.get(self.augment) != name:
                d.pop(name)
        for name, default in (("lr_schedule", "constant"), ("augment", "none"), ("augment_prob", 1.0),
                              ("trades_beta", 6.0), ("kappa_final", 0.5)):
            if d[name] == default:
                d.pop(name)
        for name, (default, _) in _MMR_FIELDS.items():
            if d[name] == default:
                d.pop(name)
        if "mmr_k_b" in d:
            d["mmr_k_b"] = list(self.mmr_k_b)
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        extra = set(d) - names
        if extra:
            raise ValueError(f"train config: unknown fields {sorted(extra)}")
        kw = dict(d)
        if kw.get("bounds") is not None:
            kw["bounds"] = tuple(kw["bounds"])
        return cls(**kw)

    @property
    def name(self) -> str:
        """Short label, e.g. 'ST', 'AT-linf-0.3', 'ST+shift', 'TRADES-linf-0.3', 'CROWN-IBP-linf-0.1',
        'MMR-linf', 'MMR+AT-linf-0.1', 'MMR-UNIV'."""
        if self.method == "st":
            base = "ST"
        elif self.method == "mmr":
            base = f"MMR-{self.norm}" if self.mmr_at_frac == 0 else f"MMR+AT-{self.norm}-{self.eps:g}"
            if (self.mmr_lambda, self.mmr_gamma_b, self.mmr_gamma_d) != (0.5, 0.2, 0.2):
                base += f"-lam{self.mmr_lambda:g}-gam{self.mmr_gamma_b:g}"
                base += "" if self.mmr_gamma_d == self.mmr_gamma_b else f",{self.mmr_gamma_d:g}"
        elif self.method == "mmr-univ":
            base = "MMR-UNIV"
            if (self.mmr_lambda_l1, self.mmr_lambda_linf, self.mmr_gamma_l1, self.mmr_gamma_linf) != (
                    3.0, 12.0, 1.0, 0.175):
                base += (f"-lam{self.mmr_lambda_l1:g},{self.mmr_lambda_linf:g}"
                         f"-gam{self.mmr_gamma_l1:g},{self.mmr_gamma_linf:g}")
        else:
            base = f"{self.method.upper()}-{self.norm}-{self.eps:g}"
        if self.method == "at" and self.attack_steps == 1:
            base += "-1step"
        if self.method == "trades" and self.trades_beta != 6.0:
            base += f"-beta{self.trades_beta:g}"
        if self.method in CERTIFIED and self.kappa_final != 0.5:
            base += f"-kappa{self.kappa_final:g}"
        if self.augment == "none":
            return base
        return f"{base}+{self.augment}" + ("" if self.augment_prob == 1.0 else f"{self.augment_prob:.0%}")


class TrainState(NamedTuple):
    params: Params      # model parameters (pytree of float32 arrays)
    opt_state: Any      # optax state
    step: jax.Array     # () int32, number of updates done


class TrainResult(NamedTuple):
    params: Params
    history: List[Dict[str, float]]  # one dict per epoch: loss, accuracy, eps[, val_accuracy][, kappa, mmr, ...]


def make_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    """Adam's update direction (paper 000, Appendix C.1), without the learning rate.

    The step multiplies it by ``-lr_t``, passed to it per update
    (:func:`learning_rate`), so one compiled step serves every schedule and
    run length; with a constant ``lr_t = cfg.lr`` this is ``optax.adam(cfg.lr)``.
    """
    return optax.scale_by_adam()


def learning_rate(cfg: TrainConfig, step: int, total_steps: int) -> float:
    """Learning rate of update ``step`` (0-based) of ``total_steps``:
    ``cfg.lr``, or ``cfg.lr * (1 + cos(pi * step / total_steps)) / 2`` for 'cosine'."""
    if cfg.lr_schedule == "cosine":
        return float(cfg.lr * 0.5 * (1.0 + np.cos(np.pi * min(step, total_steps) / max(total_steps, 1))))
    return float(cfg.lr)


def augment_batch(cfg: TrainConfig, x: jax.Array, key: jax.Array) -> jax.Array:
    """One random augmentation of a batch ``x (b, *input_shape)`` (not mixup).

    'shift': each image moved by an integer offset drawn uniformly from
    ``[-shift, shift]`` per spatial axis, vacated pixels 0 (inputs of shape
    ``(H, W)`` or ``(H, W, C)``). 'noise': ``x + N(0, noise_std^2)`` clipped to
    ``cfg.bounds``. 'cutout': a ``cutout x cutout`` square (centre uniform over
    the image, clipped at its border) set to 0. 'none' and 'mixup': ``x``.
    """
    if cfg.augment == "noise":
        out = x + cfg.noise_std * jax.random.normal(key, x.shape, x.dtype)
        return out if cfg.bounds is None else jnp.clip(out, cfg.bounds[0], cfg.bounds[1])
    if cfg.augment not in ("shift", "cutout"):
        return x
    if x.ndim not in (3, 4):
        raise ValueError(f"augment={cfg.augment!r}: needs image inputs (b, H, W[, C]), got shape {x.shape}")
    h, w = x.shape[1], x.shape[2]
    rows = jnp.arange(h)[:, None]
    cols = jnp.arange(w)[None, :]
    if cfg.augment == "shift":
        s = cfg.shift
        offs = jax.random.randint(key, (x.shape[0], 2), -s, s + 1)

        def shift_one(img, off):
            pad = [(s, s), (s, s)] + [(0, 0)] * (img.ndim - 2)
            big = jnp.pad(img, pad)
            start = (s - off[0], s - off[1]) + (0,) * (img.ndim - 2)
            return jax.lax.dynamic_slice(big, start, img.shape)

        return jax.vmap(shift_one)(x, offs)
    centres = jax.random.randint(key, (x.shape[0], 2), 0, jnp.array([h, w]))
    half = cfg.cutout // 2

    def cut_one(img, c):
        inside = ((rows >= c[0] - half) & (rows < c[0] - half + cfg.cutout)
                  & (cols >= c[1] - half) & (cols < c[1] - half + cfg.cutout))
        inside = inside.reshape(inside.shape + (1,) * (img.ndim - 2))
        return jnp.where(inside, jnp.zeros((), img.dtype), img)

    return jax.vmap(cut_one)(x, centres)


def mix_batch(cfg: TrainConfig, x: jax.Array, targets: jax.Array, key: jax.Array) -> Tuple[jax.Array, jax.Array]:
    """One random mixing augmentation of a batch: ``(x (b, ...), targets (b, K))`` -> mixed pair.

    ``targets`` are label distributions (one-hot for plain labels); the mixed
    targets weight each source image's by its share of the output.

    'mixup': one ``lam ~ Beta(mixup_alpha, mixup_alpha)`` per batch,
    ``x' = lam x + (1 - lam) x[perm]``. 'cutmix' (per example): ``lam ~ U(0, 1)``,
    a box of side ``sqrt(1 - lam)`` times the image's, centred uniformly and
    clipped at the border, taken from ``x[perm]``; the weight is the pasted
    area. 'ricap' (per example): a boundary point ``(h, w)`` with
    ``h / H, w / W ~ Beta(ricap_beta, ricap_beta)`` splits the output in four
    rectangles, each filled from a random crop of the same size of another
    image of the batch (four permutations); weights are the areas.
    """
    b = x.shape[0]
    if cfg.augment == "mixup":
        k_lam, k_perm = jax.random.split(key)
        lam = jax.random.beta(k_lam, cfg.mixup_alpha, cfg.mixup_alpha).astype(x.dtype)
        perm = jax.random.permutation(k_perm, b)
        return lam * x + (1.0 - lam) * x[perm], lam * targets + (1.0 - lam) * targets[perm]
    if x.ndim not in (3, 4):
        raise ValueError(f"augment={cfg.augment!r}: needs image inputs (b, H, W[, C]), got shape {x.shape}")
    h, w = x.shape[1], x.shape[2]
    rows = jnp.arange(h)[:, None]
    cols = jnp.arange(w)[None, :]

    def expand(m, img):
        return m.reshape(m.shape + (1,) * (img.ndim - 2))

    if cfg.augment == "cutmix":
        k_lam, k_c, k_perm = jax.random.split(key, 3)
        lam = jax.random.uniform(k_lam, (b,))
        centres = jax.random.uniform(k_c, (b, 2)) * jnp.array([h, w])
        perm = jax.random.permutation(k_perm, b)

        def one(img, other, l, c):
            r = jnp.sqrt(1.0 - l)
            r0 = jnp.clip(jnp.round(c[0] - r * h / 2), 0, h)
            r1 = jnp.clip(jnp.round(c[0] + r * h / 2), 0, h)
            c0 = jnp.clip(jnp.round(c[1] - r * w / 2), 0, w)
            c1 = jnp.clip(jnp.round(c[1] + r * w / 2), 0, w)
            box = (rows >= r0) & (rows < r1) & (cols >= c0) & (cols < c1)
            return jnp.where(expand(box, img), other, img), jnp.mean(box)

        xs, share = jax.vmap(one)(x, x[perm], lam, centres)
        share = share.astype(targets.dtype)[:, None]
        return xs, (1.0 - share) * targets + share * targets[perm]
    # ricap
    k_b, k_off, k_perm = jax.random.split(key, 3)
    frac = jax.random.beta(k_b, cfg.ricap_beta, cfg.ricap_beta, (b, 2))
    bh = jnp.round(frac[:, 0] * h).astype(jnp.int32)
    bw = jnp.round(frac[:, 1] * w).astype(jnp.int32)
    perms = jax.vmap(lambda k: jax.random.permutation(k, b))(jax.random.split(k_perm, 4))   # (4, b)
    u = jax.random.uniform(k_off, (4, b, 2))

    def one(i, bh_i, bw_i, u_i):
        # quadrants: 0 top-left (bh, bw), 1 top-right (bh, w - bw), 2 bottom-left, 3 bottom-right
        top = rows < bh_i
        left = cols < bw_i
        quad = jnp.where(top, 0, 2) + jnp.where(left, 0, 1)                 # (h, w)
        qh = jnp.array([bh_i, bh_i, h - bh_i, h - bh_i])
        qw = jnp.array([bw_i, w - bw_i, bw_i, w - bw_i])
        qr0 = jnp.array([0, 0, bh_i, bh_i])
        qc0 = jnp.array([0, bw_i, 0, bw_i])
        oy = jnp.floor(u_i[:, 0] * (h - qh + 1)).astype(jnp.int32)          # crop origin in the source
        ox = jnp.floor(u_i[:, 1] * (w - qw + 1)).astype(jnp.int32)
        src_r = jnp.clip(rows - qr0[quad] + oy[quad], 0, h - 1)
        src_c = jnp.clip(cols - qc0[quad] + ox[quad], 0, w - 1)
        src = perms[:, i][quad]                                              # (h, w) source image per pixel
        img = x[src, src_r, src_c]
        share = (qh * qw).astype(targets.dtype) / (h * w)
        return img, share @ targets[perms[:, i]]

    return jax.vmap(one)(jnp.arange(b), bh, bw, jnp.swapaxes(u, 0, 1))


def augment(cfg: TrainConfig, x: jax.Array, targets: jax.Array, key: jax.Array) -> Tuple[jax.Array, jax.Array]:
    """``cfg.augment`` applied to a batch ``(x (b, ...), targets (b, K))``, to each example
    independently with probability ``cfg.augment_prob`` (the others are returned unchanged)."""
    if cfg.augment == "none":
        return x, targets
    k_do, k_apply = jax.random.split(key)
    if cfg.augment in MIXING:
        x_new, t_new = mix_batch(cfg, x, targets, k_do)
    else:
        x_new, t_new = augment_batch(cfg, x, k_do), targets
    if cfg.augment_prob >= 1.0:
        return x_new, t_new
    on = jax.random.bernoulli(k_apply, cfg.augment_prob, (x.shape[0],))
    return (jnp.where(on.reshape((-1,) + (1,) * (x.ndim - 1)), x_new, x),
            jnp.where(on[:, None], t_new, targets))


# ---------------------------------------------------------------------------
# TRADES


def kl_softmax(logits_p: jax.Array, logits_q: jax.Array) -> jax.Array:
    """``KL(softmax(logits_p) || softmax(logits_q))`` per row, in nats: ``(b, K), (b, K) -> (b,)``.

    ``sum_k p_k (log p_k - log q_k)`` with both logs from ``log_softmax``
    (finite for any finite logits; 0 where the rows are equal)."""
    lp = jax.nn.log_softmax(logits_p, axis=-1)
    lq = jax.nn.log_softmax(logits_q, axis=-1)
    return jnp.sum(jnp.exp(lp) * (lp - lq), axis=-1)


def trades_loss(logits_clean: jax.Array, logits_adv: jax.Array, targets: jax.Array, beta) -> jax.Array:
    """TRADES's loss of a batch (Zhang et al. 2019), a scalar:
    ``mean_i [CE(z_i, t_i) + beta * KL(softmax z_i || softmax z_adv_i)]``.

    ``logits_clean`` ``z (b, K)`` at the clean points, ``logits_adv (b, K)`` at
    their adversarial points, ``targets (b, K)`` label distributions (one-hot
    for plain labels), ``beta`` a scalar >= 0 (``beta = 0``: the clean
    cross-entropy). Differentiable in both logits."""
    ce = optax.softmax_cross_entropy(logits_clean, targets)
    return jnp.mean(ce + beta * kl_softmax(logits_clean, logits_adv))


def trades_start(x: jax.Array, key: jax.Array, bounds: Optional[Tuple[float, float]]) -> jax.Array:
    """TRADES's random start ``x + 0.001 N(0, I)`` (Zhang et al. 2019's code), clipped to ``bounds``;
    ``x (b, *input_shape)``."""
    x0 = x + TRADES_START_STD * jax.random.normal(key, x.shape, x.dtype)
    return x0 if bounds is None else jnp.clip(x0, bounds[0], bounds[1])


def trades_attack(logits_fn: Callable, x: jax.Array, eps, *, norm: str, steps: int, step_size, key: jax.Array,
                  bounds: Optional[Tuple[float, float]] = (0.0, 1.0)) -> jax.Array:
    """TRADES's inner maximisation: ``x_adv (b, *input_shape)`` raising ``KL(softmax f(x) || softmax f(x_adv))``.

    From :func:`trades_start`, ``steps`` (static) steps
    ``x' <- clip_box(x + P_eps(x' - x + step_size * s(g)))`` with ``g`` the
    gradient of the point's KL term in ``x'``, ``s`` the steepest-ascent
    direction of ``norm`` (``sign(g)`` for l_inf, ``g / ||g||_2`` for l_2) and
    ``P_eps`` the projection onto the ``norm`` ball of radius ``eps`` (a
    traced scalar, in ``norm`` units); ``softmax f(x)`` is held fixed. Returns
    the last iterate (as in Zhang et al.'s Algorithm 1), inside the ball and
    the box.
    """
    from attacks.norms import clip_box, geometry

    geo = geometry(norm)
    p_logits = jax.lax.stop_gradient(logits_fn(x))

    def kl_sum(xa):
        return jnp.sum(kl_softmax(p_logits, logits_fn(xa)))

    def body(_, xa):
        g = jax.grad(kl_sum)(xa)
        delta = xa - x + jax.vmap(lambda gi: geo.step(gi, step_size))(g)
        delta = jax.vmap(lambda di: geo.project(di, eps))(delta)
        return clip_box(x + delta, bounds)

    return jax.lax.fori_loop(0, steps, body, trades_start(x, key, bounds))


# ---------------------------------------------------------------------------
# certified training (IBP, CROWN-IBP)


def margin_lower_bounds(model_cfg: ModelConfig, params: Params, x: jax.Array, y: jax.Array, eps, beta_mix, *,
                        method: str, norm: str, bounds: Optional[Tuple[float, float]]) -> jax.Array:
    """Certified lower bounds ``m (b, K)`` of the margins ``z_y - z_j`` over each point's ball.

    The verifiers' bounds (:func:`rcurves.nets.bounds.training_margins`) on
    ``models.network.to_network(model_cfg, params)``: ``method`` 'ibp' gives
    ``m_IBP``, 'crown-ibp' ``beta_mix * m_CROWN-IBP + (1 - beta_mix) * m_IBP``.
    ``params`` may be traced (the result is differentiable in them), ``x (b,
    *input_shape)``, ``y (b,)``, ``eps`` and ``beta_mix`` scalars (traced);
    ``m[:, y] = 0``; the ball is ``{||x' - x||_norm <= eps} ∩ bounds``.
    """
    from rcurves.nets.bounds import training_margins
    from rcurves.models.network import to_network

    net = to_network(model_cfg, params)
    return training_margins(net, x, y, eps, beta_mix, norm=norm, domain=bounds, crown=method == "crown-ibp")


def certified_loss(logits: jax.Array, margins_lb: jax.Array, targets: jax.Array, y: jax.Array, kappa) -> jax.Array:
    """Loss of IBP / CROWN-IBP training (Gowal et al. 2018; Zhang et al. 2020), a scalar:
    ``mean_i [kappa CE(z_i, t_i) + (1 - kappa) CE(-m_i, y_i)]``.

    ``logits`` ``z (b, K)`` at the clean points, ``margins_lb`` ``m (b, K)``
    lower bounds of ``z_y - z_j`` over each ball (``m_y = 0``), ``targets (b,
    K)`` label distributions for the clean term, ``y (b,)`` the labels the
    bound certifies, ``kappa`` a scalar in [0, 1]. ``-m`` are the worst-case
    logits (shifted by ``z_y``, which CE ignores): ``CE(-m, y)`` bounds
    ``CE(f(x'), y)`` from above for every ``x'`` in the ball.
    """
    clean = optax.softmax_cross_entropy(logits, targets)
    robust = optax.softmax_cross_entropy_with_integer_labels(-margins_lb, y)
    return jnp.mean(kappa * clean + (1.0 - kappa) * robust)


def check_method_arch(model_cfg: ModelConfig, cfg: TrainConfig) -> None:
    """Raise a ValueError (naming ``method`` and ``arch``) when ``cfg.method`` cannot train
    ``model_cfg.arch``: the certified methods need a network the bounds read
    (``models.network.to_network``: 'linear', 'mlp', 'cnn'; not the ResNet's batch norm)."""
    if cfg.method in CERTIFIED:
        from rcurves.models.network import CERTIFIABLE_ARCHS

        if model_cfg.arch not in CERTIFIABLE_ARCHS:
            raise ValueError(
                f"method: {cfg.method!r} trains on certified bounds, which handle the architectures "
                f"{CERTIFIABLE_ARCHS}; arch {model_cfg.arch!r} (batch norm, skip connections) is not one of them")
    if cfg.method in MMR_METHODS:
        check_mmr_model(model_cfg, cfg)


def mmr_units(model_cfg: ModelConfig, cfg: TrainConfig) -> int:
    """Number ``U'`` of hidden units whose facet distances one MMR step ranks: every hidden
    unit of the model, or ``cfg.mmr_units`` sampled ones (0 for a linear model)."""
    from rcurves.models.mmr import hidden_layer_sizes

    return sum(hidden_layer_sizes(model_cfg)) if cfg.mmr_units is None else int(cfg.mmr_units)


def check_mmr_model(model_cfg: ModelConfig, cfg: TrainConfig) -> None:
    """The MMR settings that depend on the model, checked before anything compiles:
    the architecture (``method`` and ``arch`` named), ``mmr_k_d <= K - 1``, ``mmr_units``
    between the number of hidden layers and of hidden units (not for a linear model),
    and, without ``mmr_units``, an exact Jacobian of at most :data:`MMR_EXACT_BUDGET`
    entries per batch (``batch_size x inputs x (hidden units + K)``)."""
    from rcurves.models.mmr import MMR_ARCHS, hidden_layer_sizes

    if model_cfg.arch not in MMR_ARCHS:
        raise ValueError(
            f"method: {cfg.method!r} regularises the linear regions of a plain ReLU network, architectures "
            f"{MMR_ARCHS}; arch {model_cfg.arch!r} (batch norm, skip connections) is not one of them")
    k = model_cfg.n_classes
    if cfg.mmr_k_d is not None and cfg.mmr_k_d > k - 1:
        raise ValueError(f"mmr_k_d: expected at most K - 1 = {k - 1} decision hyperplanes, got {cfg.mmr_k_d}")
    sizes = hidden_layer_sizes(model_cfg)
    u = sum(sizes)
    d = math.prod(model_cfg.input_shape)
    if cfg.mmr_units is not None:
        if not sizes:
            raise ValueError(f"mmr_units: arch {model_cfg.arch!r} has no hidden units to sample; pass mmr_units=None")
        if not len(sizes) <= cfg.mmr_units <= u:
            raise ValueError(f"mmr_units: expected between {len(sizes)} (one per hidden layer) and the model's {u} "
                             f"hidden units, got {cfg.mmr_units}")
    elif cfg.batch_size * d * (u + k) > MMR_EXACT_BUDGET:
        raise ValueError(
            f"mmr_units: the exact rows of all {u} hidden units of this {model_cfg.arch} ({d} inputs, batch "
            f"{cfg.batch_size}) take {cfg.batch_size * d * (u + k):,} Jacobian entries per step (budget "
            f"{MMR_EXACT_BUDGET:,}); pass mmr_units (a sample of hidden units per step, e.g. 64)")


def mmr_k_b(cfg: TrainConfig, epoch: int, n_units: int) -> int:
    """``k_B`` of 0-based ``epoch``: ``max(1, floor(frac * n_units))`` (at most ``n_units``), ``frac``
    linear from the first to the last value of ``cfg.mmr_k_b`` (or :data:`MMR_K_B`) over epochs
    ``1..cfg.epochs``, as the authors' code; 1 when ``n_units = 0`` (unused then)."""
    first, last = cfg.mmr_k_b if cfg.mmr_k_b is not None else MMR_K_B[cfg.method]
    frac = first + (last - first) * (epoch + 1) / cfg.epochs
    return int(min(max(1, math.floor(frac * n_units + 1e-9)), max(n_units, 1)))


def mmr_schedule(cfg: TrainConfig, step: int, steps_per_epoch: int, n_units: int) -> Dict[str, float]:
    """The MMR values of update ``step``: ``ramp`` (:func:`ramp`, the weight's warm-up factor)
    and ``k_b`` (:func:`mmr_k_b` of the update's epoch)."""
    return {"ramp": ramp(cfg, step, steps_per_epoch), "k_b": mmr_k_b(cfg, step // steps_per_epoch, n_units)}


def make_train_step(model_cfg: ModelConfig, cfg: TrainConfig) -> Callable:
    """The jitted ``step(state, x, y, key, eps, lr=None, kappa=None, beta_mix=None, mmr_ramp=None,
    mmr_k_b=None) -> (state, metrics)``.

    ``x (b, *input_shape)``, ``y (b,)``, ``key`` the PRNG key of the
    attacks (update ``t = state.step`` draws its random start from
    ``fold_in(key, t)``, its augmentation from another key folded from it),
    ``eps`` a float32 scalar (the current training radius; unused for ST),
    ``lr`` the float32 learning rate of this update (None: ``cfg.lr``),
    ``kappa`` and ``beta_mix`` float32 scalars, the current weights of the
    certified methods' clean loss and of CROWN-IBP's bound (None: the end of
    the ramp, ``cfg.kappa_final`` and 0; unused by the other methods; see
    :func:`schedule`). ``metrics`` holds the mean training loss and the
    accuracy on the examples trained on (adversarial ones for AT; clean ones
    for TRADES and the certified methods; the mixed batch of MMR + AT).
    MMR methods: ``mmr_ramp`` the float32 factor of the regulariser's weight
    (None: 1) and ``mmr_k_b`` the int32 ``k_B`` of this update (None: the
    schedule's last value; :func:`mmr_schedule`); the unit sample of update
    ``t`` is drawn from a key folded from ``fold_in(key, t)``; ``metrics`` adds
    ``mmr``, the batch mean of ``MMR_p(x)`` ('mmr', without ``lambda``) or of
    ``MMR-Universal(x)`` ('mmr-univ', with its ``lambda``s) and, for
    'mmr-univ', the unweighted parts ``mmr_l1`` and ``mmr_linf``.

    The step depends on ``cfg`` only through its static fields (method, norm,
    attack steps, relative step, bounds, ``trades_beta``, ``kappa_final``; the
    MMR lambdas and gammas, ``mmr_k_d``, ``mmr_units``, ``mmr_at_frac`` and the
    last fraction of the ``k_B`` schedule); configurations that differ only in
    ``eps``, ``epochs``, warm-up, schedule or seed share one compiled step, and
    every schedule value is a traced argument: one compilation per batch
    shape for the whole run.

    Raises:
      ValueError: a certified or MMR method on an architecture they cannot
        handle (linear, mlp, cnn only), or MMR settings that do not fit the
        model (:func:`check_mmr_model`), before anything compiles.
    """
    check_method_arch(model_cfg, cfg)
    attacks_at_eps = cfg.method in ROBUST or (cfg.method == "mmr" and cfg.mmr_at_frac > 0)
    # k_B enters traced; the step keeps only the schedule's last fraction (its default k_B)
    last_k_b = None
    if cfg.method in MMR_METHODS:
        last = (cfg.mmr_k_b if cfg.mmr_k_b is not None else MMR_K_B[cfg.method])[1]
        last_k_b = None if last == MMR_K_B[cfg.method][1] else (last, last)
    static = dataclasses.replace(cfg, eps=1.0 if attacks_at_eps else 0.0, epochs=1,
                                 warmup_epochs=1.0 if cfg.method == "crown-ibp" else 0.0,
                                 seed=0, batch_size=1, lr_schedule="constant", mmr_k_b=last_k_b)
    return _make_train_step(model_cfg, static)


@functools.lru_cache(maxsize=32)
def _make_train_step(model_cfg: ModelConfig, cfg: TrainConfig) -> Callable:
    apply = apply_fn(model_cfg)
    opt = make_optimizer(cfg)
    k_d = (model_cfg.n_classes - 1) if cfg.mmr_k_d is None else cfg.mmr_k_d
    default_k_b = mmr_k_b(cfg, 0, mmr_units(model_cfg, cfg)) if cfg.method in MMR_METHODS else 1

    def mmr_loss_fn(params, x, targets, y, weight, k_b, k_units):
        from rcurves.models.mmr import regularizer

        logits = apply(params, x)
        ce = optax.softmax_cross_entropy(logits, targets).mean()
        r = regularizer(model_cfg, params, x, y, method=cfg.method, norm=cfg.norm, k_b=k_b, k_d=k_d,
                        gamma_b=cfg.mmr_gamma_b, gamma_d=cfg.mmr_gamma_d, lambda_l1=cfg.mmr_lambda_l1,
                        lambda_linf=cfg.mmr_lambda_linf, gamma_l1=cfg.mmr_gamma_l1, gamma_linf=cfg.mmr_gamma_linf,
                        units=cfg.mmr_units, key=k_units)
        reg = {"mmr": jnp.mean(r.total)}
        if cfg.method == "mmr-univ":
            reg.update(mmr_l1=jnp.mean(r.l1), mmr_linf=jnp.mean(r.linf))
        return ce + weight * reg["mmr"], (logits, reg)

    def loss_fn(params, x, targets):
        logits = apply(params, x)
        loss = optax.softmax_cross_entropy(logits, targets).mean()
        return loss, logits

    def trades_loss_fn(params, x, x_adv, targets):
        logits = apply(params, x)
        return trades_loss(logits, apply(params, x_adv), targets, cfg.trades_beta), logits

    def certified_loss_fn(params, x, targets, y, eps, kappa, beta_mix):
        logits = apply(params, x)
        m = margin_lower_bounds(model_cfg, params, x, y, eps, beta_mix, method=cfg.method, norm=cfg.norm,
                                bounds=cfg.bounds)
        return certified_loss(logits, m, targets, y, kappa), logits

    @jax.jit
    def step(state: TrainState, x, y, key, eps, lr=None, kappa=None, beta_mix=None, mmr_ramp=None, mmr_k_b=None):
        lr = cfg.lr if lr is None else lr
        kappa = cfg.kappa_final if kappa is None else kappa
        beta_mix = 0.0 if beta_mix is None else beta_mix
        mmr_ramp = 1.0 if mmr_ramp is None else mmr_ramp
        mmr_k_b = default_k_b if mmr_k_b is None else mmr_k_b
        extra = {}
        targets = jax.nn.one_hot(y, model_cfg.n_classes, dtype=jnp.float32)
        if cfg.augment != "none":
            k_aug = jax.random.fold_in(jax.random.fold_in(key, 0x5A17), state.step)
            x, targets = augment(cfg, x, targets, k_aug)
            y = jnp.argmax(targets, axis=-1)        # the label of the largest share: what AT attacks
        if cfg.method in ("at", "trades"):
            frozen = jax.lax.stop_gradient(state.params)

            def logits_fn(xb):
                return apply(frozen, xb)

            k_att = jax.random.fold_in(key, state.step)
            size = cfg.rel_step * eps / cfg.attack_steps
        if cfg.method == "at":
            x_adv = attacks.pgd(
                logits_fn, x, y, eps, norm=cfg.norm, steps=cfg.attack_steps, key=k_att,
                step_size=size, bounds=cfg.bounds, loss="ce",
            )
            x = jax.lax.stop_gradient(x_adv)
        n_adv = int(cfg.mmr_at_frac * x.shape[0]) if cfg.method == "mmr" else 0
        if n_adv > 0:        # MMR + AT: the first n_adv examples of the batch replaced by PGD's (the authors' ae_frac)
            frozen = jax.lax.stop_gradient(state.params)
            x_adv = attacks.pgd(
                lambda xb: apply(frozen, xb), x[:n_adv], y[:n_adv], eps, norm=cfg.norm, steps=cfg.attack_steps,
                key=jax.random.fold_in(key, state.step), step_size=cfg.rel_step * eps / cfg.attack_steps,
                bounds=cfg.bounds, loss="ce",
            )
            x = jnp.concatenate([jax.lax.stop_gradient(x_adv), x[n_adv:]], axis=0)
        if cfg.method == "trades":
            x_adv = jax.lax.stop_gradient(trades_attack(
                logits_fn, x, eps, norm=cfg.norm, steps=cfg.attack_steps, step_size=size, key=k_att,
                bounds=cfg.bounds))
            (loss, logits), grads = jax.value_and_grad(trades_loss_fn, has_aux=True)(
                state.params, x, x_adv, targets)
        elif cfg.method in CERTIFIED:
            (loss, logits), grads = jax.value_and_grad(certified_loss_fn, has_aux=True)(
                state.params, x, targets, y, eps, kappa, beta_mix)
        elif cfg.method in MMR_METHODS:
            k_units = jax.random.fold_in(jax.random.fold_in(key, 0x3312), state.step)
            weight = mmr_ramp * (cfg.mmr_lambda if cfg.method == "mmr" else 1.0)
            (loss, (logits, extra)), grads = jax.value_and_grad(mmr_loss_fn, has_aux=True)(
                state.params, x, targets, y, weight, jnp.asarray(mmr_k_b, jnp.int32), k_units)
        else:
            (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, x, targets)
        direction, opt_state = opt.update(grads, state.opt_state, state.params)
        params = jax.tree_util.tree_map(lambda p, u: p - lr * u, state.params, direction)
        acc = jnp.mean(jnp.argmax(logits, axis=-1) == y)
        return TrainState(params, opt_state, state.step + 1), {"loss": loss, "accuracy": acc, **extra}

    return step


def init_state(model_cfg: ModelConfig, cfg: TrainConfig, key) -> TrainState:
    params = init_params(model_cfg, key)
    return TrainState(params, make_optimizer(cfg).init(params), jnp.zeros((), jnp.int32))


def ramp(cfg: TrainConfig, step: int, steps_per_epoch: int) -> float:
    """Progress of the warm-up at update ``step`` (0-based), in (0, 1]:
    ``min(1, (step + 1) / (warmup_epochs * steps_per_epoch))``, 1 without warm-up."""
    warm = cfg.warmup_epochs * steps_per_epoch
    if warm <= 0:
        return 1.0
    return min(1.0, (step + 1) / warm)


def eps_schedule(cfg: TrainConfig, step: int, steps_per_epoch: int) -> float:
    """Training radius at update ``step``: ``ramp * cfg.eps`` (linear warm-up to
    ``cfg.eps``, then constant); 0 for ST; ``cfg.eps`` throughout for the MMR methods
    (the PGD radius of MMR + AT, 0 without it)."""
    if cfg.method in MMR_METHODS:      # MMR + AT's PGD radius is not ramped (the authors'); 0 without AT
        return cfg.eps
    if cfg.method not in ROBUST:
        return 0.0
    r = ramp(cfg, step, steps_per_epoch)
    return cfg.eps if r >= 1.0 else cfg.eps * r


def schedule(cfg: TrainConfig, step: int, steps_per_epoch: int) -> Dict[str, float]:
    """Every scheduled value of update ``step``, with ``rho`` = :func:`ramp`:

    ``eps`` (:func:`eps_schedule`), ``kappa = 1 - rho (1 - kappa_final)``
    (certified methods' clean weight, Gowal et al. 2018: 1 -> 0.5) and
    ``beta_mix = 1 - rho`` (CROWN-IBP's weight in the bound, Zhang et al.
    2020: 1 -> 0). Outside the certified methods ``kappa`` and ``beta_mix``
    are unused (reported as 1 and 0).
    """
    rho = ramp(cfg, step, steps_per_epoch)
    if cfg.method not in CERTIFIED:
        return {"eps": eps_schedule(cfg, step, steps_per_epoch), "kappa": 1.0, "beta_mix": 0.0}
    return {"eps": eps_schedule(cfg, step, steps_per_epoch),
            "kappa": 1.0 - rho * (1.0 - cfg.kappa_final),
            "beta_mix": 1.0 - rho if cfg.method == "crown-ibp" else 0.0}


def train(
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    x,
    y,
    *,
    key=None,
    x_val=None,
    y_val=None,
    progress: bool = True,
    desc: Optional[str] = None,
    on_epoch: Optional[Callable[[int, Params, Dict[str, float]], None]] = None,
) -> TrainResult:
    """Train a model from scratch; deterministic in ``key`` (default ``PRNGKey(cfg.seed)``).

    Args:
      model_cfg: the architecture; ``input_shape`` must match ``x.shape[1:]``.
      cfg: the training objective and hyper-parameters.
      x: training inputs ``(n, *input_shape)`` inside ``cfg.bounds``.
      y: labels ``(n,)`` in ``[0, n_classes)``.
      key: PRNG key for initialisation, batch order and the attacks.
      x_val, y_val: optional held-out data; its clean accuracy is recorded per
        epoch.
      progress: show a tqdm bar (points/s).
      desc: label of the bar.
      on_epoch: called after every epoch as ``on_epoch(epoch, params, record)``
        (1-based epoch, the parameters as numpy arrays, that epoch's history
        record), e.g. to keep checkpoints along the way; it does not change
        the training.

    Returns:
      ``TrainResult(params, history)``.
    """
    x = checks.check_array(x, "x", min_ndim=2)
    y = checks.check_labels(y, x.shape[0], "y", model_cfg.n_classes)
    if tuple(x.shape[1:]) != model_cfg.input_shape:
        raise ValueError(
            f"x: expected inputs of shape {model_cfg.input_shape} (the model's input_shape), "
            f"got {tuple(x.shape[1:])}"
        )
    checks.check_bounds(cfg.bounds, x)
    step_fn = make_train_step(model_cfg, cfg)     # before any computation: it rejects an arch the method cannot train
    x_host, y_host = np.asarray(x), np.asarray(y)
    if key is None:
        key = jax.random.PRNGKey(cfg.seed)
    key = raw_key(key)
    k_init, k_data, k_attack = jax.random.split(key, 3)

    n = x.shape[0]
    bs = min(cfg.batch_size, n)
    steps_per_epoch = n // bs
    state = init_state(model_cfg, cfg, k_init)
    val_logits = make_logits_fn if x_val is not None else None
    n_mmr_units = mmr_units(model_cfg, cfg) if cfg.method in MMR_METHODS else 0

    bar = _progress(cfg.epochs * steps_per_epoch * bs, desc or cfg.name, progress)
    history: List[Dict[str, float]] = []
    t = 0
    for epoch in range(cfg.epochs):
        perm = np.asarray(jax.random.permutation(jax.random.fold_in(k_data, epoch), n))
        losses, accs = [], []
        regs: Dict[str, list] = {}
        eps_t = 0.0
        sched: Dict[str, float] = {}
        for b in range(steps_per_epoch):
            idx = perm[b * bs:(b + 1) * bs]
            eps_t = eps_schedule(cfg, t, steps_per_epoch)
            lr_t = learning_rate(cfg, t, cfg.epochs * steps_per_epoch)
            if cfg.method in CERTIFIED:
                sched = schedule(cfg, t, steps_per_epoch)
                state, m = step_fn(state, x_host[idx], y_host[idx], k_attack, np.float32(eps_t), np.float32(lr_t),
                                   np.float32(sched["kappa"]), np.float32(sched["beta_mix"]))
            elif cfg.method in MMR_METHODS:
                sched = mmr_schedule(cfg, t, steps_per_epoch, n_mmr_units)
                state, m = step_fn(state, x_host[idx], y_host[idx], k_attack, np.float32(eps_t), np.float32(lr_t),
                                   np.float32(1.0), np.float32(0.0), np.float32(sched["ramp"]),
                                   np.int32(sched["k_b"]))
                for name in ("mmr", "mmr_l1", "mmr_linf"):
                    if name in m:
                        regs.setdefault(name, []).append(m[name])
            else:
                state, m = step_fn(state, x_host[idx], y_host[idx], k_attack, np.float32(eps_t),
                                   np.float32(lr_t))
            losses.append(m["loss"])
            accs.append(m["accuracy"])
            t += 1
            if bar is not None:
                bar.update(bs)
        rec = {
            "epoch": epoch + 1,
            "loss": float(jnp.mean(jnp.stack(losses))),
            "accuracy": float(jnp.mean(jnp.stack(accs))),
            "eps": float(eps_t),
        }
        if cfg.method in CERTIFIED:          # the schedule of the epoch's last update
            rec["kappa"] = float(sched["kappa"])
            if cfg.method == "crown-ibp":
                rec["beta_mix"] = float(sched["beta_mix"])
        if cfg.method in MMR_METHODS:        # mean regulariser of the epoch; the schedule of its last update
            for name, vals in regs.items():
                rec[name] = float(jnp.mean(jnp.stack(vals)))
            rec["mmr_ramp"] = float(sched["ramp"])
            rec["mmr_k_b"] = int(sched["k_b"])
        if val_logits is not None:
            from rcurves.models.architectures import accuracy

            rec["val_accuracy"] = accuracy(val_logits(model_cfg, state.params), x_val, y_val)
        history.append(rec)
        if on_epoch is not None:
            on_epoch(epoch + 1, jax.tree_util.tree_map(np.asarray, state.params), rec)
        if bar is not None:
            bar.set_postfix(loss=f"{rec['loss']:.3f}", acc=f"{rec['accuracy']:.3f}")
    if bar is not None:
        bar.close()
    params = jax.tree_util.tree_map(np.asarray, state.params)
    return TrainResult(params, history)


def raw_key(key, name: str = "key") -> jax.Array:
    """One raw ``uint32[2]`` key from a ``PRNGKey`` or a typed ``jax.random.key``."""
    if key is None or not hasattr(key, "dtype"):
        raise ValueError(f"{name}: expected a jax.random key, got {type(key).__name__}")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    if key.dtype != jnp.uint32 or tuple(key.shape) != (2,):
        raise ValueError(
            f"{name}: expected one jax.random key (PRNGKey, shape (2,)), got "
            f"dtype {key.dtype} shape {tuple(key.shape)}"
        )
    return jnp.asarray(key)


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="pt", unit_scale=True, leave=False, dynamic_ncols=True)


__all__ = [
    "CERTIFIED",
    "METHODS",
    "MMR_K_B",
    "MMR_METHODS",
    "ROBUST",
    "certified_loss",
    "check_method_arch",
    "check_mmr_model",
    "mmr_k_b",
    "mmr_schedule",
    "mmr_units",
    "kl_softmax",
    "margin_lower_bounds",
    "ramp",
    "schedule",
    "trades_attack",
    "trades_loss",
    "trades_start",
    "TrainConfig",
    "TrainResult",
    "TrainState",
    "eps_schedule",
    "augment",
    "augment_batch",
    "mix_batch",
    "init_state",
    "learning_rate",
    "make_optimizer",
    "make_train_step",
    "raw_key",
    "train",
]
