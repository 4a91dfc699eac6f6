"""Paper 003, Section 5 / Appendix E: the overly-robust features model D_k, its lemmas checked by sampling.

Inputs x in R^{d+2} (``rcurves.data.overly_robust_features``): z = +-1,
x_1 = z/2 (the oracle's feature, O(x) = sign(x_1)), x_2 = +-z (right w.p.
(1 + 1/k)/2), x_3..x_{d+2} ~ N(z/sqrt(d), k). The training distribution D is
D*_{1+alpha} with labels flipped w.p. delta (we take alpha = 0.05,
delta = 0.02, d = 100). Every classifier here is linear, so its l_inf
distances are exact (000 Lemma 1, ``rcurves.linear_distance``); sampling
only estimates the probabilities, next to their closed forms.

* Claim 5: the oracle sign(x_1) is unchanged by every l_inf perturbation
  below 1/2 (its distance is |x_1| = 1/2 for every point). True by the
  definition of D, so the row cannot fail but through our sampler or the
  exact distance: a self-check.
* Lemma 7: f = sign(x_2) has accuracy (1 - delta) q + delta (1 - q),
  q = (1 + 1/(1+alpha))/2 (003 states >= 1 - alpha/2, leaving out delta), and
  keeps it against l_inf perturbations of size 0.99 (distance |x_2| = 1); the
  invariance adversary (x_1 moved by 0.99 toward the other sign) makes its
  agreement with the oracle 0 %.
* Lemma 6: "the Bayes optimal classifier on D agrees with the oracle w.p.
  >= 1 - delta but with 0 % against an l_inf adversary of size O(d^{-1/2})".
  On D as defined, x_1 = z/2 reveals z, so sign(x_1) is Bayes optimal (it
  predicts y w.p. 1 - delta, the Bayes rate) and it is robust up to 1/2: the
  lemma as stated does not hold. Its proof takes the Bayes classifier linear
  with weights O(1/sqrt d) on x_3.., i.e. without x_1 (003's footnote 6: "x_1
  hard to learn"): the Bayes classifier on x_2..x_{d+2},
  sign(L x_2 + 2/(k sqrt d) sum_{i>=3} x_i), L = log((1+1/k)/(1-1/k)), whose
  l_inf robust accuracy at eps = c/sqrt(d) we measure for several d (a
  constant in d for fixed c, and ~0 for c ~ 8).
* Adversarial training decides which feature is used: a linear model trained
  on the exact l_inf robust logistic loss (``y (w.x + b) - eps ||w||_1``) at
  eps = 0.3 uses x_1 (the oracle), at eps = 0.7 > 1/2 it cannot and uses x_2:
  the overly-robust model of Lemma 7, with invariance agreement 0.

    python experiments/003_invariance_tradeoffs/overly_robust_dk.py --out results/experiments/overly_robust_dk

``--quick``: fewer samples and training steps.
"""
from __future__ import annotations

import math
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # experiments/: shared.py
from shared import parse_args, write_result

from rcurves.claims.record import claim, fmt

ALPHA, DELTA, D = 0.05, 0.02, 100


def _robust_acc(w, b, x, labels, eps):
    """Fraction of points classified as ``labels`` with l_inf distance > eps (exact, Lemma 1)."""
    from rcurves.exact.linear import linear_distance

    d = np.asarray(linear_distance(np.asarray(w, np.float32), np.float32(b), x, math.inf, labels), np.float64)
    return float(np.mean(d > eps))


def _train_robust_linear(x, y, eps, steps, seed):
    """Linear model minimising mean softplus(-(s (w.x + b) - eps ||w||_1)), s = 2y - 1 (exact l_inf AT)."""
    import jax
    import jax.numpy as jnp
    import optax

    s = jnp.asarray(2.0 * y - 1.0, jnp.float32)
    xj = jnp.asarray(x, jnp.float32)

    def loss(params):
        w, b = params
        margin = s * (xj @ w + b) - eps * jnp.sum(jnp.abs(w))
        return jnp.mean(jax.nn.softplus(-margin))

    opt = optax.adam(0.05)
    params = (jnp.zeros(x.shape[1]) + 1e-3 * jax.random.normal(jax.random.PRNGKey(seed), (x.shape[1],)),
              jnp.zeros(()))
    state = opt.init(params)

    @jax.jit
    def run(params, state):
        def step(carry, _):
            p, st = carry
            g = jax.grad(loss)(p)
            upd, st = opt.update(g, st, p)
            return (optax.apply_updates(p, upd), st), None
        (p, st), _ = jax.lax.scan(step, (params, state), None, length=steps)
        return p

    w, b = run(params, state)
    return np.asarray(w, np.float64), float(b)


