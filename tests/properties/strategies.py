"""Shared hypothesis strategies for resflow's property tests."""

from hypothesis import strategies as st

sigmas = st.floats(min_value=1e-2, max_value=10.0, allow_nan=False)
rhos = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
hursts = st.floats(min_value=0.05, max_value=0.95, allow_nan=False)
members = st.integers(min_value=1, max_value=200)
seeds = st.integers(min_value=0, max_value=2**31 - 1)


def examples(n: int) -> int:
    """``n`` examples under the default profile, scaled up under the slow one (``HYPOTHESIS_PROFILE=slow``)."""
    from hypothesis import settings

    return max(1, n * settings.default.max_examples // 100)
