"""Fitting: depth exponents of a run, their intervals and verdicts, and the laws they are read against.

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``fits``           depth exponents of a run from every depth's best loss over routes: plain, law-aware,
                   offset, asymptotic; verdicts v3 and v2; the regime
``certification``  verdict v3: a depth is certified when its training routes agree and every tail passes
``allocation``     the next run's budget: more steps for the depths verdict v3 did not certify
``separation``     the first answer: tied minus independent exponents, paired, and whether they separate
``intervals``      one estimator and its interval from independent replicates (Student t; batch bootstrap)
``power_law``      one curve: the plain exponent, and the offset law A l^-alpha + C
``profile``        the offset law profiled jointly over offset and exponent: an interval, or "not identified"
``law_fit``        the finite-teacher factor of the law-aware fit
``verdict``        the convergence verdict (v2): the exponent's drift and every depth's remaining gain
``extrapolation``  the loss along training lengths: its limit, the remaining gain, the asymptotic exponent;
                   the tail test of verdict v3
``regimes``        the regime an exponent is consistent with (from the derived laws)
``roughness``      the roughness law's predictions for a run of correlated/fractional teachers
``hierarchy``      students of Random Hierarchy Model data: the depth at which the loss drops
``fit_records``    fits as ``fit`` store records and back
=================  ==========================================================================

Reads labelled Datasets (``toy-run`` records); trains nothing, draws nothing, opens no store.  The
public names are re-exported by :mod:`resflow.analysis`.
"""
