"""Claims about models and papers: paired tests, verdict rules that can fail, claim records.

* :mod:`~rcurves.claims.compare` -- is one model more robust than another (paired McNemar scans);
* :mod:`~rcurves.claims.agreement` -- which of two models agrees more with a reference;
* :mod:`~rcurves.claims.verdicts` -- the rules that decide a reproduction's verdict;
* :mod:`~rcurves.claims.record` -- a claim, its code fingerprint, the JSON of a run.
"""
from rcurves.claims.compare import knot_scan as knot_scan
from rcurves.claims.compare import mcnemar_scan as mcnemar_scan
from rcurves.claims.compare import paired_order_test as paired_order_test
from rcurves.claims.compare import significant_reversal as significant_reversal
from rcurves.claims.agreement import Agreement as Agreement
from rcurves.claims.agreement import agreement_with_reference as agreement_with_reference
from rcurves.claims.agreement import mcnemar_exact as mcnemar_exact
from rcurves.claims.verdicts import KINDS as KINDS
from rcurves.claims.verdicts import VERDICTS as VERDICTS
from rcurves.claims.verdicts import Verdict as Verdict
from rcurves.claims.verdicts import all_of as all_of
from rcurves.claims.verdicts import binom_two_sided as binom_two_sided
from rcurves.claims.verdicts import correlation as correlation
from rcurves.claims.verdicts import greater as greater
from rcurves.claims.verdicts import min_discordant as min_discordant
from rcurves.claims.verdicts import null_effect as null_effect
from rcurves.claims.verdicts import paired_direction as paired_direction
from rcurves.claims.verdicts import paired_effect as paired_effect
from rcurves.claims.verdicts import rate_below as rate_below
from rcurves.claims.verdicts import rate_matches as rate_matches
from rcurves.claims.verdicts import share_lower as share_lower
from rcurves.claims.verdicts import value_matches as value_matches
from rcurves.claims.verdicts import wilson as wilson
from rcurves.claims.record import claim as claim
from rcurves.claims.record import code_fingerprint as code_fingerprint
from rcurves.claims.record import is_stale as is_stale
from rcurves.claims.record import write_result as write_result
