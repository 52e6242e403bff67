"""The result store: a directory of zarr records, one per run, written atomically.

Layout::

    STORE/
      resflow-store.json          schema marker {"schema": "resflow-store", "version": 1}
      runs/<record-id>.zarr/      one xarray Dataset per record (zarr format 2, consolidated)
      runs/.tmp-<pid>@<host>--<record-id>.zarr/
                                  a record being written by process <pid> on <host> (never read;
                                  left behind only by a crash; ``Store.gc`` removes it)
      work/<experiment>-<time>/   checkpoints, fits and figures of runs in progress or done;
                                  ``run.lock`` held while the run works (:mod:`.workdirs`)

A record is written to a temporary directory and renamed into place (``os.rename`` of a directory
is atomic on POSIX), so a reader never sees half a record and a crash leaves the previous state
readable.  Record ids are unique (kind, name, UTC time, random suffix) and a rename never replaces
an existing record, so appending never overwrites and several processes can write different runs
(or disjoint regions of one sweep) into one store at once.  Kinds and their variables are
documented in ``docs/design/store.md``; ``xarray.open_zarr(STORE/runs/<id>.zarr)`` opens any record.
:meth:`Store.check` loads every record and lists what a killed writer left behind;
:meth:`Store.gc` removes those leftovers (``resflow store check|gc``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xarray as xr

from .._atomic import atomic_write
from ..errors import ConfigError, ResflowError, UnknownNameError
from .workdirs import _host, new_run_dir

__all__ = ["Store", "StoreError", "RecordInfo", "Leftover", "StoreReport", "STORE_VERSION", "KIND_PATTERN",
           "Validator"]

STORE_SCHEMA = "resflow-store"
STORE_VERSION = 1
MARKER = "resflow-store.json"
# a kind's spelling; the kinds: resflow.records.kinds
KIND_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
Validator = Callable[[xr.Dataset], list[str]]  # a record -> what it lacks to be read as its kind
TMP_PREFIX = ".tmp-"
STALE_AFTER_S = 24 * 3600.0  # a leftover of a writer on another host is removed only when this old


class StoreError(ResflowError):
    """A store or record that cannot be read: corrupt, of an unknown schema version, or not a store."""


@dataclass(frozen=True)
class RecordInfo:
    id: str
    kind: str
    name: str
    created: str
    path: Path


@dataclass(frozen=True)
class Leftover:
    """Something a writer left in ``runs/`` or beside the marker that is not a finished record (or, listed by
    :func:`resflow.workflows.check_store`, a run directory of ``work/`` whose run did no work)."""

    path: Path
    what: str  # "partial record" | "marker temporary" | "unfinished run (no work done)"
    writer: str  # "<pid>@<host>" or "" when the name does not say
    writer_alive: bool  # the writer is a live process on this host (its leftover is still being written)
    age_s: float
    removable: bool  # what ``Store.gc`` would remove (see there)
    kept_because: str = ""  # why a leftover that is not removable is kept, where the fields above do not say


@dataclass
class StoreReport:
    """What :meth:`Store.check` found: finished records, unreadable ones, leftovers."""

    records: int = 0
    unreadable: dict[str, str] = field(default_factory=dict)  # record id -> error
    leftovers: list[Leftover] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unreadable


class Store:
    """A result store at ``path``.  Use :meth:`open` (``create=True`` to make a new one)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def open(cls, path: str | Path, *, create: bool = False) -> Store:
        path = Path(path)
        marker = path / MARKER
        if not path.exists():
            if not create:
                raise StoreError(f"no store at {str(path)!r}; "
                                 f"create it by running an experiment with --out {path}.")
            path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise StoreError(f"{str(path)!r} is a file, not a store directory.")
        if not marker.exists():
            # a creator killed before linking the marker leaves its temp file; one racing us links the marker
            # between our check and this listing
            foreign = [p for p in path.iterdir() if p.name not in ("runs", "work", MARKER)
                       and not p.name.startswith(f".{MARKER}.")]
            if foreign or not create:
                raise StoreError(
                    f"{str(path)!r} is not a resflow store (no {MARKER}); point to a store directory or a "
                    "new, empty one."
                )
            _write_marker(marker)
        try:
            meta = json.loads(marker.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise StoreError(f"the store marker {marker} is corrupt ({exc}); "
                             "the store cannot be trusted.") from None
        if not isinstance(meta, dict) or meta.get("schema") != STORE_SCHEMA:
            raise StoreError(f"{marker} does not describe a resflow store: {meta!r}.")
        if meta.get("version") != STORE_VERSION:
            raise StoreError(
                f"store schema version {meta.get('version')!r} is not supported by this resflow (version "
                f"{STORE_VERSION}); upgrade resflow or use a store written by this version."
            )
        if create:  # opening to read changes nothing; writers create these when they need them
            (path / "runs").mkdir(exist_ok=True)
            (path / "work").mkdir(exist_ok=True)
        return cls(path)

    # ------------------------------------------------------------------ writing
    def write(self, ds: xr.Dataset, *, kind: Any, name: str) -> str:
        """Write ``ds`` as a new record of ``kind`` (a :class:`resflow.records.RecordKind`, or its name) and
        return its id (never overwrites)."""
        schema = getattr(kind, "schema", 1)
        kind = _kind_name(kind)
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        record_id = f"{kind}--{_safe(name)}--{stamp}--{uuid.uuid4().hex[:8]}"
        runs = self.path / "runs"
        runs.mkdir(exist_ok=True)
        tmp = runs / f"{TMP_PREFIX}{os.getpid()}@{_host()}--{record_id}.zarr"
        final = runs / f"{record_id}.zarr"
        out = ds.copy()
        out.attrs = {**ds.attrs, "store_kind": kind, "store_name": name, "store_record": record_id,
                     "store_schema_version": str(STORE_VERSION), "store_kind_schema": str(schema)}
        out = _encodable(out)
        try:
            out.to_zarr(tmp, mode="w-", zarr_format=2, consolidated=True)
            os.rename(tmp, final)  # atomic; fails rather than replace an existing record
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # a failed write leaves nothing (a kill leaves it to gc)
            raise
        return record_id

    # ------------------------------------------------------------------ reading
    def records(self, kind: Any = None, name: str | None = None) -> list[RecordInfo]:
        """Finished records, oldest first, optionally filtered by kind (a record kind or its name) and
        name."""
        kind = None if kind is None else _kind_name(kind)
        out = []
        for path in sorted((self.path / "runs").glob("*.zarr")):
            if path.name.startswith(TMP_PREFIX):
                continue
            parts = path.name[: -len(".zarr")].split("--")
            if len(parts) != 4:
                continue
            rkind, rname, created, _ = parts
            if (kind is None or rkind == kind) and (name is None or rname == _safe(name)):
                out.append(RecordInfo(path.name[: -len(".zarr")], rkind, rname, created, path))
        return sorted(out, key=lambda info: (info.created, info.id))

    def load(self, record: str | RecordInfo) -> xr.Dataset:
        """Load one record into memory."""
        return _decoded(self._read(record, lambda ds: ds.load()))

    def attrs(self, record: str | RecordInfo) -> dict[str, str]:
        """The attributes of one record, read without loading its data."""
        return self._read(record, lambda ds: dict(ds.attrs))

    def variables(self, record: str | RecordInfo) -> list[str]:
        """The data variables of one record, read from its metadata (no data is loaded)."""
        return self._read(record, lambda ds: list(ds.data_vars))

    def _read(self, record: str | RecordInfo, read: Callable[[xr.Dataset], Any]) -> Any:
        """``read`` applied to the opened record; a damaged one raises :class:`StoreError` naming it."""
        info = record if isinstance(record, RecordInfo) else self._info(record)
        try:
            with xr.open_zarr(info.path, consolidated=True) as ds:
                return read(ds)
        except Exception as exc:  # zarr raises many types on damaged data
            raise StoreError(f"record {info.id} is corrupt or unreadable "
                             f"({type(exc).__name__}: {exc}).") from None

    def _info(self, record_id: str) -> RecordInfo:
        for info in self.records():
            if info.id == record_id:
                return info
        raise StoreError(f"no record {record_id!r} in {self.path}; `Store.records()` lists them.")

    def export_netcdf(self, record: str | RecordInfo, path: str | Path) -> Path:
        """Write a record as a netCDF file (scipy engine, netCDF3)."""
        ds = self.load(record)
        try:
            return atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine="scipy"), overwrite=False)
        except FileExistsError:
            raise ConfigError(f"{str(path)!r} exists; "
                              "choose a new file name (nothing is overwritten).") from None

    # ------------------------------------------------------------------ maintenance
    def leftovers(self, *, stale_after_s: float = STALE_AFTER_S) -> list[Leftover]:
        """Partial records and marker temporaries left by writers (killed ones, or ones still writing).

        One is *removable* when its writer -- named in it as ``<pid>@<host>``, where the host tag
        includes the boot id and the PID namespace -- is no longer a live process here, or when it
        is older than ``stale_after_s`` (a writer elsewhere, or a PID since reused); a marker
        temporary when it is a minute old (a creator links and unlinks it within milliseconds).
        """
        now = time.time()
        found = []
        entries = [(p, "partial record") for p in sorted((self.path / "runs").glob(f"{TMP_PREFIX}*"))]
        entries += [(p, "marker temporary") for p in sorted(self.path.glob(f".{MARKER}.*"))]
        for path, what in entries:
            writer, here, alive = _writer_of(path.name) if what == "partial record" else ("", False, False)
            try:
                age = now - path.stat().st_mtime
            except FileNotFoundError:  # finished (renamed) or removed while we looked
                continue
            removable = (age > 60.0 if what == "marker temporary"
                         else (here and not alive) or age > stale_after_s)
            found.append(Leftover(path, what, writer, alive, age, removable))
        return found

    def check(self, validators: Mapping[str, Validator] | None = None) -> StoreReport:
        """Load every finished record, list the leftovers; changes nothing.  ``validators`` maps a record kind
        to a function that lists what a record of that kind lacks (the writers of the kinds define them, e.g.
        :func:`resflow.records.run_problems`; ``resflow store check`` passes every kind's)."""
        validators = validators or {}
        report = StoreReport(leftovers=self.leftovers())
        for info in self.records():
            report.records += 1
            try:
                ds = self.load(info)
                problems = validators[info.kind](ds) if info.kind in validators else []
            except StoreError as exc:
                report.unreadable[info.id] = str(exc)
                continue
            if problems:
                report.unreadable[info.id] = f"not a valid {info.kind} record: it lacks {', '.join(problems)}"
        return report

    def gc(self, *, dry_run: bool = False, stale_after_s: float = STALE_AFTER_S) -> StoreReport:
        """Remove what killed writers left behind (:meth:`leftovers`, ``removable``); never a finished
        record, never a live writer's partial record.  With ``dry_run`` nothing is removed and the
        report lists what would be.  Records are not loaded (:meth:`check` does that)."""
        report = StoreReport(records=len(self.records()),
                             leftovers=self.leftovers(stale_after_s=stale_after_s))
        for left in report.leftovers:
            if not left.removable:
                continue
            if not dry_run:
                if left.path.is_dir():
                    shutil.rmtree(left.path, ignore_errors=True)
                else:
                    left.path.unlink(missing_ok=True)
                if left.path.exists():  # not ours to remove (permissions): say so by not listing it
                    continue
            report.removed.append(left.path)
        return report

    def work_dir(self, experiment: str) -> Path:
        """A fresh work directory of ``experiment``: ``work/<experiment>-<UTC time>`` in the store."""
        return new_run_dir(self.path / "work", experiment)


