"""Provenance attached to every figure and table resflow writes: config, seed, versions, commit."""

from __future__ import annotations

import datetime as _dt
import json
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["provenance", "git_commit", "package_version"]

_SOURCE_DIR = Path(__file__).resolve().parent


def package_version() -> str:
    """The installed version of resflow (``0+unknown`` from a source tree without an install)."""
    try:
        return version("resflow")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "0+unknown"


def git_commit() -> str:
    """Commit of the resflow source tree (``<sha>`` or ``<sha>-dirty``), or ``"unknown"``."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=_SOURCE_DIR, capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=_SOURCE_DIR, capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def provenance(config: Any = None, seed: int | None = None, **extra: Any) -> dict[str, str]:
    """A flat dict of strings describing how a result was made.

    Keys: ``config`` (JSON), ``seed``, ``resflow_version``, ``torch_version``, ``numpy_version``,
    ``python_version``, ``platform``, ``git_commit``, ``created`` (UTC, ISO 8601), plus ``extra``.
    Suitable for ``xarray.Dataset.attrs`` and PNG text chunks.
    """
    import numpy
    import torch

    if hasattr(config, "to_dict"):
        config = config.to_dict()
    record = {
        "config": json.dumps(config, sort_keys=True, default=str),
        "seed": "none" if seed is None else str(seed),
        "resflow_version": package_version(),
        "torch_version": torch.__version__,
        "numpy_version": numpy.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    record.update({key: str(value) for key, value in extra.items()})
    return record
