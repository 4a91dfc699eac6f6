"""Claims about models and papers: paired tests, verdict rules that can fail, claim records.

* :mod:`~rcurves.claims.compare` -- is one model more robust than another (paired McNemar scans);
* :mod:`~rcurves.claims.agreement` -- which of two models agrees more with a reference;
* :mod:`~rcurves.claims.verdicts` -- the rules that decide a reproduction's verdict (re-exported from one module
  per concept: :mod:`~rcurves.claims.verdict`, ``paired_counts``, ``rates``, ``rank_correlation``, ``scans``,
  ``paired_values``, ``families``);
* :mod:`~rcurves.claims.record` -- a claim, its code fingerprint, the JSON of a run.
"""
from attacks._lazy import attach

# public name -> 'module' (a submodule) or 'module:attribute'; imported on first use (PEP 562), so a
# program loads only the modules it uses (and a claim's code fingerprint covers only those)
__getattr__, __dir__ = attach(__name__, {
    'knot_scan': 'rcurves.claims.compare:knot_scan',
    'mcnemar_scan': 'rcurves.claims.compare:mcnemar_scan',
    'paired_order_test': 'rcurves.claims.compare:paired_order_test',
    'significant_reversal': 'rcurves.claims.compare:significant_reversal',
    'Agreement': 'rcurves.claims.agreement:Agreement',
    'agreement_with_reference': 'rcurves.claims.agreement:agreement_with_reference',
    'mcnemar_exact': 'rcurves.claims.agreement:mcnemar_exact',
    'KINDS': 'rcurves.claims.verdict:KINDS',
    'VERDICTS': 'rcurves.claims.verdict:VERDICTS',
    'Verdict': 'rcurves.claims.verdict:Verdict',
    'all_of': 'rcurves.claims.families:all_of',
    'binom_two_sided': 'rcurves.claims.paired_counts:binom_two_sided',
    'bonferroni': 'rcurves.claims.families:bonferroni',
    'correlation': 'rcurves.claims.rank_correlation:correlation',
    'correlation_power': 'rcurves.claims.rank_correlation:correlation_power',
    'gain_below': 'rcurves.claims.paired_counts:gain_below',
    'greater': 'rcurves.claims.paired_values:greater',
    'holm': 'rcurves.claims.families:holm',
    'min_discordant': 'rcurves.claims.paired_counts:min_discordant',
    'null_effect': 'rcurves.claims.paired_counts:null_effect',
    'paired_direction': 'rcurves.claims.paired_counts:paired_direction',
    'paired_effect': 'rcurves.claims.paired_counts:paired_effect',
    'rate_below': 'rcurves.claims.rates:rate_below',
    'rate_matches': 'rcurves.claims.rates:rate_matches',
    'rate_near': 'rcurves.claims.rates:rate_near',
    'share_lower': 'rcurves.claims.rates:share_lower',
    'value_matches': 'rcurves.claims.rates:value_matches',
    'wilson': 'rcurves.claims.rates:wilson',
    'claim': 'rcurves.claims.record:claim',
    'code_fingerprint': 'rcurves.claims.record:code_fingerprint',
    'is_stale': 'rcurves.claims.record:is_stale',
    'changed_files': 'rcurves.claims.record:changed_files',
    'code_digest': 'rcurves.claims.record:code_digest',
    'write_result': 'rcurves.claims.record:write_result',
})

__all__ = sorted(['knot_scan', 'mcnemar_scan', 'paired_order_test', 'significant_reversal', 'Agreement', 'agreement_with_reference', 'mcnemar_exact', 'KINDS', 'VERDICTS', 'Verdict', 'all_of', 'binom_two_sided', 'bonferroni', 'correlation', 'correlation_power', 'gain_below', 'greater', 'holm', 'min_discordant', 'null_effect', 'paired_direction', 'paired_effect', 'rate_below', 'rate_matches', 'rate_near', 'share_lower', 'value_matches', 'wilson', 'claim', 'code_fingerprint', 'is_stale', 'changed_files', 'code_digest', 'write_result'])
