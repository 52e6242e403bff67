"""Checks of a law against what simulates it, with tolerances derived from the sample size.

A property test draws objects (:mod:`resflow.testing.strategies`) and calls one of these; each raises
``AssertionError`` with the numbers when the law and the simulation disagree beyond the tolerance, which comes
from the sample size (and, for laws that hold to leading order only, a ``slack`` the caller states).

* :func:`assert_ensemble_matches_law`: a noisy ensemble's simulated mean square against its closed-form law
  (``ensemble-equicorrelated``, ``ensemble-fractional``); the estimate of N draws is the law times
  :math:`\\chi^2_N / N`, so the tolerance is ``z`` standard errors :math:`\\sqrt{2/N}`.
* :func:`assert_construction_follows_law`: constructions of several teachers
  (:mod:`resflow.probing.constructions`) against a finite-teacher law's exponent: the mean of their law α is
  within a Student-t interval over the teachers (plus ``slack``) of the law's.
* :func:`assert_local_exponent_approaches`: for an asymptotic law, the construction's local exponent between
  its two deepest depths is within a tolerance of the law's.
* :func:`assert_stack_has_order`: a residual stack of a scheme of order p converges to its ODE with the
  squared error falling as :math:`L^{-2p}` (the ``discretisation-error`` law).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy import stats

from .. import laws
from ..dynamics.fields import rmsnorm
from ..dynamics.stack import ResidualStack
from ..dynamics.tableau import get_tableau
from ..fitting.law_fit import finite_teacher_factor
from ..noise.correlation import Equicorrelated, Fractional
from ..probing.constructions import construction_loss

__all__ = ["mse_tolerance", "mean_tolerance", "ensemble_law", "assert_ensemble_matches_law",
           "construction_exponent", "assert_construction_follows_law", "assert_local_exponent_approaches",
           "assert_stack_has_order"]


def mse_tolerance(n_samples: int, z: float = 5.0) -> float:
    """Relative tolerance of a mean square of ``n_samples`` Gaussian draws: ``z`` standard errors
    :math:`\\sqrt{2/N}` (z = 5: a false alarm about once in 1.7 million checks)."""
    if int(n_samples) < 1:
        raise ValueError(f"n_samples: a positive number of draws; got {n_samples!r}.")
    return z * math.sqrt(2.0 / int(n_samples))


def mean_tolerance(values: Sequence[float], confidence: float = 0.99) -> float:
    """Half-width of the Student-t interval of the mean of ``values`` (at least two) at ``confidence``."""
    values = np.asarray(values, float)
    if values.size < 2:
        raise ValueError(f"values: at least two independent values are needed for an interval; "
                         f"got {values.size}.")
    t = stats.t.ppf(0.5 + confidence / 2, values.size - 1)
    return float(t * values.std(ddof=1) / math.sqrt(values.size))


def ensemble_law(ensemble) -> tuple[str, float] | None:
    """The derived law of a :class:`~resflow.NoisyEnsemble`'s mean square error, ``(name, value)``; None for a
    correlation with no closed form (e.g. grouped)."""
    correlation = ensemble.correlation
    n, sigma = ensemble.n_members, ensemble.sigma
    if isinstance(correlation, Equicorrelated):
        return "ensemble-equicorrelated", float(laws.evaluate("ensemble-equicorrelated", L=n, sigma=sigma,
                                                              rho=correlation.rho))
    if isinstance(correlation, Fractional):
        return "ensemble-fractional", float(laws.evaluate("ensemble-fractional", L=n, sigma=sigma,
                                                          H=correlation.hurst))
    return None


def assert_ensemble_matches_law(ensemble, *, n_samples: int = 20_000, seed: int = 0, z: float = 5.0) -> None:
    """The simulated mean square of ``n_samples`` outputs of ``ensemble`` (zero signal) is its law's value
    (:func:`ensemble_law`; the exact covariance sum where there is none) within :func:`mse_tolerance`."""
    found = ensemble_law(ensemble)
    name, law = found if found is not None else ("exact covariance sum", ensemble.exact_mse())
    out = ensemble(torch.zeros(int(n_samples), dtype=torch.float64), seed=seed)
    simulated = float(out.square().mean())
    tolerance = mse_tolerance(n_samples, z)
    assert abs(simulated / law - 1) <= tolerance, (
        f"{ensemble!r}: simulated mean square {simulated:.6g} is {simulated / law - 1:+.2%} off the law "
        f"{name} ({law:.6g}); tolerance ±{tolerance:.2%} ({z:g} standard errors of {n_samples} draws)")


def _depths(teacher, depths) -> np.ndarray:
    if depths is None:  # powers of two from 2 up to half the teacher's depth
        depths = [2**i for i in range(1, teacher.depth.bit_length()) if 2**i <= teacher.depth // 2]
    depths = np.asarray([int(d) for d in depths])
    if depths.size < 2 or np.any(teacher.depth % depths):
        raise ValueError(f"depths: at least two depths that divide the teacher's depth {teacher.depth}; "
                         f"got {depths.tolist()}.")
    return depths


def construction_exponent(teacher, law: str, *, depths=None, scheme: str = "euler", n_inputs: int = 4096,
                          seed: int = 0) -> tuple[float, np.ndarray]:
    """The law α of ``teacher``'s constructions (least-squares slope of log(loss / F) on log depth, F the
    law's finite-teacher factor) and the local exponents between successive depths."""
    depths = _depths(teacher, depths)
    x = teacher.sample_inputs(int(n_inputs), seed=seed).to(teacher.head.dtype)
    losses = np.array([construction_loss(teacher, int(d), scheme, x) for d in depths])
    adjusted = np.log(losses / finite_teacher_factor(law, depths, float(teacher.depth)))
    logd = np.log(depths)
    return float(-np.polyfit(logd, adjusted, 1)[0]), -np.diff(adjusted) / np.diff(logd)


