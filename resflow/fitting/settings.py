"""How a run's series are fitted: the confidence, the bootstrap and every verdict's tolerance, as one value
that a fit record keeps (so a record fitted otherwise is fitted again rather than read back)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from .._validate import check_int, check_real
from .certification import ROUTE_TOLERANCE
from .drift import EXPONENT_TOLERANCE
from .extrapolation import TAIL_TOLERANCE
from .intervals import BOOTSTRAP_SAMPLES, CONFIDENCE
from .verdict import DRIFT_TOLERANCE, GAIN_TOLERANCE

__all__ = ["FitSettings", "VERDICT"]

VERDICT = "v4.1"  # the fitting procedure's version, bumped whenever what a fit computes changes (v4.1: #53)


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    """How a run's series are fitted."""

    confidence: float = CONFIDENCE
    bootstrap_samples: int = BOOTSTRAP_SAMPLES
    drift_tolerance: float = DRIFT_TOLERANCE
    gain_tolerance: float = GAIN_TOLERANCE
    route_tolerance: float = ROUTE_TOLERANCE
    tail_tolerance: float = TAIL_TOLERANCE
    exponent_tolerance: float = EXPONENT_TOLERANCE

    def __post_init__(self) -> None:
        object.__setattr__(self, "confidence", check_real("confidence", self.confidence, low=0.0, high=1.0,
                                                          low_open=True, high_open=True))
        object.__setattr__(self, "bootstrap_samples", check_int("bootstrap_samples", self.bootstrap_samples,
                                                                minimum=10))
        for name in ("drift_tolerance", "gain_tolerance", "route_tolerance", "tail_tolerance",
                     "exponent_tolerance"):
            object.__setattr__(self, name, check_real(name, getattr(self, name), low=0.0, low_open=True))

    def to_json(self) -> str:
        """The settings as a fit record holds them, with the procedure's version (``VERDICT``): a record
        fitted by another verdict or with other tolerances is fitted again rather than read back."""
        return json.dumps({**dataclasses.asdict(self), "verdict": VERDICT}, sort_keys=True)
