"""Trained-LLM scaling data with width and depth: the Chinchilla table, or any CSV of the same shape.

Any table with a row per trained model and columns for the final loss, training tokens, width and
number of layers can be fitted (``REQUIRED_COLUMNS``; other header names are mapped with
``columns={"n_layers": "depth", ...}``); parameter count and training compute (``OPTIONAL_COLUMNS``)
are kept in the record when present but no fit needs them.

The Chinchilla table (245 models; columns ``model_size, FLOP, loss, num_tokens, d_model, n_layers``)
is Epoch AI's reconstruction of Hoffmann et al. 2022, Fig. 4 (Besiroglu et al. 2024, "Chinchilla
Scaling: A replication attempt"), with ``d_model`` and ``n_layers`` attached from Hoffmann et al.'s
Table A9 by Liu, Kangaslahti, Liu & Gore (arXiv:2602.05970).  It carries no license, so resflow
never ships it: it is read from a path, from ``$RESFLOW_DATA_DIR/chinchilla_depth_width.csv``, or
downloaded with pooch from the public location, checked against a pinned sha256.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from ...errors import ConfigError

__all__ = ["REQUIRED_COLUMNS", "OPTIONAL_COLUMNS", "CHINCHILLA", "resolve_table_path", "load_scaling_table",
           "table_dataset", "parse_column_map"]

REQUIRED_COLUMNS = ("loss", "num_tokens", "d_model", "n_layers")  # what the L(m, l, D) fit reads
OPTIONAL_COLUMNS = ("model_size", "FLOP")  # carried into the record when the table has them
CHINCHILLA = {
    "file": "chinchilla_depth_width.csv",
    "sha256": "cb474e8f5fc87be4132190a0c782d1521c4f06b9c041395b3a78ff2ffc34f83e",
    "url": "https://raw.githubusercontent.com/liuyz0/DepthScaling/main/Scaling/"
           "get_fitting_data_chinchilla.csv",
    "source": "Besiroglu et al. 2024 (Epoch AI) reconstruction of Hoffmann et al. 2022 Fig. 4; widths and "
              "depths from Hoffmann et al. Table A9 via Liu et al. arXiv:2602.05970",
    "license": "none stated by either source repository (not redistributed by resflow)",
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def resolve_table_path(path: str | Path | None = None, *, download: bool = False) -> Path:
    """The CSV to read: ``path``; else ``$RESFLOW_DATA_DIR/chinchilla_depth_width.csv``; else (with
    ``download``) the pooch-cached download, verified against the pinned sha256."""
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"data file {str(path)!r} does not exist; pass the path of a CSV with columns "
                              f"{', '.join(REQUIRED_COLUMNS)}.")
        return path
    env = os.environ.get("RESFLOW_DATA_DIR")
    if env:
        candidate = Path(env) / CHINCHILLA["file"]
        if candidate.is_file():
            if _sha256(candidate) != CHINCHILLA["sha256"]:
                warnings.warn(f"{candidate} differs from the pinned Chinchilla table (sha256 mismatch); "
                              "using it as given.", stacklevel=2)
            return candidate
    if download:
        import pooch

        try:
            return Path(pooch.retrieve(CHINCHILLA["url"], known_hash=f"sha256:{CHINCHILLA['sha256']}",
                                       fname=CHINCHILLA["file"], path=pooch.os_cache("resflow")))
        except Exception as exc:  # network errors come in many types
            raise ConfigError(f"could not download the Chinchilla table ({type(exc).__name__}: {exc}); "
                              "pass --data PATH or set RESFLOW_DATA_DIR.") from None
    raise ConfigError("no data: pass --data PATH (a CSV with columns " + ", ".join(REQUIRED_COLUMNS) +
                      f"), set RESFLOW_DATA_DIR to a folder holding {CHINCHILLA['file']}, "
                      "or allow --download.")


def parse_column_map(spec: str | None) -> dict[str, str]:
    """``"d_model=width,n_layers=depth"`` -> ``{"d_model": "width", "n_layers": "depth"}``
    (expected=actual)."""
    if not spec:
        return {}
    out = {}
    for item in spec.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"--columns expects expected=actual pairs separated by commas; got {item!r}.")
        if key.strip() not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS:
            raise ConfigError(f"--columns: {key.strip()!r} is not an expected column "
                              f"({', '.join(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)}).")
        out[key.strip()] = value.strip()
    return out


def load_scaling_table(path: str | Path | None = None, *, columns: dict[str, str] | None = None,
                       download: bool = False) -> pd.DataFrame:
    """Read and validate a scaling table; returns the required columns (and the optional ones it has) as
    floats.

    ``attrs``: ``path``, ``sha256`` and ``chinchilla`` (whether this is the pinned Chinchilla table, the one
    table the study's exclusion of its 40 highest losses is meant for)."""
    path = resolve_table_path(path, download=download)
    try:
        raw = pd.read_csv(path)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ConfigError(f"cannot parse {str(path)!r} as CSV ({exc}).") from None
    columns = columns or {}
    headers = [str(c) for c in raw.columns]
    duplicated = sorted({c for c in headers
                         if c.rpartition(".")[2].isdigit() and c.rpartition(".")[0] in headers})
    if duplicated:  # pandas renames a repeated header "x" to "x.1"
        raise ConfigError(f"{str(path)!r} repeats the column(s) {duplicated}; give each column one header.")
    frame = {}
    for name in REQUIRED_COLUMNS + OPTIONAL_COLUMNS:
        actual = columns.get(name, name)
        if actual not in raw.columns:
            if name in OPTIONAL_COLUMNS:
                continue
            raise ConfigError(f"{str(path)!r} has no column {actual!r} (needed for {name!r}); "
                              f"its columns are {list(raw.columns)}. "
                              f"Map names with --columns {name}=<your column>.")
        values = pd.to_numeric(raw[actual], errors="coerce")
        bad = np.flatnonzero(~np.isfinite(values.to_numpy(dtype=float)) | (values.to_numpy(dtype=float) <= 0))
        if bad.size:
            raise ConfigError(f"column {actual!r} of {str(path)!r} must hold positive numbers; "
                              f"row {int(bad[0]) + 2} has {raw[actual].iloc[bad[0]]!r}.")
        frame[name] = values.astype(float)
    table = pd.DataFrame(frame)
    if len(table) < 10:
        raise ConfigError(f"{str(path)!r} has {len(table)} rows; the seven-parameter fit needs at least 10.")
    table.attrs["path"] = str(path)
    table.attrs["sha256"] = _sha256(path)
    # the study's cut applies to it only
    table.attrs["chinchilla"] = table.attrs["sha256"] == CHINCHILLA["sha256"]
    return table


def table_dataset(table: pd.DataFrame, *, source: str, license: str) -> xr.Dataset:
    """An ``llm-data`` record: one row per model on dim ``model``."""
    n = len(table)
    spec = {
        "m": ("d_model", "model width d_model", "1"),
        "ell": ("n_layers", "number of layers", "layers"),
        "D": ("num_tokens", "training tokens", "tokens"),
        "N": ("model_size", "parameters", "parameters"),
        "FLOP": ("FLOP", "training compute", "FLOP"),
        "loss": ("loss", "final training loss", "nat/token"),
    }
    return xr.Dataset(
        {name: (("model",), table[col].to_numpy(float), {"long_name": long, "units": units})
         for name, (col, long, units) in spec.items() if col in table.columns},
        coords={"model": ("model", np.arange(n), {"long_name": "row of the source table"})},
        attrs={"source": source, "license": license, "path": table.attrs.get("path", "")},
    )
