"""Packaging: one import name, theory/ and sims/ importable through it, explicit public API."""

import importlib
from importlib.metadata import version

import resflow


def test_public_api_is_explicit_and_importable():
    for name in resflow.__all__:
        assert hasattr(resflow, name), name


def test_version_matches_distribution_metadata():
    assert resflow.__version__ == version("resflow")


def test_theory_and_sims_ship_inside_resflow():
    assert importlib.import_module("resflow.theory")
    assert importlib.import_module("resflow.sims.smooth_vs_rough").EXPERIMENT.name == "smooth-vs-rough"
