"""How many torch threads the engine uses on a CPU: as many as the machine has cores free, checked as it runs.

Torch starts one OpenMP thread per core.  On a quiet machine that is the fastest, but beside one other busy
process it is the slowest there is: every parallel region waits at a barrier for the thread the scheduler
has parked, so a step of the cpu preset on 2 cores went from 22.8 ms to 84.1 ms beside a one-line busy loop
and to 1746.6 ms beside a test run (issue 36); with one thread it took 58.6 ms.  No fixed count is right for
both machines, so :class:`ThreadGovernor` measures.  Every ``every`` seconds of training it reads the
machine's busy time (``/proc/stat``) and its own process's (``time.process_time``); what the other processes
used, in cores, leaves ``free = cores - others``, and the engine runs ``floor(free + 0.4)`` threads (a core
counts as free when it is at least 60% idle), between 1 and the count torch had when training began (which
``OMP_NUM_THREADS`` or ``torch.set_num_threads`` set).  The count is restored when training ends.

``RESFLOW_THREADS=N`` fixes the count at N (no measuring); without ``/proc/stat`` (not Linux) the count is
left as it is.  The measurements behind the rule: ``benchmarks/threads.py`` and docs/benchmarks.md.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import torch

from ..errors import ConfigError

__all__ = ["ThreadGovernor", "threads_setting", "FREE_SHARE", "CHECK_EVERY_S"]

FREE_SHARE = 0.6  # a core is free when at least this share of it is idle (of the other processes' use)
CHECK_EVERY_S = 0.5  # seconds of training between two looks at the machine
_PROC_STAT = Path("/proc/stat")


def threads_setting() -> int | None:
    """``RESFLOW_THREADS`` as a fixed count, or None (``auto``, unset: the governor decides)."""
    value = os.environ.get("RESFLOW_THREADS", "auto").strip().lower()
    if value in ("", "auto"):
        return None
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"RESFLOW_THREADS must be 'auto' or a positive integer; got {value!r}. "
                          "Unset it to let the engine choose.")
    return count


def _machine_busy() -> tuple[float, int] | None:
    """Seconds of CPU time the whole machine has spent busy since boot, and its number of CPUs."""
    try:
        lines = _PROC_STAT.read_text().splitlines()
    except OSError:
        return None
    fields = lines[0].split()[1:]
    if not lines[0].startswith("cpu ") or len(fields) < 5:
        return None
    ticks = [int(v) for v in fields[:8]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK"), cpus


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class ThreadGovernor:
    """The torch thread count of one training loop (module docstring): ``with governor:`` around the loop,
    ``governor.tick()`` every step (a clock read, and every ``every`` seconds a look at the machine).

    ``device``: a CPU device is governed, any other is left alone.  ``most``: the largest count (default:
    torch's count on entry).  ``fixed``: a count to hold (default: ``RESFLOW_THREADS``, else measure)."""

    def __init__(self, device: torch.device | str = "cpu", *, most: int | None = None,
                 fixed: int | None = None, every: float = CHECK_EVERY_S) -> None:
        self.enabled = torch.device(device).type == "cpu"
        self.fixed = threads_setting() if fixed is None else fixed
        self.most, self.every = most, every
        self.history: list[tuple[float, int]] = []  # (seconds since entry, threads) at every change
        self._active = False

    def __enter__(self) -> ThreadGovernor:
        if not self.enabled:
            return self
        self._before = torch.get_num_threads()
        self._most = max(1, self.most or self._before)
        self._start = time.monotonic()
        if self.fixed is not None:
            self._set(self.fixed)
            return self
        self._look = self._sample()
        self._active = self._look is not None
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self._active = False
            if torch.get_num_threads() != self._before:
                torch.set_num_threads(self._before)

    @staticmethod
    def _sample() -> tuple[float, float, float, int] | None:
        machine = _machine_busy()
        return None if machine is None else (time.monotonic(), machine[0], time.process_time(), machine[1])

    def _set(self, threads: int) -> None:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
            self.history.append((time.monotonic() - self._start, threads))

    def choose(self, others: float, cpus: int) -> int:
        """The count for a machine whose other processes use ``others`` cores of its ``cpus``."""
        free = min(_cores(), cpus) - max(others, 0.0)
        return max(1, min(self._most, math.floor(free + (1 - FREE_SHARE))))

    def tick(self) -> None:
        """Every ``every`` seconds: measure the other processes' use since the last look and set the count."""
        if not self._active or time.monotonic() - self._look[0] < self.every:
            return
        now = self._sample()
        if now is None:
            return
        wall = now[0] - self._look[0]
        others = ((now[1] - self._look[1]) - (now[2] - self._look[2])) / wall
        self._look = now
        self._set(self.choose(others, now[3]))
