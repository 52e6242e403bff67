"""Run directories: every run writes into a new directory, so nothing written is ever overwritten.

A run holds ``run.lock`` in its directory (an exclusive ``flock``, released by the kernel when its process
ends, however it ends) while it works, so a reader can tell a run in progress from an interrupted one
without trusting a PID: :func:`run_lock` holds it, :func:`lock_holder` asks who holds it.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from ..errors import ConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; a run's state is then "unknown"
    fcntl = None

__all__ = ["new_run_dir", "run_lock", "lock_holder", "RUN_LOCK", "RunBusyError"]

RUN_LOCK = "run.lock"
LOCK_WAIT_S = 1.0  # a reader holds the lock shared for microseconds; a run taking it retries this long


class RunBusyError(ConfigError):
    """A run directory whose lock another live process holds: that run is in progress."""


def new_run_dir(root: Path | str, prefix: str) -> Path:
    """Create and return a fresh directory ``root/<prefix>-<UTC timestamp>[-N]``.

    Raises :class:`~resflow.errors.ConfigError` if ``root`` exists and is not a directory.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"out must be a directory; {str(root)!r} exists and is a file. "
                          "Choose another --out.")
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


@contextmanager
def run_lock(run_dir: Path | str) -> Iterator[None]:
    """Hold ``run_dir/run.lock`` while the body runs (its file names this process, ``<pid>@<host>``).

    Raises :class:`RunBusyError` when another process holds it (the run is in progress there).  Without
    ``flock`` (Windows) the body runs unlocked.
    """

    path = Path(run_dir) / RUN_LOCK
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = lock_holder(run_dir)[0] or "another process"
                    raise RunBusyError(f"the run {Path(run_dir).name} is in progress ({holder} holds "
                                       f"{path}); wait for it to finish, or stop it and resume it "
                                       "then.") from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}@{_host()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def lock_holder(run_dir: Path | str) -> tuple[str, bool | None]:
    """``(writer, held)`` of ``run_dir/run.lock``: the ``<pid>@<host>`` that last took it, and whether a live
    process holds it now (``None`` when that cannot be known: no lock file, a run of a resflow before run
    locks, or no ``flock`` here).  Changes nothing."""
    path = Path(run_dir) / RUN_LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return "", None
    try:
        writer = os.read(fd, 256).decode(errors="replace").strip()
        if fcntl is None:  # pragma: no cover
            return writer, None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return writer, True
        except OSError:  # a file system without locks
            return writer, None
        return writer, False
    finally:
        os.close(fd)


@cache
def _host() -> str:
    """This machine and PID namespace: hostname, boot id and PID-namespace inode (so a container or a
    cloned machine with the same hostname is another host); it names the writer of locks and temporary
    records."""
    def read(path: str, default: str) -> str:
        try:
            return (os.readlink(path).strip("pid:[]") if path.startswith("/proc/self/ns")
                    else Path(path).read_text())
        except OSError:
            return default

    boot = read("/proc/sys/kernel/random/boot_id", "noboot").strip()[:8]
    tag = f"{socket.gethostname()}.{boot}.{read('/proc/self/ns/pid', 'nons')}"
    cleaned = re.sub("-{2,}", "-", "".join(c if c.isalnum() or c in "._:" else "-" for c in tag))
    return cleaned.replace("@", "-").strip("-") or "host"
