"""The notebooks under docs/notebooks (jupytext percent format) execute in a fast mode, without
errors, and show their figures inline (an ``image/png`` output) after a plain ``import resflow``."""

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_shows_figures(path, monkeypatch, tmp_path):
    monkeypatch.setenv("RESFLOW_NOTEBOOK_FAST", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel starts as a user's would
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the suite runs two workers on two cores
    notebook = jupytext.read(path)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                   ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, f"{path.name} showed no figure inline"


def test_there_are_three_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"smooth_vs_rough", "property_testing", "classroom"}
