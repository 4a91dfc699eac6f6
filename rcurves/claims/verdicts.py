"""Rules that decide a reproduction's verdict from a statistic, each able to fail: the names other code imports.

A claim of a paper is checked by a test whose rule is the paper's statement,
not a weaker one, and every rule can return each of its verdicts (the unit
tests feed each one a case that must fail). The record of a decided claim
(:class:`Verdict`), what each verdict means and the one ladder every effect
rule ends in are in :mod:`~rcurves.claims.verdict`; the rules live in one
module per concept and are re-exported here:

* :mod:`~rcurves.claims.paired_counts` -- exact McNemar on paired points: :func:`paired_effect`,
  :func:`paired_direction`, :func:`null_effect`, :func:`gain_below`, :func:`min_discordant`,
  :func:`binom_two_sided`;
* :mod:`~rcurves.claims.rates` -- proportions and a deterministic number: :func:`wilson`,
  :func:`rate_matches`, :func:`rate_near`, :func:`rate_below`, :func:`share_lower`, :func:`value_matches`;
* :mod:`~rcurves.claims.rank_correlation` -- a rank correlation's sign: :func:`correlation`,
  :func:`correlation_power`;
* :mod:`~rcurves.claims.scans` -- orders of two models over many thresholds: :func:`significant_sides`,
  :func:`sign_changes`, :func:`order_changes`, :func:`ranking_changes`, :func:`reversal_power`,
  :func:`dominates`;
* :mod:`~rcurves.claims.paired_values` -- paired means, intervals, a score's ranking power, two means:
  :func:`paired_greater`, :func:`paired_null`, :func:`interval_above`, :func:`auc_greater`, :func:`greater`;
* :mod:`~rcurves.claims.families` -- a conjunction and multiplicity-corrected families: :func:`all_of`,
  :func:`holm`, :func:`bonferroni`.
"""
from rcurves.claims.families import all_of, bonferroni, holm
from rcurves.claims.paired_counts import (binom_two_sided, gain_below, min_discordant, null_effect, paired_direction,
                                          paired_effect)
from rcurves.claims.paired_values import auc_greater, greater, interval_above, paired_greater, paired_null
from rcurves.claims.rank_correlation import correlation, correlation_power
from rcurves.claims.rates import rate_below, rate_matches, rate_near, share_lower, value_matches, wilson
from rcurves.claims.scans import (dominates, order_changes, ranking_changes, reversal_power, sign_changes,
                                  significant_sides)
from rcurves.claims.verdict import KINDS, VERDICTS, Verdict

__all__ = ["KINDS", "VERDICTS", "Verdict", "all_of", "auc_greater", "binom_two_sided", "bonferroni", "correlation",
           "correlation_power", "dominates", "gain_below", "greater", "holm", "interval_above", "min_discordant",
           "null_effect", "order_changes", "paired_direction", "paired_effect", "paired_greater", "paired_null",
           "rate_below", "rate_matches", "rate_near", "ranking_changes", "reversal_power", "share_lower",
           "sign_changes", "significant_sides", "value_matches", "wilson"]
