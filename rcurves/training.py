"""Standard and PGD adversarial training with optax.

Two training objectives (paper 000, Section 3.1, methods 1 and 2):

* ST, standard training: minimise the empirical cross-entropy
  ``E_(x,y) CE(f(x), y)``.
* AT, adversarial training (Madry et al. 2018): minimise the robust loss
  ``E_(x,y) max_{||delta||_p <= eps} CE(f(x + delta), y)``, with the inner
  maximum approximated by fixed-step PGD from a uniform random start
  (``attacks.pgd`` with ``loss='ce'``, step ``rel_step * eps / steps``; Madry
  et al. use 2.5 eps / steps), in l_inf or l_2, clipped to the input box.
  Every example of the batch is replaced by its adversarial example.

Optimiser: Adam (paper 000, Appendix C.1: learning rate 1e-3, batch size 128).
An optional linear warm-up of ``eps`` over the first epochs helps large-eps
AT start from a random initialisation.

One jitted ``train_step(state, x, y, key, eps) -> (state, metrics)`` does the
attack, the gradient and the update; the driver :func:`train` loops over
shuffled mini-batches (gathered on the host, so the loop runs no other
device operations). Everything is deterministic in the key: batch order
uses ``fold_in(data_key, epoch)``, the attack of update ``t`` uses
``fold_in(attack_key, t)``.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import attacks
from attacks import checks
from rcurves.models import ModelConfig, Params, apply_fn, init_params, make_logits_fn

METHODS = ("st", "at")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Static description of a training run.

    Attributes:
      method: 'st' (standard) or 'at' (PGD adversarial training).
      norm: threat model of AT, 'linf' or 'l2' (ignored for ST).
      eps: AT radius in ``norm`` units (inputs in ``bounds``).
      epochs: passes over the training set.
      batch_size: examples per step (the last partial batch of an epoch is
        dropped, so every step has the same shape and one compilation).
      lr: Adam learning rate.
      attack_steps: PGD steps of the inner maximisation.
      rel_step: PGD step size as a multiple of ``eps / attack_steps``.
      warmup_epochs: epochs over which ``eps`` grows linearly from 0 (AT).
      bounds: input box ``(lo, hi)`` or None.
      seed: the training key is ``PRNGKey(seed)`` unless one is passed.
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

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {self.method!r}")
        object.__setattr__(self, "norm", checks.check_norm(self.norm))
        object.__setattr__(self, "eps", float(checks.check_positive_float(self.eps, "eps", allow_zero=True)))
        if self.method == "at" and self.eps <= 0:
            raise ValueError("eps: adversarial training needs eps > 0")
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

    def to_dict(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d["bounds"] = list(self.bounds) if self.bounds is not None else None
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
        """Short label, e.g. 'ST', 'AT-linf-0.3'."""
        if self.method == "st":
            return "ST"
        return f"AT-{self.norm}-{self.eps:g}"


class TrainState(NamedTuple):
    params: Params      # model parameters (pytree of float32 arrays)
    opt_state: Any      # optax state
    step: jax.Array     # () int32, number of updates done


class TrainResult(NamedTuple):
    params: Params
    history: List[Dict[str, float]]  # one dict per epoch: loss, accuracy, eps[, val_accuracy]


def make_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    """Adam with the configured learning rate (paper 000, Appendix C.1)."""
    return optax.adam(cfg.lr)


def make_train_step(model_cfg: ModelConfig, cfg: TrainConfig) -> Callable:
    """The jitted ``step(state, x, y, key, eps) -> (state, metrics)``.

    ``x (b, *input_shape)``, ``y (b,)``, ``key`` the PRNG key of the
    attacks (update ``t = state.step`` draws its random start from
    ``fold_in(key, t)``), ``eps`` a float32 scalar (the current AT radius;
    unused for ST). ``metrics`` holds the mean training loss and the accuracy on the
    examples trained on (adversarial ones for AT).

    The step depends on ``cfg`` only through its static fields (method, norm,
    attack steps, relative step, bounds, learning rate); configurations that
    differ only in ``eps``, ``epochs``, warm-up or seed share one compiled step.
    """
    static = dataclasses.replace(cfg, eps=1.0 if cfg.method == "at" else 0.0, epochs=1, warmup_epochs=0.0,
                                 seed=0, batch_size=1)
    return _make_train_step(model_cfg, static)


@functools.lru_cache(maxsize=32)
def _make_train_step(model_cfg: ModelConfig, cfg: TrainConfig) -> Callable:
    apply = apply_fn(model_cfg)
    opt = make_optimizer(cfg)

    def loss_fn(params, x, y):
        logits = apply(params, x)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, logits

    @jax.jit
    def step(state: TrainState, x, y, key, eps):
        if cfg.method == "at":
            frozen = jax.lax.stop_gradient(state.params)

            def logits_fn(xb):
                return apply(frozen, xb)

            x_adv = attacks.pgd(
                logits_fn, x, y, eps, norm=cfg.norm, steps=cfg.attack_steps,
                key=jax.random.fold_in(key, state.step),
                step_size=cfg.rel_step * eps / cfg.attack_steps, bounds=cfg.bounds, loss="ce",
            )
            x = jax.lax.stop_gradient(x_adv)
        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, x, y)
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        acc = jnp.mean(jnp.argmax(logits, axis=-1) == y)
        return TrainState(params, opt_state, state.step + 1), {"loss": loss, "accuracy": acc}

    return step


def init_state(model_cfg: ModelConfig, cfg: TrainConfig, key) -> TrainState:
    params = init_params(model_cfg, key)
    return TrainState(params, make_optimizer(cfg).init(params), jnp.zeros((), jnp.int32))


def eps_schedule(cfg: TrainConfig, step: int, steps_per_epoch: int) -> float:
    """AT radius at update ``step``: linear warm-up to ``cfg.eps``, then constant."""
    if cfg.method != "at":
        return 0.0
    warm = cfg.warmup_epochs * steps_per_epoch
    if warm <= 0:
        return cfg.eps
    return cfg.eps * min(1.0, (step + 1) / warm)


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
    x_host, y_host = np.asarray(x), np.asarray(y)
    if key is None:
        key = jax.random.PRNGKey(cfg.seed)
    key = raw_key(key)
    k_init, k_data, k_attack = jax.random.split(key, 3)

    n = x.shape[0]
    bs = min(cfg.batch_size, n)
    steps_per_epoch = n // bs
    state = init_state(model_cfg, cfg, k_init)
    step_fn = make_train_step(model_cfg, cfg)
    val_logits = make_logits_fn if x_val is not None else None

    bar = _progress(cfg.epochs * steps_per_epoch * bs, desc or cfg.name, progress)
    history: List[Dict[str, float]] = []
    t = 0
    for epoch in range(cfg.epochs):
        perm = np.asarray(jax.random.permutation(jax.random.fold_in(k_data, epoch), n))
        losses, accs = [], []
        eps_t = 0.0
        for b in range(steps_per_epoch):
            idx = perm[b * bs:(b + 1) * bs]
            eps_t = eps_schedule(cfg, t, steps_per_epoch)
            state, m = step_fn(state, x_host[idx], y_host[idx], k_attack, np.float32(eps_t))
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
        if val_logits is not None:
            from rcurves.models import accuracy

            rec["val_accuracy"] = accuracy(val_logits(model_cfg, state.params), x_val, y_val)
        history.append(rec)
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
    "METHODS",
    "TrainConfig",
    "TrainResult",
    "TrainState",
    "eps_schedule",
    "init_state",
    "make_optimizer",
    "make_train_step",
    "raw_key",
    "train",
]
