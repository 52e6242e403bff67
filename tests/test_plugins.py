"""Plug-ins reach the command line (issue 50, point 4): a package outside resflow declares an optimiser rule,
a measure, an intervention, an experiment and a record kind by entry point, and `resflow run` uses them.

The package is written into a temporary folder with its own ``.dist-info`` (what ``pip install`` leaves), so
``importlib.metadata`` finds its entry points on ``PYTHONPATH``; each piece sits in its own module, so that a
piece reaches resflow through its entry point, not because another piece imported it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import resflow
from resflow.errors import ConfigError

MODULES = {
    "optim.py": '''
        from dataclasses import dataclass
        from typing import ClassVar

        import torch

        from resflow.training.optimizers import OptimizerSettings


        class _Rule:
            capturable = True

            def __init__(self, momentum, size):
                self.momentum, self.buffers = momentum, {"velocity": size}

            def scalars(self, step, multiplier):
                return (multiplier,)

            def apply(self, param, grad, state, lr, work, scalars, step):
                state["velocity"].mul_(self.momentum).add_(grad)
                torch.mul(state["velocity"], lr, out=work)
                param.addcmul_(work, torch.as_tensor(scalars[0], dtype=param.dtype, device=param.device),
                               value=-1.0)


        @dataclass(frozen=True)
        class Momentum(OptimizerSettings):
            name: ClassVar[str] = "momentum-plug"
            momentum: float = 0.9

            def bind(self, bank, *, heads):
                return _Rule(self.momentum, bank.size)

            def reference(self, groups):
                return torch.optim.SGD(groups, momentum=self.momentum, foreach=False)
    ''',
    "measure.py": '''
        class WeightNorm:
            name = "weight-norm-plug"
            labels = {"weight_norm_plug": ("Frobenius norm of W1 of layer l", "1")}

            def applies(self, students):
                return True

            def measure(self, students):
                out = students.per_layer("weight_norm_plug")
                for s in students:
                    out["weight_norm_plug"][s.index, :s.spec.depth] = (
                        s.parameters["W1"].flatten(1).norm(dim=1).double().numpy())
                return out


        WEIGHT_NORM = WeightNorm()
    ''',
    "intervention.py": '''
        import numpy as np

        from resflow.probing.interventions import StackIntervention, run_steps


        def _twice(steps, h0, corrupt, readout):
            readout = readout or (lambda h: h)
            clean = readout(run_steps(steps, h0))
            return np.array([float((readout(run_steps(list(steps[:l + 1]) + list(steps[l:]), h0)) - clean)
                                   .square().mean()) for l in range(len(steps))])


        TWICE = StackIntervention("twice_plug", "damage of running layer l twice", "layer l run twice", _twice)
    ''',
    "experiment.py": '''
        import dataclasses

        import resflow
        from resflow.experiments import Experiment
        from resflow.presenting.plots import new_figure, plot_loss_vs_depth

        _TINY = ["train.steps=20", "train.eval_every=10", "train.eval_batches=1", "train.eval_batch_size=32",
                 "train.batch=16", "width=6", "teacher_depth=8", "depths=2,4", "replicates=1",
                 "routes=scratch", "lengths=1", "train.device=cpu"]


        def _figure(ds, fits):
            fig, axes = new_figure()
            plot_loss_vs_depth(ds, fits, ax=axes[0])
            return fig


        EXPERIMENT = Experiment(
            name="plug-demo", summary="a plug-in's experiment",
            presets={"tiny": dataclasses.replace(
                resflow.preset("smooth-vs-rough", "quick").with_overrides(_TINY), experiment="plug-demo")},
            figure=_figure)

    ''',
    "kind.py": '''
        from resflow.records.kinds import RecordKind

        NOTE = RecordKind("plug-note", "a plug-in's note", "plugdemo.kind", ("note",))
    ''',
}

ENTRY_POINTS = """\
[resflow.experiments]
plug-demo = plugdemo.experiment:EXPERIMENT

[resflow.optimizers]
momentum-plug = plugdemo.optim:Momentum

