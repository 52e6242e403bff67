"""Run directories: every run writes into a new directory, so nothing written is ever overwritten."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ..errors import ConfigError

__all__ = ["new_run_dir"]


def new_run_dir(root: Path | str, prefix: str) -> Path:
    """Create and return a fresh directory ``root/<prefix>-<UTC timestamp>[-N]``.

    Raises :class:`~resflow.errors.ConfigError` if ``root`` exists and is not a directory.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"out must be a directory; {str(root)!r} exists and is a file. Choose another --out.")
    root.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1000):
        candidate = root / (f"{prefix}-{stamp}" if n == 0 else f"{prefix}-{stamp}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise ConfigError(f"could not create a new run directory under {str(root)!r}.")  # pragma: no cover
