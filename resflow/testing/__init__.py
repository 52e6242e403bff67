"""Testing: hypothesis strategies for resflow's objects, and checks of a law against a construction.

For users who property-test depth-scaling theory, in the manner of ``xarray.testing.strategies``::

    from hypothesis import given
    from resflow.testing import strategies as rst, checks

    @given(teacher=rst.teachers(families=("independent",)))
    def test_block_sum_students_follow_the_ensemble_law(teacher):
        checks.assert_construction_follows_law(teacher, "finite-teacher-ensemble")

==============  ==========================================================================
module          what it holds
==============  ==========================================================================
``strategies``  hypothesis strategies: seeds, noise parameters, depth correlations and their spec
                strings, tableaux, noisy ensembles, teacher configurations and teachers, depths that
                divide a teacher's, constructions
``checks``      tolerances derived from the sample size, and the checks built on them: a simulated
                mean square against a law, a construction's exponent against a law's, a residual
                stack against its ODE's order
==============  ==========================================================================

Needs hypothesis (``pip install "resflow[testing]"``); importing ``resflow`` does not import this package.
"""

from . import checks, strategies

__all__ = ["strategies", "checks"]