[resflow.measures]
weight-norm-plug = plugdemo.measure:WEIGHT_NORM

[resflow.interventions]
twice_plug = plugdemo.intervention:TWICE

[resflow.record_kinds]
plug-note = plugdemo.kind:NOTE
"""


def plugin_package(root: Path, entry_points: str = ENTRY_POINTS, modules: dict | None = None) -> Path:
    package = root / "plugdemo"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, text in (modules or MODULES).items():
        (package / name).write_text(textwrap.dedent(text))
    info = root / "plugdemo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugdemo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return root


def resflow_cli(root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "resflow.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_a_plugin_package_reaches_resflow_run(tmp_path):
    root = plugin_package(tmp_path / "site")
    listed = resflow_cli(root, "run", "--list", cwd=tmp_path)
    assert listed.returncode == 0 and "plug-demo" in listed.stdout, listed.stderr
    ran = resflow_cli(root, "run", "plug-demo", "--preset", "tiny", "--out", str(tmp_path / "store"),
                      "--set", "train.optimizer.name=momentum-plug", "--set", "train.optimizer.momentum=0.5",
                      cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    store = resflow.Store.open(tmp_path / "store")
    (record,) = store.records(kind="toy-run")
    ds = store.load(record)
    assert ds.attrs["store_name"] == "plug-demo"
    trained = json.loads(ds.attrs["config"])["train"]["optimizer"]
    assert trained == {"name": "momentum-plug", "momentum": 0.5}  # the optimiser found by its entry point
    for name in ("weight_norm_plug", "twice_plug"):  # the measure, and the intervention through `interventions`
        row = ds[name].sel(depth=4).values.reshape(-1, ds.sizes["layer"])
        assert (row[:, :4] > 0).all() and np.isnan(row[:, 4:]).all(), name
    assert "lesion" in ds  # the built-in measures ran beside them


def test_a_plugin_record_kind_is_written_and_checked_like_resflows_own(tmp_path):
    root = plugin_package(tmp_path / "site")
    script = textwrap.dedent(f"""
        import xarray as xr
        import resflow
        from resflow.records.kinds import record_kind
        store = resflow.Store.open({str(tmp_path / "store")!r}, create=True)
        kind = record_kind("plug-note")
        store.write(xr.Dataset({{"note": ("i", [1.0])}}), kind=kind, name="kept")
        store.write(xr.Dataset({{"other": ("i", [1.0])}}), kind=kind, name="lacking")
    """)
    env = {**os.environ, "PYTHONPATH": str(root)}
    made = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    checked = resflow_cli(root, "store", "check", str(tmp_path / "store"), cwd=tmp_path)
    assert "plug-note" in checked.stdout and "note" in checked.stdout, checked.stdout + checked.stderr
    assert checked.returncode != 0  # the record lacking its kind's variable is a problem


def test_a_broken_plugin_is_named_with_its_fix(tmp_path):
    from resflow._plugins import PluginRegistry

    root = plugin_package(tmp_path / "site", entry_points="[resflow.measures]\nnothing = plugdemo.missing:X\n",
                          modules={})
    sys.path.insert(0, str(root))
    try:
        registry = PluginRegistry("resflow.measures", "a measure")
        registry.bind(lambda m: None)
        with pytest.raises(ConfigError, match=r"nothing = 'plugdemo.missing:X' does not load .*uninstall"):
            list(registry)
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("plugdemo", None)
    named_wrong = plugin_package(tmp_path / "other", modules={"measure.py": MODULES["measure.py"]},
                                 entry_points="[resflow.measures]\nwrong-name = plugdemo.measure:WEIGHT_NORM\n")
    sys.path.insert(0, str(named_wrong))
    try:
        registry = PluginRegistry("resflow.measures", "a measure")
        registry.bind(lambda m: None)
        with pytest.raises(ConfigError, match="named 'wrong-name'"):
            len(registry)
    finally:
        sys.path.remove(str(named_wrong))
        sys.modules.pop("plugdemo", None), sys.modules.pop("plugdemo.measure", None)
