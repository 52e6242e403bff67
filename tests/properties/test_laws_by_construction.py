"""Every law with a construction, property-tested with the public strategies and checks of resflow.testing:
noisy ensembles (ensemble-equicorrelated, ensemble-fractional), block-sum students (finite-teacher-ensemble),
teacher-field Euler students (finite-teacher-procedural-coherent) and residual stacks of smooth fields
(discretisation-error)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from resflow import Teacher
from resflow.dynamics import MLPField
from resflow.testing import checks
from resflow.testing import strategies as rst

from .strategies import examples


@settings(max_examples=examples(20), deadline=None)
@given(ensemble=rst.noisy_ensembles())
def test_a_noisy_ensemble_has_its_laws_mean_square(ensemble):
    checks.assert_ensemble_matches_law(ensemble)


@settings(max_examples=examples(5), deadline=None)
@given(teachers=rst.teacher_sets(3, families=("independent",), widths=(8, 16), depths=(32,)))
def test_block_sum_students_follow_the_finite_teacher_ensemble_law(teachers):
    checks.assert_construction_follows_law(teachers, "finite-teacher-ensemble", n_inputs=2048)


@settings(max_examples=examples(5), deadline=None)
@given(teacher=rst.teachers(families=("tied",), widths=(8, 16), depths=(32, 64)))
def test_teacher_field_euler_students_approach_the_coherent_law(teacher):
    checks.assert_local_exponent_approaches(teacher, "finite-teacher-procedural-coherent", n_inputs=2048)


@settings(max_examples=examples(10), deadline=None)
@given(scheme=rst.tableaux(max_order=4), seed=rst.seeds(), dim=st.integers(2, 8))
def test_a_stack_of_a_smooth_field_has_its_schemes_order(scheme, seed, dim):
    field = MLPField(dim, hidden=16, seed=seed, dtype=torch.float64, activation="softplus2")
    checks.assert_stack_has_order(field, scheme)


def test_the_checks_refuse_what_is_not_the_law():
    """Each check can fail: the smooth teacher's exponent for the rough one's constructions, the incoherent law
    for the smooth teacher's (coherent) Euler construction, one teacher three times, a non-smooth field at
    order 4."""
    teachers = [Teacher("independent", width=16, depth=32, seed=s).double() for s in range(3)]
    with pytest.raises(AssertionError, match="is not the law"):
        checks.assert_construction_follows_law(teachers, "finite-teacher-ensemble", exponent=2.0, n_inputs=2048)
    tied = Teacher("tied", width=16, depth=32, seed=0).double()
    with pytest.raises(AssertionError, match="do not approach"):
        checks.assert_local_exponent_approaches(tied, "finite-teacher-procedural-incoherent", n_inputs=2048)
    with pytest.raises(ValueError, match="independent draws"):
        checks.assert_construction_follows_law([teachers[0]] * 3, "finite-teacher-ensemble")
    relu = MLPField(2, hidden=16, seed=0, dtype=torch.float64)  # relu²: C¹ only, fourth order is lost
    with pytest.raises(AssertionError, match="the law says 8"):
        checks.assert_stack_has_order(relu, "rk38")


def test_the_ensemble_check_refuses_a_simulation_five_percent_off():
    """An ensemble whose outputs are 5% too large (mean square 10% off) fails at 20k draws, whose tolerance is
    5 standard errors √(2/N) = 5%; the same ensemble unscaled passes."""
    from resflow import NoisyEnsemble

    class Louder(NoisyEnsemble):
        def __call__(self, *args, **kwargs):
            return 1.05 * super().__call__(*args, **kwargs)

    checks.assert_ensemble_matches_law(NoisyEnsemble(16, 1.0, "correlated:0.3"))
    with pytest.raises(AssertionError, match="off the law"):
        checks.assert_ensemble_matches_law(Louder(16, 1.0, "correlated:0.3"))