def _write_marker(marker: Path) -> None:
    try:  # atomic create-if-absent: concurrent creators agree on one marker
        atomic_write(marker, json.dumps({"schema": STORE_SCHEMA, "version": STORE_VERSION}) + "\n",
                     overwrite=False)
    except FileExistsError:
        pass


def _writer_of(name: str) -> tuple[str, bool, bool]:
    """``.tmp-<pid>@<host>--<id>.zarr`` -> ("<pid>@<host>", written here, that process is alive)."""
    head = name[len(TMP_PREFIX):].split("--", 1)[0]
    pid, sep, host = head.partition("@")
    if not sep or not pid.isdigit():
        return "", False, False
    if host != _host():
        return head, False, False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return head, True, False
    except PermissionError:  # alive, owned by someone else
        return head, True, True
    return head, True, True


def _kind_name(kind: Any) -> str:
    """A kind's name (``resflow.records.TOY_RUN`` -> ``"toy-run"``), its spelling checked."""
    name = getattr(kind, "name", kind)
    if not isinstance(name, str) or not KIND_PATTERN.fullmatch(name):
        raise UnknownNameError(f"kind must be a record kind (resflow.records.RECORD_KINDS, e.g. TOY_RUN) "
                               f"or a name of lower-case words joined by dashes; got {kind!r}.")
    return name


def _safe(name: str) -> str:
    """A name fit for a record id: letters, digits, ``._:`` and single dashes (ids split on ``--``)."""
    cleaned = "".join(c if c.isalnum() or c in "._:" else "-" for c in str(name))
    return re.sub("-{2,}", "-", cleaned).strip("-") or "unnamed"


def _encodable(ds: xr.Dataset) -> xr.Dataset:
    """Booleans and object strings are stored in portable dtypes (zarr format 2)."""
    out = ds.copy()
    for name in list(out.data_vars):
        var = out[name]
        if var.dtype == bool:
            out[name] = var.astype("int8").assign_attrs(var.attrs, resflow_dtype="bool")
        elif var.dtype == object or var.dtype.kind == "T":
            out[name] = var.astype(str)
    return out


def _decoded(ds: xr.Dataset) -> xr.Dataset:
    for name in list(ds.variables):
        var = ds[name]
        if var.attrs.get("resflow_dtype") == "bool":
            attrs = {k: v for k, v in var.attrs.items() if k != "resflow_dtype"}
            decoded = var.astype(bool)
            decoded.attrs = attrs
            ds[name] = decoded
        elif var.dtype.kind == "T":
            ds[name] = var.astype(str)
    return ds
