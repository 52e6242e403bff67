"""Shared hypothesis strategies for resflow's property tests: the public ones of :mod:`resflow.testing`."""

from resflow.testing import strategies as rst

sigmas = rst.sigmas()
rhos = rst.rhos()
hursts = rst.hursts()
members = rst.members()
seeds = rst.seeds()


def examples(n: int) -> int:
    """``n`` examples under the default profile, scaled up under the slow one (``HYPOTHESIS_PROFILE=slow``)."""
    from hypothesis import settings

    return max(1, n * settings.default.max_examples // 100)
