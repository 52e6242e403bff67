"""Hypothesis strategies for resflow's objects (see :mod:`resflow.testing`).

Every strategy draws valid objects only, with sizes small enough for a property test to run many examples
on a CPU; the keyword arguments narrow them (e.g. ``teachers(families=("tied",), depths=(16,))``).
"""

from __future__ import annotations

try:
    from hypothesis import strategies as st
except ImportError as error:  # pragma: no cover - the testing extra is missing
    raise ImportError("resflow.testing needs hypothesis: pip install 'resflow[testing]' "
                      "(or pip install hypothesis).") from error

from ..dynamics.tableau import TABLEAUX
from ..noise.correlation import DepthCorrelation, Equicorrelated, Fractional, Grouped
from ..noise.ensemble import NoisyEnsemble
from ..training.teacher import TEACHER_FAMILIES, Teacher, TeacherConfig

__all__ = ["seeds", "sigmas", "rhos", "hursts", "members", "correlations", "correlation_specs", "tableaux",
           "noisy_ensembles", "teacher_configs", "teachers", "teacher_sets", "divisor_depths",
           "constructions"]


def seeds() -> st.SearchStrategy[int]:
    """Seeds of resflow's random draws (non-negative 31-bit integers)."""
    return st.integers(min_value=0, max_value=2**31 - 1)


def sigmas(low: float = 1e-2, high: float = 10.0) -> st.SearchStrategy[float]:
    """Noise scales σ of a noisy ensemble, in ``[low, high]``."""
    return st.floats(min_value=low, max_value=high, allow_nan=False)


def rhos() -> st.SearchStrategy[float]:
    """Layer correlations ρ in [0, 1]."""
    return st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def hursts(low: float = 0.05, high: float = 0.95) -> st.SearchStrategy[float]:
    """Hurst indices H of fractional noise, in ``[low, high]`` (inside (0, 1))."""
    return st.floats(min_value=low, max_value=high, allow_nan=False)


def members(high: int = 200) -> st.SearchStrategy[int]:
    """Ensemble sizes (depths of a noisy ensemble), 1 to ``high``."""
    return st.integers(min_value=1, max_value=high)


@st.composite
def correlations(draw, kinds=("equicorrelated", "fractional", "grouped"), max_groups: int = 8
                 ) -> DepthCorrelation:
    """Depth correlations: :class:`~resflow.Equicorrelated` (ρ), :class:`~resflow.Fractional` (H) or
    :class:`~resflow.Grouped` (K up to ``max_groups``, ρ within a group)."""
    kind = draw(st.sampled_from(tuple(kinds)))
    if kind == "equicorrelated":
        return Equicorrelated(draw(rhos()))
    if kind == "fractional":
        return Fractional(draw(hursts()))
    return Grouped(draw(st.integers(1, max_groups)), draw(rhos()))


def correlation_specs(**kwargs) -> st.SearchStrategy[str]:
    """Spec strings of :func:`correlations` (``"correlated:0.3"``, ``"fractional:0.7"``, ``"grouped:4:1"``):
    what ``Teacher``, ``NoisyEnsemble`` and ``--set targets=`` accept."""
    return correlations(**kwargs).map(lambda c: c.label)


def tableaux(min_order: int = 1, max_order: int = 8) -> st.SearchStrategy[str]:
    """Names of registered explicit Runge–Kutta schemes (:data:`resflow.TABLEAUX`) of an order in range."""
    names = sorted(n for n, t in TABLEAUX.items() if min_order <= t.order <= max_order)
    return st.sampled_from(names)


@st.composite
def noisy_ensembles(draw, max_members: int = 200) -> NoisyEnsemble:
    """Noisy ensembles of up to ``max_members`` members, any noise scale and depth correlation."""
    return NoisyEnsemble(draw(members(max_members)), draw(sigmas()), draw(correlations()))


@st.composite
def teacher_configs(draw, families=("independent", "tied", "correlated", "fractional", "grouped"),
                    widths=(4, 8, 16), depths=(8, 16, 32), hidden=None) -> TeacherConfig:
    """Teacher configurations of the given families, widths and depths (powers of two by default, so that
    every halving of a depth is a student depth); ``hidden`` fixes the MLP width (default 4 × width)."""
    unknown = sorted(set(families) - set(TEACHER_FAMILIES))
    if unknown:
        raise ValueError(f"families: unknown teacher families {unknown}; use some of {TEACHER_FAMILIES}.")
    family = draw(st.sampled_from(tuple(families)))
    depth = draw(st.sampled_from(tuple(depths)))
    values = {"family": family, "width": draw(st.sampled_from(tuple(widths))), "depth": depth,
              "hidden": hidden, "seed": draw(st.integers(0, 2**16))}
    if family == "correlated":
        values["rho"] = draw(rhos())
    elif family == "fractional":
        values |= {"hurst": draw(hursts()), "init": "gaussian"}
    elif family == "grouped":
        values |= {"groups": draw(st.sampled_from([k for k in (1, 2, 4, 8) if k <= depth])), "rho": 1.0}
    return TeacherConfig(**values)


def teachers(**kwargs) -> st.SearchStrategy[Teacher]:
    """Teachers built from :func:`teacher_configs` (same keywords), in float64."""
    return teacher_configs(**kwargs).map(lambda config: Teacher(config).double())


@st.composite
def teacher_sets(draw, size: int = 3, **kwargs) -> list[Teacher]:
    """``size`` teachers of one configuration drawn by :func:`teacher_configs` (same keywords) that differ
    only in their seeds: independent draws of one teacher family, what a check over teachers needs."""
    config = draw(teacher_configs(**kwargs))
    seeds_ = draw(st.lists(st.integers(0, 2**16), min_size=size, max_size=size, unique=True))
    return [Teacher(config, seed=seed).double() for seed in seeds_]


def divisor_depths(teacher_depth: int, min_depth: int = 1) -> st.SearchStrategy[int]:
    """Student depths that divide ``teacher_depth`` (where a construction is defined), at least
    ``min_depth``."""
    choices = [d for d in range(max(1, min_depth), teacher_depth + 1) if teacher_depth % d == 0]
    if not choices:
        raise ValueError(f"min_depth: no depth >= {min_depth} divides the teacher depth {teacher_depth}.")
    return st.sampled_from(choices)


@st.composite
def constructions(draw, schemes=None, **teacher_kwargs) -> tuple[Teacher, int, str]:
    """``(teacher, depth, scheme)`` triples where a construction (:mod:`resflow.probing.constructions`) is
    defined: the depth divides the teacher's; schemes from :func:`tableaux` unless given."""
    teacher = draw(teachers(**teacher_kwargs))
    depth = draw(divisor_depths(teacher.depth))
    scheme = draw(st.sampled_from(tuple(schemes)) if schemes else tableaux())
    return teacher, depth, scheme
