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
# `make test-slow`: ten times the examples (tests/properties scale their own counts with it)
settings.register_profile(
    "slow", derandomize=True, deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

torch.set_num_threads(1)  # the suite runs two workers on two cores


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def pytest_terminal_summary(terminalreporter):
    """Print how many generated cases the fuzz tests tried (summed over workers) and the demos' seconds."""
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        for name, value in getattr(report, "user_properties", []):
            if name.startswith("fuzz_"):
                counts[name] = counts.get(name, 0) + int(value)
            elif name.startswith("demo_seconds_"):
                seconds[name[len("demo_seconds_"):]] = float(value)
    if counts:
        terminalreporter.write_line("fuzz: " + ", ".join(f"{n[len('fuzz_'):].replace('_', ' ')} {v}"
                                                         for n, v in sorted(counts.items())))
    if seconds:
        terminalreporter.write_line("demos (s, two workers sharing two cores): "
                                    + ", ".join(f"{n} {v:.1f}" for n, v in seconds.items()))