def _law_exponent(law: str) -> float:
    """The law's exponent against an infinitely deep teacher (its local exponent far from the teacher)."""
    return float(np.asarray(laws.exponent(law, ell=np.array([4.0]), L_T=1e12, A=1.0)).ravel()[0])


def assert_construction_follows_law(teachers, law: str, *, exponent: float | None = None, slack: float = 0.05,
                                    confidence: float = 0.99, **kwargs) -> None:
    """The mean law α of the constructions of ``teachers`` (at least two, independent draws) is the law's
    ``exponent`` (default: the law's own, e.g. 1 for ``finite-teacher-ensemble``) within the Student-t
    half-width over the teachers plus ``slack`` (the corrections to leading order the caller accepts).
    ``kwargs`` go to :func:`construction_exponent`."""
    configs = [t.config for t in teachers]
    if len(set(configs)) < len(configs):
        raise ValueError("teachers: the spread over teachers is the tolerance, so they must be independent "
                         "draws; two are the same teacher (same configuration and seed). "
                         "resflow.testing.strategies.teacher_sets draws distinct seeds.")
    alphas = np.array([construction_exponent(t, law, **kwargs)[0] for t in teachers])
    target = _law_exponent(law) if exponent is None else float(exponent)
    tolerance = mean_tolerance(alphas, confidence) + slack
    assert abs(alphas.mean() - target) <= tolerance, (
        f"constructions' law α {alphas.mean():.3f} (teachers: {np.round(alphas, 3).tolist()}) is not the law "
        f"{law}'s {target:g} within ±{tolerance:.3f} ({confidence:.0%} t-interval over {alphas.size} "
        f"teachers + slack {slack:g})")


def assert_local_exponent_approaches(teacher, law: str, *, exponent: float | None = None,
                                     tolerance: float = 0.1, **kwargs) -> None:
    """For a law that holds as depth grows: the constructions' local law exponent at the deepest pair of
    depths is within ``tolerance`` of the law's (shallower pairs may be further off)."""
    _, local = construction_exponent(teacher, law, **kwargs)
    target = _law_exponent(law) if exponent is None else float(exponent)
    assert abs(local[-1] - target) <= tolerance, (
        f"local law exponents {np.round(local, 3).tolist()} of the teacher ({teacher.extra_repr()}) "
        f"do not approach {law}'s {target:g} "
        f"(tolerance {tolerance:g} at the deepest pair)")


def assert_stack_has_order(field, scheme: str, *, horizon: float = 1.0, depths=(8, 16, 32), batch: int = 64,
                           seed: int = 0, tolerance: float = 0.3) -> None:
    """A residual stack of ``field`` with ``scheme`` (order p) converges to the flow: the squared error
    against a stack 16 times deeper falls between the two deepest of ``depths`` as :math:`L^{-2p}`, within
    ``tolerance`` in the exponent (the ``discretisation-error`` law, exponent 2p; shallower pairs are
    pre-asymptotic).  The law needs a smooth field: a relu² field is C¹ only and loses orders above 2."""
    order = get_tableau(scheme).order
    gen = torch.Generator().manual_seed(seed)
    dim = getattr(field, "dim", None) or field.A.shape[0]
    h0 = rmsnorm(torch.randn(batch, dim, generator=gen, dtype=torch.float64))
    with torch.no_grad():
        reference = ResidualStack(field, 16 * max(depths), scheme=scheme, horizon=horizon)(h0)
        errors = np.array([float((ResidualStack(field, d, scheme=scheme, horizon=horizon)(h0) - reference)
                                 .square().mean()) for d in depths])
    local = -np.diff(np.log(errors)) / np.diff(np.log(np.asarray(depths, float)))
    target = float(laws.exponent("discretisation-error", C=1.0, T=horizon, L=float(depths[0]), p=order,
                                 **{"lambda": 1.0}))
    assert abs(local[-1] - target) <= tolerance, (
        f"{scheme} (order {order}) on {field!r}: local exponents of the squared error "
        f"{np.round(local, 2).tolist()}, the law says {target:g} (tolerance {tolerance:g})")
