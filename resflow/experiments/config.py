"""The typed configuration of an experiment, and ``--set key=value`` overrides checked against it.

An :class:`ExperimentConfig` is everything that defines a run: the teachers (targets), the students
(depths x schemes x replicates x temperatures x lengths) and the training recipe
(:class:`~resflow.training.TrainConfig`).
Overrides are parsed by the *declared type* of each field, so ``--set depths=2,4,8`` gives a tuple
of ints and ``--set train.tf32=true`` a bool, and an unknown key is refused with the valid ones.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from .._overrides import field_types as _field_types
from .._overrides import typed_assignment
from .._specs import is_class_target
from .._validate import check_choice, check_int, check_real, check_sequence
from ..dynamics.tableau import TABLEAUX
from ..errors import ConfigError, UnknownNameError, did_you_mean
from ..training.block import ROUTES, StudentSpec
from ..training.classes import HierarchyTarget, HierarchyTargetConfig, one_shape
from ..training.config import LEGACY_OPTIMIZER_FIELDS, TrainConfig
from ..training.optimizers import optimizer_field_types
from ..training.teacher import Teacher, TeacherConfig

__all__ = ["ExperimentConfig", "config_keys", "parse_assignment"]


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that defines a run: teachers, students, training.

    ``targets`` are teacher specs (``independent``, ``tied``, ``correlated:0.9``, ``fractional:0.75``,
    ``grouped:4``), or classification targets ``rhm:L`` (Random Hierarchy Model data of hierarchy
    depth L, :mod:`resflow.training.classes`; with ``train.loss="ce"``);
    every target gets students of every ``depth`` x ``scheme`` x replicate x temperature (KL) x
    length.  A **replicate** ``r`` has its own teachers (seed ``teacher_seed + r``, shared by the
    targets so comparisons stay paired), its own data stream (seed ``seed + r``) and its own student
    initialisations; the replicates are numbered ``first_replicate ... first_replicate + replicates - 1``
    (a sweep cell is one replicate of a larger run: ``replicates=1, first_replicate=r``).  ``lengths``
    are training lengths as fractions of each student's steps: ``(0.25, 0.5, 1)`` adds copies of every
    student trained a quarter and half as long, which the convergence verdict compares and the
    asymptotic estimate extrapolates (:mod:`resflow.fitting.verdict`); the copies are forked from
    the full-length students where their schedules coincide (:mod:`resflow.training.engine`).
    ``budgets`` spends the run's steps where the loss still falls: one share of ``train.steps`` in
    (0, 1] per depth (in the order of ``depths``), the steps a student of that depth trains for at
    length 1; empty: every student the whole run.
    ``init`` is ``"scratch"`` (every student from :func:`resflow.training.init_student`) or ``"doubling"``
    (depth-doubling continuation, :mod:`resflow.training.continuation`: each depth from the trained
    students of half its depth; a measurement of convergence, not the recipe).
    ``routes`` are the ways every student is trained (:data:`resflow.training.ROUTES`): ``("scratch",)``
    (every student from a draw), ``("scratch", "continuation")`` (and every depth whose half is in
    ``depths`` again, continued from the trained scratch student of half its depth), ``"smooth"`` (layers
    that start equal); ``inits`` independent initialisations of every route; verdict v4 counts a depth
    when its routes agree (``docs/design/certification.md``).
    ``student_groups`` are student structures: 0 is the plain student (every layer its own weights),
    ``K`` a group-structured one (weights shared within K contiguous groups of layers,
    :attr:`resflow.training.StudentSpec.weight_groups`); ``(0, 4)`` trains both, side by side.
    ``measures`` names the measures taken of the trained students (:data:`resflow.workflows.MEASURES`:
    ``teacher-tracking``, ``interventions``, ``early-exit``, ``constructions``, ``smoothness`` and any
    registered one):
    ``("all",)`` every one that applies, ``()`` none; a measure not taken adds no variables to the record.
    ``student_hidden`` is the hidden width of the students' MLP blocks; 0: the teacher's (``4 * width``, the
    study's students).  ``resflow sweep ... --grid student_hidden=32,64,128`` makes it an axis.
    ``experiment`` names the registered experiment that draws the figure
    (:func:`resflow.experiments.registered`).
    """

    experiment: str
    targets: tuple[str, ...] = ("independent", "tied")
    width: int = 16
    teacher_depth: int = 32
    vocab: int = 128
    teacher_seed: int = 0
    depths: tuple[int, ...] = (2, 4, 8, 16)
    schemes: tuple[str, ...] = ("euler",)
    replicates: int = 3
    seed: int = 0
    first_replicate: int = 0
    lengths: tuple[float, ...] = (0.25, 0.5, 1.0)
    train: TrainConfig = field(default_factory=TrainConfig)
    student_groups: tuple[int, ...] = (0,)
    budgets: tuple[float, ...] = ()
    init: str = "scratch"
    routes: tuple[str, ...] = ("scratch",)
    inits: int = 1
    measures: tuple[str, ...] = ("all",)
    student_hidden: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.experiment, str) or not self.experiment:
            raise ConfigError(f"experiment must be a registered experiment name; got {self.experiment!r}.")
        for name in ("width", "teacher_depth", "vocab", "replicates", "inits"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=1))
        for name in ("teacher_seed", "seed", "first_replicate", "student_hidden"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=0))
        for name, example in (("depths", "(2, 4, 8)"), ("schemes", "('euler',)"),
                              ("targets", "('independent',)"), ("lengths", "(0.5, 1.0)")):
            object.__setattr__(self, name, check_sequence(name, getattr(self, name), example=example))
        given = tuple(check_int("depths", d, minimum=1) for d in self.depths)
        budgets = tuple(check_real("budgets", b, low=0.0, high=1.0, low_open=True)
                        for b in check_sequence("budgets", self.budgets, example="(1, 1, 0.5, 0.5)"))
        if budgets and len(budgets) != len(given):
            raise ConfigError("budgets must give one share of the run's steps per depth "
                              f"({len(given)} depths {given}); got {len(budgets)}: {budgets}. "
                              "Set budgets with the depths, or leave it empty.")
        order = sorted(range(len(given)), key=lambda i: given[i])
        object.__setattr__(self, "depths", tuple(given[i] for i in order))
        object.__setattr__(self, "budgets", tuple(budgets[i] for i in order) if budgets else ())
        if len(set(self.depths)) < 2:
            raise ConfigError("depths must hold at least two different depths to fit an exponent; "
                              f"got {self.depths}.")
        for s in self.schemes:
            if not isinstance(s, str) or s not in TABLEAUX:
                raise UnknownNameError(f"schemes: unknown scheme {s!r}{did_you_mean(s, TABLEAUX)}.")
        if not self.targets:
            raise ConfigError("targets must name at least one teacher, e.g. ('independent', 'tied').")
        lengths = tuple(sorted(check_real("lengths", v, low=0.0, high=1.0, low_open=True)
                               for v in self.lengths))
        if not lengths or lengths[-1] != 1.0 or len(set(lengths)) != len(lengths):
            raise ConfigError("lengths must be distinct fractions in (0, 1] including 1 (the whole run); "
                              f"got {self.lengths}. Use (1,) for no convergence check, "
                              "(0.25, 0.5, 1) for the verdict.")
        object.__setattr__(self, "lengths", lengths)
        groups = tuple(sorted(check_int("student_groups", g, minimum=0) for g in check_sequence(
            "student_groups", self.student_groups, example="(0, 4)")))
        if not groups or len(set(groups)) != len(groups):
            raise ConfigError("student_groups must be distinct numbers of weight groups "
                              f"(0: a plain student); got {self.student_groups}. E.g. (0,) or (0, 4).")
        object.__setattr__(self, "student_groups", groups)
        check_choice("init", self.init, ("scratch", "doubling"))
        measures = check_sequence("measures", self.measures, example="('teacher-tracking', 'early-exit')")
        if "all" in measures and len(measures) > 1:
            raise ConfigError("measures: 'all' takes every registered measure and stands alone; "
                              f"got {measures}.")
        object.__setattr__(self, "measures", tuple(str(m) for m in measures))
        self._check_routes()
        if (self.init == "doubling"
                and any(b != 2 * a for a, b in zip(self.depths, self.depths[1:], strict=False))):
            raise ConfigError("init='doubling' needs depths that double (like 2, 4, 8, 16); "
                              f"got {self.depths}.")
        if not isinstance(self.train, TrainConfig):
            raise ConfigError(f"train must be a TrainConfig; got {type(self.train).__name__}.")
        for t in self.targets:
            try:
                self.teacher_config(t)  # validates the spec
            except ConfigError as exc:
                raise type(exc)(f"targets: {exc}") from None
        classes = {is_class_target(t) for t in self.targets}
        if classes == {True, False}:
            raise ConfigError(f"targets mixes classification targets (rhm:L) with teachers: {self.targets}; "
                              "they train with different losses. Run them separately.")
        if (True in classes) != (self.train.loss == "ce"):
            fix = ("set train.loss=ce" if True in classes else "use rhm:L targets or train.loss=mse")
            raise ConfigError(f"targets {self.targets} and train.loss={self.train.loss!r} "
                              "do not go together: classification targets (rhm:L) train with loss 'ce', "
                              f"teachers with 'mse' or 'kl'; {fix}.")
        if self.classifies:
            try:
                one_shape([c.hierarchy for c in map(self.teacher_config, self.targets)])
            except ConfigError as exc:
                raise ConfigError(f"targets {self.targets}: {exc}") from None
        if self.classifies and self.init != "scratch":
            raise ConfigError("init='doubling' continues regression students; classification students "
                              "(rhm:L) train from scratch. Use init='scratch'.")
        if self.classifies and "continuation" in self.routes:
            raise ConfigError("routes: 'continuation' continues regression students; classification students "
                              "(rhm:L) train from a draw. Use routes=('scratch',) or ('scratch', 'smooth').")

    def _check_routes(self) -> None:
        routes = check_sequence("routes", self.routes, example="('scratch', 'continuation')")
        for r in routes:
            check_choice("routes", r, tuple(ROUTES))
        if not routes or len(set(routes)) != len(routes):
            raise ConfigError(f"routes must be distinct names of {tuple(ROUTES)}; got {self.routes}. E.g. "
                              "('scratch',) or ('scratch', 'continuation').")
        object.__setattr__(self, "routes", tuple(r for r in ROUTES if r in routes))  # one order everywhere
        if "continuation" in routes:
            if "scratch" not in routes:
                raise ConfigError("routes: a continuation student starts from the trained scratch student "
                                  "of half its depth; add 'scratch' to the routes.")
            if not self.route_depths("continuation"):
                raise ConfigError("routes: 'continuation' needs a depth whose half is also a depth "
                                  f"(like 2 and 4); got depths {self.depths}. Add the halves, "
                                  "or train one route: routes=scratch.")
        if self.init == "doubling" and self.routes != ("scratch",):
            raise ConfigError("init='doubling' chains every depth from the one before; "
                              "routes train several routes side by side. "
                              "Use one of them: init='doubling' with routes=('scratch',), or routes.")

    def route_depths(self, route: str) -> tuple[int, ...]:
        """The depths ``route`` trains: every depth, but for ``continuation`` only those whose half is a
        depth."""
        if route == "continuation":
            return tuple(d for d in self.depths if d % 2 == 0 and d // 2 in self.depths)
        return self.depths

    @property
    def classifies(self) -> bool:
        """Whether the run's students learn classification targets (``rhm:L``) rather than teachers."""
        return is_class_target(self.targets[0])

    def teacher_config(self, target: str, replicate: int = 0) -> TeacherConfig | HierarchyTargetConfig:
        """The teacher of ``target`` in ``replicate`` (seed ``teacher_seed + replicate``); for ``rhm:L`` its
        grammar (rules seeded ``teacher_seed + replicate``)."""
        if is_class_target(target):
            return HierarchyTargetConfig.from_spec(target, width=self.width,
                                                   seed=self.teacher_seed + replicate)
        return TeacherConfig.from_spec(target, width=self.width, depth=self.teacher_depth, vocab=self.vocab,
                                       seed=self.teacher_seed + replicate)

    def teachers(self) -> dict[tuple[str, int], Teacher | HierarchyTarget]:
        """Every teacher of the run, keyed ``(target, replicate)`` as :func:`resflow.training.train`
        expects."""
        def build(config):
            return HierarchyTarget(config) if isinstance(config, HierarchyTargetConfig) else Teacher(config)

        return {(t, r): build(self.teacher_config(t, r)) for t in self.targets for r in self.replicate_ids}

    @property
    def replicate_ids(self) -> range:
        """The replicates of this run: ``first_replicate``, ..., ``first_replicate + replicates - 1``."""
        return range(self.first_replicate, self.first_replicate + self.replicates)

    def budget(self, depth: int) -> float:
        """The share of ``train.steps`` a student of ``depth`` trains for at length 1 (``budgets``; 1
        without)."""
        return self.budgets[self.depths.index(depth)] if self.budgets else 1.0

    def student_specs(self) -> list[StudentSpec]:
        temps = self.train.temperatures if self.train.loss == "kl" else (math.nan,)
        return [StudentSpec(t, s, d, r, temp, length, k, self.budget(d), route, i, self.student_hidden)
                for route in self.routes
                for t in self.targets for s in self.schemes for d in self.route_depths(route)
                for r in self.replicate_ids for temp in temps for length in self.lengths
                for k in self.student_groups for i in range(self.inits)]

    def describe(self) -> str:
        """One line for listings: how many students, how many steps (and the routes, when more than one
        start)."""
        starts = ("" if (self.routes, self.inits) == (("scratch",), 1)
                  else f" ({' + '.join(self.routes)}, {self.inits} init{'s' if self.inits > 1 else ''} each)")
        return f"{len(self.student_specs())} students{starts}, {self.train.steps} steps"

    @property
    def progress_total(self) -> int:
        """The steps a progress bar of the run counts: the engine trains every student of a route in one
        batch, and continuation students in a second run after their parents."""
        return self.train.steps * (2 if "continuation" in self.routes else 1)

    @staticmethod
    def keys() -> dict[str, Any]:
        """Every key ``--set`` accepts (:func:`config_keys`)."""
        return config_keys()

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self) | {"train": self.train.to_dict()}
        # plain students only: the dict (and run ids, sweep ids) of before the field
        if self.student_groups == (0,):
            del out["student_groups"]
        if not self.budgets:  # every student the whole run: as before the field
            del out["budgets"]
        if self.init == "scratch":
            del out["init"]
        if self.routes == ("scratch",):  # one route: as before the field
            del out["routes"]
        if self.inits == 1:
            del out["inits"]
        if self.measures == ("all",):  # every measure: as before the field
            del out["measures"]
        if self.student_hidden == 0:  # the teacher's hidden width: as before the field
            del out["student_hidden"]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=str)

    def with_overrides(self, assignments: list[str]) -> ExperimentConfig:
        """Apply ``key=value`` overrides (``train.steps=2000``, ``depths=2,4,8``, ``targets=tied``)."""
        outer: dict[str, Any] = {}
        inner: dict[str, Any] = {}
        for item in assignments:
            key, value = parse_assignment(item)
            if key.startswith("train."):
                inner[key[len("train."):]] = value
            else:
                outer[key] = value
        train = self.train.replace(**inner) if inner else self.train
        return dataclasses.replace(self, train=train, **outer)


