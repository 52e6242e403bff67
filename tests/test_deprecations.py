"""What users imported or typed before resflow 0.5 keeps working, with a warning that says what to write instead."""

from __future__ import annotations

import math

import numpy as np
import pytest

import resflow
from resflow.training import StudentSpec, Teacher, TrainConfig, Trainer, train
from resflow.training.optimizers import Adam, Soap


def test_the_flat_optimiser_fields_build_and_read_the_optimiser():
    with pytest.warns(DeprecationWarning, match="optimizer=Soap"):
        config = TrainConfig(optimizer="soap", adam_beta1=0.95, adam_beta2=0.95, precondition_frequency=5)
    assert config.optimizer == Soap(beta1=0.95, beta2=0.95, precondition_frequency=5)
    with pytest.warns(DeprecationWarning, match=r"\.optimizer\.beta1"):
        assert config.adam_beta1 == 0.95
    with pytest.warns(DeprecationWarning):
        adam = TrainConfig(adam_eps=1e-6, shampoo_beta=0.5)  # Adam had no shampoo_beta: ignored, as in 0.4
    assert adam.optimizer == Adam(eps=1e-6)
    assert TrainConfig(optimizer="soap").optimizer == Soap(beta1=0.9, beta2=0.999)  # 0.4's SOAP betas


def test_the_old_set_keys_are_read_as_the_new_ones():
    base = resflow.preset("smooth-vs-rough", "quick")
    with pytest.warns(FutureWarning, match="deprecated since resflow 0.5; use --set train.optimizer"):
        old = base.with_overrides(["train.optimizer=soap", "train.adam_beta1=0.95", "train.shampoo_beta=0.9"])
    new = base.with_overrides(["train.optimizer.name=soap", "train.optimizer.beta1=0.95",
                               "train.optimizer.shampoo_beta=0.9"])
    assert old == new and old.train.optimizer == Soap(beta1=0.95, shampoo_beta=0.9)


def test_the_functions_now_measures_still_give_the_same_arrays():
    from resflow.workflows.exits import EARLY_EXIT, student_exits
    from resflow.workflows.intervene import STUDENT_INTERVENTIONS, student_interventions
    from resflow.workflows.measures import TrainedStudents
    from resflow.workflows.run import teacher_tracking
    from resflow.workflows.tracking import TEACHER_TRACKING

    teachers = {"tied": Teacher("tied", width=8, depth=8, seed=0)}
    result = train([StudentSpec("tied", "euler", d, 0, math.nan) for d in (2, 4)], teachers,
                   TrainConfig(steps=6, batch=8, eval_every=6, eval_batch_size=16, device="cpu"), keep_parameters=True)
    students = TrainedStudents.of_result(result, teachers)
    for old, measure, args in ((student_interventions, STUDENT_INTERVENTIONS, ()),
                               (student_exits, EARLY_EXIT, (teachers,)), (teacher_tracking, TEACHER_TRACKING, (teachers,))):
        with pytest.warns(DeprecationWarning, match=r"\.measure"):
            got = old(result, *args)
        want = measure.measure(students)
        assert got.keys() == want.keys()
        assert all(np.array_equal(got[k], want[k], equal_nan=True) for k in want)


def test_the_trainer_still_says_whether_it_trains_classes_and_the_ladder_kind_is_there():
    teachers = {"tied": Teacher("tied", width=8, depth=8, seed=0)}
    trainer = Trainer([StudentSpec("tied", "euler", 2, 0)], teachers, TrainConfig(steps=2, device="cpu"))
    with pytest.warns(DeprecationWarning, match="Trainer.targets"):
        assert trainer.classes is False
    from resflow.llm.ladder.records import KIND

    assert KIND == "lm-ladder"
