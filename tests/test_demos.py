"""Classroom demos: each returns a figure and its data, shows what it claims, and runs in seconds.

Each demo runs once (one test per demo, so the two workers never both run one).  Its seconds are
printed in the test summary ("demos: ..."); ``python -m resflow.demos`` prints them on a quiet
machine, against the target of 10 s each on 2 cores.  A test fails only past 30 s, three times the
target, because the suite's two workers share the two cores.
"""

import math

import numpy as np
import pytest
from matplotlib.figure import Figure
from typer.testing import CliRunner

from resflow import ConfigError, demos
from resflow.cli import app
from resflow.loglog import slopes


def stack_to_ode(data):
    for scheme in data["scheme"].values:
        assert abs(float(data["empirical_order"].sel(scheme=scheme))
                   - int(data["declared_order"].sel(scheme=scheme))) < 0.25, scheme


def error_accumulation(data):
    ell = data["depth"].values
    # coherent errors are exact (no randomness); incoherent ones average 400 x 16 squared components:
    # relative SE about sqrt(2 / (400 * 16)) = 1.8% per depth, so the slope is within 0.05 of 3
    assert slopes(ell, data["loss"].sel(accumulation="coherent").values) == pytest.approx(2.0, abs=1e-9)
    assert slopes(ell, data["loss"].sel(accumulation="incoherent").values) == pytest.approx(3.0, abs=0.05)
    np.testing.assert_allclose(data["loss"], data["law"], rtol=5 * math.sqrt(2 / (400 * 16)))


def ensemble_averaging(data):
    # Gaussian errors: the mean square of N = 4000 draws has relative SE sqrt(2 / N); Z = 5
    np.testing.assert_allclose(data["mse"], data["law"], rtol=5 * math.sqrt(2 / 4000))


def roughness_knob(data):
    np.testing.assert_allclose(data["loss"], data["law"], rtol=5 * math.sqrt(2 / 2000))  # N = 2000 draws
    assert float(data["crossover_depth"].sel(rho=0.2)) == pytest.approx(4.0)
    assert math.isinf(float(data["crossover_depth"].sel(rho=0.0)))


def teacher_angles(data):
    updates = data["update_angle"].mean("update")
    assert float(updates.sel(teacher="tied")) < 60 < float(updates.sel(teacher="independent"))


def smooth_vs_rough(data):
    ell = data["depth"].values
    tied, independent = (slopes(ell, data["final_loss"].sel(target=t).values) for t in ("tied", "independent"))
    assert tied > independent + 0.3 > 0.3, (tied, independent)
    # the constructions beside them: exact, so their laws' order (ℓ^-2 smooth, ℓ^-1 rough) shows at once
    tied, independent = (slopes(ell, data["construction_loss"].sel(target=t).values) for t in ("tied", "independent"))
    assert tied > independent + 0.5 > 1.5, (tied, independent)


def lesion_profiles(data):
    depth = data["depth"].values
    for teacher in ("tied", "independent"):  # skipping a layer costs about depth^-2 in both
        assert slopes(depth, data["lesion"].sel(teacher=teacher).values) == pytest.approx(2.0, abs=0.2)
    # rescaling repairs the smooth flow to depth^-4 and leaves the ensemble at depth^-2
    assert slopes(depth, data["lesion_rescaled"].sel(teacher="tied").values) == pytest.approx(4.0, abs=0.3)
    assert slopes(depth, data["lesion_rescaled"].sel(teacher="independent").values) == pytest.approx(2.0, abs=0.2)


CLAIMS = {f.__name__: f for f in (stack_to_ode, error_accumulation, ensemble_averaging, teacher_angles,
                                  smooth_vs_rough, roughness_knob, lesion_profiles)}


def test_the_registry_holds_eight_demos_in_teaching_order():
    assert list(demos.DEMOS) == list(demos.core.ORDER) and len(demos.DEMOS) >= 8
    assert set(CLAIMS) | {"llm_depth_fit"} == set(demos.DEMOS)


@pytest.mark.parametrize("name", list(CLAIMS))
def test_demo_shows_what_it_claims(name, record_property):
    result = demos.run_demo(name)
    record_property(f"demo_seconds_{name}", round(result.seconds, 1))
    assert isinstance(result.figure, Figure) and result.figure.axes
    assert result.data.data_vars and {"resflow_version", "git_commit", "seed"} <= set(result.data.attrs)
    assert result._repr_png_().startswith(b"\x89PNG")  # shows inline in Jupyter
    CLAIMS[name](result.data)  # the seconds are recorded above, not asserted (python -m resflow.demos times them)


def test_llm_demo_needs_its_data_and_says_where(tmp_path, monkeypatch):
    monkeypatch.delenv("RESFLOW_DATA_DIR", raising=False)
    with pytest.raises(ConfigError, match="needs the Chinchilla table.*RESFLOW_DATA_DIR"):
        demos.llm_depth_fit()
    from test_llm import TRUE, synthetic_table

    csv = tmp_path / "table.csv"
    synthetic_table().to_csv(csv, index=False)
    result = demos.llm_depth_fit(data=str(csv), starts=32)
    assert abs(result.data.attrs["alpha_l"] - TRUE["alpha_l"]) < 0.3


def test_demo_command_lists_saves_and_never_overwrites(tmp_path):
    runner = CliRunner()
    listed = runner.invoke(app, ["demo", "--list"])
    assert listed.exit_code == 0 and all(name in listed.output for name in demos.DEMOS)
    assert "overview" in listed.output
    store = tmp_path / "store"
    first = runner.invoke(app, ["demo", "ensemble_averaging", "--out", str(store)])
    assert first.exit_code == 0, first.output
    (png,) = (store / "work").glob("demo-ensemble_averaging-*/ensemble_averaging.png")
    assert png.read_bytes().startswith(b"\x89PNG") and png.with_suffix(".nc").exists()
    again = runner.invoke(app, ["demo", "ensemble_averaging", "--out", str(store)])  # a new directory, none replaced
    assert again.exit_code == 0 and len(list((store / "work").glob("demo-ensemble_averaging-*"))) == 2
    assert runner.invoke(app, ["demo", "nosuch", "--out", str(store)]).exit_code == 2
    blocker = tmp_path / "f.jpg"
    blocker.write_text("x")
    assert runner.invoke(app, ["demo", "ensemble_averaging", "--out", str(blocker)]).exit_code == 2