def config_keys() -> dict[str, Any]:
    """Every key ``--set`` accepts, with its declared type:
    ``{"depths": tuple[int, ...], "train.steps": int, ...}``."""
    keys = {k: t for k, t in _field_types(ExperimentConfig).items() if k not in ("experiment", "train")}
    keys.update({f"train.{k}": t for k, t in _field_types(TrainConfig).items() if k != "optimizer"})
    keys.update({f"train.optimizer.{k}": t for k, t in optimizer_field_types().items()})
    return keys


#: ``--set`` keys of resflow <= 0.4 -> their key now (still accepted, with a FutureWarning)
LEGACY_KEYS = {"train.optimizer": "train.optimizer.name",
               **{f"train.{old}": f"train.optimizer.{new}" for old, new in LEGACY_OPTIMIZER_FIELDS.items()}}


def parse_assignment(item: str) -> tuple[str, Any]:
    """``"train.steps=2000"`` -> ``("train.steps", 2000)``, typed by the declared field type.  A key of an
    earlier version (:data:`LEGACY_KEYS`: ``train.optimizer=soap``, ``train.adam_beta1=0.95``) is read as
    its key now, with a FutureWarning that names it."""
    key, sep, raw = str(item).partition("=")
    if sep and key.strip() in LEGACY_KEYS:
        new = LEGACY_KEYS[key.strip()]
        warnings.warn(f"--set {key.strip()}=... is deprecated since resflow 0.5; use --set {new}=...",
                      FutureWarning, stacklevel=2)
        item = f"{new}={raw}"
    return typed_assignment(item, config_keys())
