"""Module paths of resflow 0.4 that moved in 0.5: they still import, with a FutureWarning naming the new one.

0.5 split ``resflow.analysis`` into rooms by job (:mod:`resflow.fitting`, :mod:`resflow.probing`,
:mod:`resflow.presenting`, and :mod:`resflow.labels`) and ``resflow.llm`` into ``table``, ``probes`` and
``ladder``.  The public names did not move (``from resflow.analysis import fit_dataset`` is unchanged);
code that imported a module by its old path (``from resflow.analysis.fits import fit_dataset``) gets the
module at its new path through :class:`MovedModules`, a finder on ``sys.meta_path`` installed when
``resflow`` is imported.  The old paths go in 0.6.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

MOVED = {  # old module path -> new module path
    "resflow.analysis.intervals": "resflow.fitting.intervals",
    "resflow.analysis.extrapolation": "resflow.fitting.extrapolation",
    "resflow.analysis.certification": "resflow.fitting.certification",
    "resflow.analysis.verdict": "resflow.fitting.verdict",
    "resflow.analysis.fits": "resflow.fitting.fits",
    "resflow.analysis.law_fit": "resflow.fitting.law_fit",
    "resflow.analysis.fit_records": "resflow.fitting.fit_records",
    "resflow.analysis.separation": "resflow.fitting.separation",
    "resflow.analysis.regimes": "resflow.fitting.regimes",
    "resflow.analysis.roughness": "resflow.fitting.roughness",
    "resflow.analysis.hierarchy": "resflow.fitting.hierarchy",
    "resflow.analysis.metrics": "resflow.probing.metrics",
    "resflow.analysis.probes": "resflow.probing.probes",
    "resflow.analysis.tracking": "resflow.probing.tracking",
    "resflow.analysis.interventions": "resflow.probing.interventions",
    "resflow.analysis.early_exit": "resflow.probing.early_exit",
    "resflow.analysis.groups": "resflow.probing.groups",
    "resflow.analysis.figure": "resflow.presenting.figure",
    "resflow.analysis.plots": "resflow.presenting.plots",
    "resflow.analysis.run_figure": "resflow.presenting.run_figure",
    "resflow.analysis.report": "resflow.presenting.report",
    "resflow.analysis.compare": "resflow.presenting.compare",
    "resflow.analysis.signatures": "resflow.presenting.signatures",
    "resflow.analysis.labels": "resflow.labels",
    "resflow.llm.data": "resflow.llm.table.data",
    "resflow.llm.scaling_fit": "resflow.llm.table.scaling_fit",
    "resflow.llm.comparison": "resflow.llm.table.comparison",
    "resflow.llm.hf_probe": "resflow.llm.probes.hf_probe",
    "resflow.llm.interventions": "resflow.llm.probes.interventions",
    "resflow.llm.ladder_fit": "resflow.llm.ladder.fit",
    "resflow.llm.ladder_records": "resflow.llm.ladder.records",
    "resflow.llm.lm": "resflow.llm.ladder.model",
    "resflow.llm.lm_training": "resflow.llm.ladder.training",
    "resflow.llm.corpus": "resflow.llm.ladder.corpus",
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and gives the module at its new path: the same object under both names."""

    def __init__(self, moved: dict[str, str]):
        self.moved = moved
        self.specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in self.moved else None

    def create_module(self, spec) -> ModuleType:
        new = self.moved[spec.name]
        warnings.warn(f"{spec.name} moved to {new} in resflow 0.5; import it from there "
                      "(the old path goes in 0.6)", FutureWarning, stacklevel=2)
        module = importlib.import_module(new)
        self.specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system has just put the old path's spec on the module: give it back its own
        module.__spec__ = self.specs[module.__name__]


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``import resflow`` calls it)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules(MOVED))
