"""The engine's torch thread count (resflow.training.threads): the rule, its inputs, and that it is put back.

The speed it buys is measured, not tested here: ``python benchmarks/threads.py`` (docs/benchmarks.md).
"""

import pytest
import torch

from resflow.errors import ConfigError
from resflow.training import threads as threads_module
from resflow.training.threads import ThreadGovernor, threads_setting


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(threads_module, "_cores", lambda: 2)


@pytest.mark.parametrize(("others", "expected"), [(0.0, 2), (0.3, 2), (0.5, 1), (1.0, 1), (1.9, 1), (3.0, 1)])
def test_a_core_counts_as_free_when_it_is_at_least_60_percent_idle(two_cores, others, expected):
    with ThreadGovernor("cpu", most=2, fixed=None) as governor:
        assert governor.choose(others, cpus=2) == expected


def test_the_count_never_exceeds_what_torch_had(two_cores):
    with ThreadGovernor("cpu", most=1) as governor:
        assert governor.choose(0.0, cpus=2) == 1


def test_tick_reads_the_other_processes_use_and_sets_the_count(two_cores, monkeypatch):
    """Fake clocks: the machine busy 1.8 cores of which this process used 0.8 -> one other core busy -> 1 thread;
    then the machine busy only with this process -> 2 threads; the count before is restored on exit."""
    clock = {"wall": 0.0, "machine": 0.0, "own": 0.0}
    monkeypatch.setattr(threads_module, "_machine_busy", lambda: (clock["machine"], 2))
    monkeypatch.setattr(threads_module.time, "monotonic", lambda: clock["wall"])
    monkeypatch.setattr(threads_module.time, "process_time", lambda: clock["own"])
    monkeypatch.delenv("RESFLOW_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with ThreadGovernor("cpu") as governor:
            clock.update(wall=0.1, machine=0.18, own=0.08)
            governor.tick()  # too soon: no look
            assert torch.get_num_threads() == 2
            clock.update(wall=1.0, machine=1.8, own=0.8)
            governor.tick()
            assert torch.get_num_threads() == 1
            clock.update(wall=2.0, machine=2.8, own=1.8)
            governor.tick()
            assert torch.get_num_threads() == 2
            assert [count for _, count in governor.history] == [1, 2]
            torch.set_num_threads(1)  # whatever happened inside
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_fixed_count_from_the_environment_holds_and_is_checked(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setenv("RESFLOW_THREADS", "1")
    with ThreadGovernor("cpu"):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    monkeypatch.setenv("RESFLOW_THREADS", "auto")
    assert threads_setting() is None
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("RESFLOW_THREADS", bad)
        with pytest.raises(ConfigError, match="RESFLOW_THREADS must be 'auto' or a positive integer"):
            threads_setting()


def test_a_gpu_run_is_left_alone(monkeypatch):
    monkeypatch.setenv("RESFLOW_THREADS", "1")
    before = torch.get_num_threads()
    with ThreadGovernor("cuda") as governor:
        governor.tick()
        assert torch.get_num_threads() == before


def test_training_enters_the_governor_once_and_consults_it_every_step(monkeypatch):
    """resflow.train runs its loop inside the engine's governor and ticks it on every step."""
    import resflow

    calls = {"enter": 0, "tick": 0}
    enter = ThreadGovernor.__enter__

    def counting_enter(self):
        calls["enter"] += 1
        return enter(self)

    monkeypatch.setattr(ThreadGovernor, "__enter__", counting_enter)
    monkeypatch.setattr(ThreadGovernor, "tick", lambda self: calls.__setitem__("tick", calls["tick"] + 1))
    teachers = {"tied": resflow.Teacher("tied", width=4, depth=4, seed=0)}
    students = [resflow.StudentSpec("tied", "euler", 2, replicate=0)]
    resflow.train(students, teachers, resflow.TrainConfig.classroom(steps=5), seed=0)
    assert calls == {"enter": 1, "tick": 5}
