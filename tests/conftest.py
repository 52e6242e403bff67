"""Shared test settings.  Hypothesis runs derandomised so CI is reproducible."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("explore", derandomize=False, deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

torch.set_num_threads(1)  # the suite runs two workers on two cores


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)