def main(argv=None):
    import scipy.stats

    from rcurves.data import overly_robust_classifiers, overly_robust_features

    args = parse_args(__doc__, "overly_robust_dk", argv)
    n = 4000 if args.quick else 100000
    k = 1.0 + ALPHA
    x, y = overly_robust_features(n, k=k, d=D, delta=DELTA, seed=args.seed)
    z = (x[:, 0] > 0).astype(np.int64)                         # oracle label (class 1 <-> +1)
    clfs = overly_robust_classifiers(D)
    se = lambda p: math.sqrt(p * (1 - p) / n)

    # Claim 5: the oracle's distance is |x_1| = 1/2
    w_o, b_o = clfs["oracle"]
    ora_49, ora_51 = _robust_acc(w_o, b_o, x, z, 0.49), _robust_acc(w_o, b_o, x, z, 0.5)

    # Lemma 7
    w2, b2 = clfs["x2"]
    q = (1 + 1 / k) / 2
    acc7_exact = (1 - DELTA) * q + DELTA * (1 - q)
    acc7 = float(np.mean((x[:, 1] > 0) == (y == 1)))
    rob7 = _robust_acc(w2, b2, x, y, 0.99)
    x_inv = x.copy()
    x_inv[:, 0] -= 0.99 * np.sign(x[:, 0]) * ((x[:, 1] > 0) == (x[:, 0] > 0))   # flip O where f = O
    agree7 = float(np.mean((x_inv[:, 1] > 0) == (x_inv[:, 0] > 0)))
    assert np.all(np.abs(x_inv - x).max(1) <= 0.99)

    # Lemma 6: Bayes on D is sign(x_1); the x_1-free Bayes classifier and its O(d^-1/2) sensitivity
    bayes_acc_y = float(np.mean((x[:, 0] > 0) == (y == 1)))
    bayes_rob = _robust_acc(w_o, b_o, x, z, 0.49)
    L = math.log((1 + 1 / k) / (1 - 1 / k))
    sd = 2 / math.sqrt(k)
    llr_exact = q * scipy.stats.norm.cdf((L + 2 / k) / sd) + (1 - q) * scipy.stats.norm.cdf((2 / k - L) / sd)
    sweep = {}
    cs = (1.0, 2.0, 4.0, 8.0)
    for d in ((100, 1000) if args.quick else (100, 1000, 10000)):
        m = max(500, n // (d // 100)) if not args.quick else 1000
        xd, _ = overly_robust_features(m, k=k, d=d, delta=0.0, seed=args.seed + d)
        zd = (xd[:, 0] > 0).astype(np.int64)
        w = np.concatenate([[0.0, L], np.full(d, 2 / (k * math.sqrt(d)))])
        acc = float(np.mean((xd @ w > 0) == (zd == 1)))
        sweep[str(d)] = {"n": m, "accuracy_oracle": acc,
                         "robust": {fmt(c): _robust_acc(w, 0.0, xd, zd, c / math.sqrt(d)) for c in cs}}

    # adversarial training picks the feature
    steps = 150 if args.quick else 1500
    xtr, ytr = overly_robust_features(2000 if args.quick else 20000, k=k, d=D, delta=DELTA, seed=args.seed + 1)
    at = {}
    for eps in (0.3, 0.7):
        w, b = _train_robust_linear(xtr, ytr, eps, steps, args.seed)
        top = int(np.argmax(np.abs(w)))
        x_inv = x.copy()
        pred_x = (x @ w + b > 0)
        x_inv[:, 0] -= 0.99 * np.sign(x[:, 0]) * (pred_x == (x[:, 0] > 0))
        at[fmt(eps)] = {"top_feature": top + 1, "w1": float(w[0]), "w2": float(w[1]),
                        "noise_l1": float(np.abs(w[2:]).sum()),
                        "accuracy_y": float(np.mean(pred_x == (y == 1))),
                        "robust_y_at_eps": _robust_acc(w, b, x, y, eps),
                        "invariance_agreement_0.99": float(np.mean((x_inv @ w + b > 0) == (x_inv[:, 0] > 0)))}

    sweep_first = sweep["100"]                                # the largest sample
    claims = _claims(n, acc7, acc7_exact, rob7, agree7, q, ora_49, ora_51, bayes_acc_y, bayes_rob, llr_exact,
                     sweep, at, xtr.shape[0])
    payload = {"n": n, "alpha": ALPHA, "delta": DELTA, "d": D, "oracle_robust": {"0.49": ora_49, "0.5": ora_51},
               "lemma7": {"accuracy": acc7, "exact": acc7_exact, "robust_0.99": rob7, "invariance_agreement": agree7},
               "lemma6": {"bayes_accuracy_y": bayes_acc_y, "bayes_robust_0.49": bayes_rob,
                          "x1_free_exact_accuracy": llr_exact, "sweep": sweep},
               "adversarial_training": at}
    write_result(args, payload, claims)
    return payload


def _claims(n, acc7, acc7_exact, rob7, agree7, q, ora_49, ora_51, bayes_acc_y, bayes_rob, llr_exact, sweep, at,
            n_train):
    """The claims of Claim 5, Lemmas 6-7 (each as printed and corrected) and the AT experiment."""
    from rcurves.claims.verdicts import Verdict, all_of, greater, rate_matches

    se = lambda p: math.sqrt(p * (1 - p) / n)
    k7 = int(round(acc7 * n))

    def vs_formula(v):                 # rate_matches names its reference "the paper's": here it is our formula
        return Verdict(v.verdict, v.test.replace("the paper's", "the formula's"), v.why)

    lo_bound = 1 - ALPHA / 2
    setting = (f"{n} samples of D (d = {D}, alpha = {ALPHA}, delta = {DELTA}), drawn i.i.d. "
               "(rcurves.data.overly_robust_features); exact l_inf distances of linear classifiers (000 Lemma 1)")
    exact_rob = Verdict("reproduced" if rob7 == acc7 else "differs",
                        f"robust accuracy at 0.99 {rob7:.4f} = accuracy {acc7:.4f} (distance |x_2| = 1 > 0.99, exact)",
                        "" if rob7 == acc7 else "some point's distance is below 0.99")
    zero_agree = Verdict("reproduced" if agree7 == 0.0 else "differs",
                         f"agreement with the oracle after moving x_1 by 0.99 toward the other sign: {agree7:.3f} "
                         f"(exact, every sample)", "" if agree7 == 0.0 else "f agrees with the oracle somewhere")
    derivation7 = (f"P(x_2 = z) = q = (1 + 1/(1+alpha))/2 = {q:.4f} >= 1 - alpha/2, but y = z only w.p. 1 - delta, so "
                   f"P(f(x) = y) = (1-delta) q + delta (1-q) = q - delta (2q - 1) = {acc7_exact:.4f} >= 1 - alpha/2 - "
                   f"delta = {lo_bound - DELTA:.4f}; the printed bound holds w.r.t. the oracle, not the noisy labels")
    printed7 = greater(acc7, se(acc7), lo_bound, 0.0, what="accuracy on D > 1 - alpha/2")
    corrected7 = all_of(vs_formula(rate_matches(k7, n, acc7_exact, tol=0.002, what="accuracy on D")),
                        exact_rob, zero_agree)
    # Lemma 6
    bayes_robust_k = int(round(bayes_rob * n))
    printed6 = rate_matches(bayes_robust_k, n, 0.0, tol=0.01,
                            what="the Bayes classifier sign(x_1): robust agreement with the oracle at eps 0.49")
    level6 = 0.05 / (1 + len(sweep))     # one family: P* and the c = 8 rate at every d (Bonferroni intervals)
    c8 = [rate_matches(int(round(s["robust"]["8"] * s["n"])), s["n"], 0.0, tol=0.01, alpha=level6,
                       what=f"x_1-free Bayes, d = {dd}: robust agreement at eps 8/sqrt(d)") for dd, s in sweep.items()]
    s100 = sweep["100"]
    k100 = int(round(s100["accuracy_oracle"] * s100["n"]))
    corrected6 = all_of(vs_formula(rate_matches(k100, s100["n"], llr_exact, tol=0.005, alpha=level6,
                                                what="x_1-free Bayes at d = 100: agreement with the oracle")),
                        *(vs_formula(v) for v in c8))
    sweep_text = "; ".join(f"d={dd} (n = {s['n']}): " + ", ".join(f"c={c} {v:.3f}" for c, v in s["robust"].items())
                           for dd, s in sweep.items())
    return [
        claim("003", "Claim 5", "The oracle sign(x_1) is robust to every l_inf perturbation of norm < 1/2.",
              f"{setting}: exact l_inf distance |x_1| = 1/2 for all {n} samples: robust accuracy (w.r.t. the oracle) "
              f"{ora_49:.3f} at eps 0.49, {ora_51:.3f} at eps 0.5; rule: 1 at 0.49 and 0 at 0.5 (exact)",
              "reproduced" if ora_49 == 1.0 and ora_51 == 0.0 else "differs",
              "; ".join(w for w in ("" if ora_49 == 1.0 and ora_51 == 0.0 else "the oracle's distance is not 1/2",
                                    "true by the definition of D (x_1 = z/2, so the oracle's distance is 1/2 at "
                                    "every point): the row checks our sampler and the exact distance, not the "
                                    "paper; hence kind self-check") if w),
              kind="self-check", short="Claim 5: the oracle sign(x_1) is robust below 1/2",
              paper_value="robust for eps < 1/2", ours_value=f"{ora_49:.2f}@0.49, {ora_51:.2f}@0.5"),
        claim("003", "Lemma 7",
              "f = sign(x_2) has accuracy above 1 - alpha/2 on D even against an l_inf adversary of size 0.99, "
              "and agrees with the oracle 0 % of the time under such perturbations.",
              f"{setting}: accuracy {acc7:.4f} +- {se(acc7):.4f} vs 1 - alpha/2 = {lo_bound:.4f}; derivation: "
              + derivation7, printed7,
              "the printed bound leaves out the label noise delta (see the derivation; the corrected row tests it)",
              short="Lemma 7: sign(x_2) accuracy above 1 - alpha/2", paper_value=f"> {lo_bound:.3f}",
              ours_value=f"{acc7:.4f}"),
        claim("003", "Lemma 7 (corrected)",
              "f = sign(x_2) has accuracy (1-delta) q + delta (1-q) >= 1 - alpha/2 - delta on D (q = (1 + 1/(1+alpha))"
              "/2; accuracy q >= 1 - alpha/2 w.r.t. the oracle), the same against an l_inf adversary of size 0.99, "
              "and agrees with the oracle 0 % of the time under such perturbations.",
              f"{setting}: accuracy {acc7:.4f} (exact {acc7_exact:.4f}); " + derivation7, corrected7,
              short="Lemma 7 (corrected): sign(x_2) accuracy, robust at 0.99, 0% agreement",
              paper_value=f"{acc7_exact:.4f}, agreement 0", ours_value=f"{acc7:.4f}, agreement {agree7:.2f}"),
        claim("003", "Lemma 6",
              "The Bayes optimal classifier on D agrees with the oracle w.p. >= 1 - delta but 0 % against an "
              "l_inf adversary of size O(d^{-1/2}).",
              f"{setting}: on D, x_1 = z/2 determines z and P(y = z | x) = 1 - delta > 1/2 for every x, so the Bayes "
              f"classifier is sign(x_1) = the oracle (accuracy on y {bayes_acc_y:.4f}, the Bayes rate 1 - delta = "
              f"{1 - DELTA}); its distance is |x_1| = 1/2, so its robust agreement is {bayes_rob:.3f} at eps 0.49, "
              "i.e. at every c/sqrt(d) < 1/2; the proof's linear form with w_i = O(1/sqrt d) on x_3.. and a bounded "
              "w_1 is not the Bayes classifier", printed6,
              "as printed the lemma does not hold on D: the Bayes classifier is the oracle (the corrected row drops "
              "x_1, as 003's footnote 6 suggests)", short="Lemma 6: Bayes classifier on D fails at O(d^-1/2)",
              paper_value="0% at O(d^-1/2)", ours_value=f"{bayes_rob:.0%} at eps 0.49"),
        claim("003", "Lemma 6 (corrected)",
              "Without x_1 (footnote 6: x_1 hard to learn), the Bayes optimal classifier on x_2..x_(d+2), sign(L x_2 + "
              "2/(k sqrt d) sum_i x_i) with L = log((1+1/k)/(1-1/k)), k = 1 + alpha, agrees with the oracle w.p. "
              "P* = q Phi((L + 2/k)/s) + (1-q) Phi((2/k - L)/s), s = 2/sqrt(k) (not >= 1 - delta in general), and "
              "with ~0 % against an l_inf adversary of size 8/sqrt(d), for every d.",
              f"fresh samples of D*_(1+alpha) per d (no label noise needed): agreement "
              f"{s100['accuracy_oracle']:.4f} at d = 100 (exact P* = {llr_exact:.4f}, >= 1 - delta only for delta >= "
              f"{1 - llr_exact:.3f}); exact "
              f"robust agreement at eps = c/sqrt(d): {sweep_text} (c = 8 brings it to 0 at every d: an O(d^-1/2) "
              "adversary suffices; at smaller c the finite-d term c L / sqrt(d) of the margin change makes it rise "
              "slowly with d); rule: P* within 0.005 and 0 within 0.01 at c = 8 for every d (Wilson intervals at "
              f"{1 - level6:.2%}: Bonferroni over the row's {1 + len(sweep)} tests; these are exact formulas, not "
              "the paper's measured rates, so the absolute tolerance stays)",
              corrected6, short="Lemma 6 (corrected): x_1-free Bayes, P* and 0% at 8/sqrt(d)",
              paper_value=f"P* {llr_exact:.4f}; 0% at c=8",
              ours_value=f"{s100['accuracy_oracle']:.4f}; <= {max(v['robust']['8'] for v in sweep.values()):.1%} "
                         "at c=8"),
        claim("003", "Section 5 (adversarial training selects the overly-robust feature)",
              "Training for robustness beyond the oracle's radius (1/2) selects the overly-robust feature x_2, a "
              "model robust at large eps and vulnerable to invariance examples.",
              f"linear models trained on the exact l_inf robust logistic loss ({n_train} training samples), evaluated "
              f"on the {n} samples: "
              + "; ".join(f"eps {e}: largest weight on x_{v['top_feature']} (w1 {v['w1']:.2f}, w2 {v['w2']:.2f}, "
                          f"|w_noise|_1 {v['noise_l1']:.2f}), accuracy {v['accuracy_y']:.3f}, robust accuracy at "
                          f"{e} {v['robust_y_at_eps']:.3f}, invariance agreement {v['invariance_agreement_0.99']:.3f}"
                          for e, v in at.items())
              + "; rule: top weight x_1 at eps 0.3 and x_2 at 0.7, invariance agreement < 0.05 at 0.7",
              "reproduced" if at["0.3"]["top_feature"] == 1 and at["0.7"]["top_feature"] == 2
              and at["0.7"]["invariance_agreement_0.99"] < 0.05 else "differs",
              "" if at["0.7"]["top_feature"] == 2 else "the eps = 0.7 model does not rely on x_2", kind="beyond",
              short="Robust training beyond 1/2 selects the overly-robust x_2", paper_value="x_2 beyond eps 1/2",
              ours_value=", ".join(f"x_{v['top_feature']} at {e}" for e, v in at.items())),
    ]


if __name__ == "__main__":
    main()
