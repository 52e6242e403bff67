"""Record kinds are defined once (resflow.records.kinds) and named by their constants everywhere else."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from resflow import Store
from resflow.errors import UnknownNameError
from resflow.records import FIT, RECORD_KINDS, TOY_RUN, record_kind

PACKAGE = Path(__file__).resolve().parents[1] / "resflow"


@pytest.mark.parametrize("kind", list(RECORD_KINDS.values()), ids=str)
def test_every_kind_names_a_writer_that_exists(kind):
    if not kind.writer:  # reserved: nothing writes it yet
        assert kind.name == "theory"
        return
    module, _, function = kind.writer.rpartition(".")
    assert callable(getattr(importlib.import_module(module), function))


def test_no_module_outside_records_spells_a_kind_as_a_bare_string():
    """``kind="toy-run"``, ``records(kind="fit")``, ``.kind == "lm-ladder"``: the constants say it instead."""
    names = "|".join(re.escape(k) for k in RECORD_KINDS)
    spelled = re.compile(rf"""kind\s*(=|==|!=)\s*["']({names})["']""")
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in PACKAGE.rglob("*.py") if "records" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if spelled.search(line)]
    assert not found, found


def test_the_store_takes_a_kind_or_its_name_and_refuses_a_misspelling(tmp_path):
    store = Store.open(tmp_path / "s", create=True)
    ds = xr.Dataset({"exponent": (("series",), np.ones(2))})
    by_kind = store.write(ds, kind=FIT, name="a")
    by_name = store.write(ds, kind="fit", name="b")
    assert [r.id for r in store.records(kind=FIT)] == [by_kind, by_name]
    assert store.attrs(by_kind)["store_kind_schema"] == str(FIT.schema)
    with pytest.raises(UnknownNameError, match="kind must be"):
        store.write(ds, kind="Toy Run", name="c")
    with pytest.raises(UnknownNameError, match="did you mean 'toy-run'"):
        record_kind("toy-rnu")


def test_a_kind_lists_what_a_record_lacks():
    ds = xr.Dataset({"test_loss": (("depth",), np.ones(2))})
    lacking = TOY_RUN.problems(ds)
    assert "failed" in lacking and "dim replicate" in lacking and "test_loss" not in lacking
    assert "dim depth" not in lacking
