"""Fitting: depth exponents of a run, their intervals and verdicts, and the laws they are read against.

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``fits``           depth exponents of a run from every depth's best loss over routes: plain, law-aware,
                   offset, asymptotic; verdicts v4 and v2; the regime
``certification``  verdict v4: routes agree at every depth (best students) and the exponent has stopped moving
``drift``          the exponent along training and its remaining drift (Aitken, Fieller, a stated cap)
``settings``       :class:`FitSettings`: the confidence and every verdict's tolerance, kept with a fit record
``allocation``     the next run's budget: more steps where verdict v4 did not certify
``separation``     the first answer: tied minus independent exponents, paired, and whether they separate
``intervals``      one estimator and its interval from independent replicates (Student t; batch bootstrap)
``power_law``      one curve: the plain exponent, and the offset law A l^-alpha + C
``profile``        the offset law profiled jointly over offset and exponent: an interval, or "not identified"
``law_fit``        the finite-teacher factor of the law-aware fit
``verdict``        the convergence verdict (v2): the exponent's drift and every depth's remaining gain
``extrapolation``  the loss along training lengths: its limit, the remaining gain, the asymptotic exponent;
                   the tail test (a diagnostic of verdict v4)
``regimes``        the regime an exponent is consistent with (from the derived laws)
``roughness``      the roughness law's predictions for a run of correlated/fractional teachers
``hierarchy``      students of Random Hierarchy Model data: the depth at which the loss drops
``fit_records``    fits as ``fit`` store records and back
=================  ==========================================================================

Reads labelled Datasets (``toy-run`` records); trains nothing, draws nothing, opens no store.  The
public names are re-exported by :mod:`resflow.analysis`.
"""
