r"""Depth-doubling continuation: a deep student started from a trained one of half its depth.

Multilevel training of residual networks (Chang, Meng, Haber, Tung & Begert, "Multi-level Residual
Networks from Dynamical Systems View", ICLR 2018): a residual layer :math:`y \mapsto y + f(y)` read as
one step of an ODE is two half steps of the same field, :math:`y \mapsto y + \tfrac12 f(y)` twice.
:func:`split_layers` builds that depth-:math:`2\ell` student from a trained depth-:math:`\ell` one
(:math:`W_1, b_1` copied, :math:`W_2` halved in every stage, so an RK block of any tableau becomes two
half steps of its stages' fields); :func:`train_by_doubling` trains the shallowest students from
scratch and every deeper one from the split of the one before, each for the run's steps.

It is a measurement, not the recipe: a continued student that ends below the one trained from
scratch shows that the one from scratch had not converged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from pathlib import Path

import torch

from ..errors import ConfigError
from .block import StudentSpec
from .config import TrainConfig
from .driver import train
from .results import TrainingResult, concatenate_results
from .teacher import Teacher

__all__ = ["split_layers", "train_by_doubling"]


def split_layers(params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The depth-:math:`2\\ell` student whose layers :math:`2l` and :math:`2l + 1` are layer :math:`l` of
    ``params`` (as :func:`~resflow.training.block.init_student` gives them) at half step: ``W1``, ``b1``
    repeated, ``W2`` repeated and halved; the head kept."""
    return {"W1": params["W1"].repeat_interleave(2, dim=0), "b1": params["b1"].repeat_interleave(2, dim=0),
            "W2": params["W2"].repeat_interleave(2, dim=0) / 2, "head": params["head"].clone()}


def train_by_doubling(specs: list[StudentSpec], teachers: Mapping[Hashable, Teacher], config: TrainConfig, *,
                      seed: int = 0, run_dir: Path | None = None, resume: bool = False,
                      progress=None, state_metrics=None) -> TrainingResult:
    """Train ``specs`` depth by depth: the shallowest from scratch, each deeper one (twice as deep) from
    :func:`split_layers` of its trained counterpart of half the depth; one result for all of them.

    Each stage is an ordinary :func:`~resflow.training.driver.train` run of ``config`` (its checkpoint in
    ``run_dir/depth-<d>``, so the chain resumes stage by stage).
    """
    depths = sorted({s.depth for s in specs})
    if any(b != 2 * a for a, b in zip(depths, depths[1:], strict=False)):
        raise ConfigError("depth-doubling continuation needs depths that double (like 2, 4, 8, 16); "
                          f"got {depths}.")

    def counterpart(s: StudentSpec) -> StudentSpec:  # the same student at half the depth, whatever its budget
        return dataclasses.replace(s, depth=s.depth // 2, budget=1.0)

    results, trained = [], {}
    for depth in depths:
        stage = [s for s in specs if s.depth == depth]
        initial = None
        if trained:
            initial = {s: split_layers(trained[repr(counterpart(s))]) for s in stage}
        stage_dir = None if run_dir is None else Path(run_dir) / f"depth-{depth}"
        if stage_dir is not None:
            stage_dir.mkdir(parents=True, exist_ok=True)
        result = train(stage, teachers, config, seed=seed, run_dir=stage_dir,
                       resume=resume and stage_dir is not None and (stage_dir / "checkpoint.pt").exists(),
                       progress=progress, initial=initial, keep_parameters=True, state_metrics=state_metrics)
        trained = {repr(dataclasses.replace(s, budget=1.0)): p for s, p in result.parameters.items()}
        results.append(result)
    return concatenate_results(results)
