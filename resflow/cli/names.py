"""The names the command line shows: in help, found without importing torch (help must answer at once), and
in the listings ``run --list``, ``run EXPERIMENT --list-keys`` and ``demo --list`` (which load the
registries).

Experiment names in help are the entry points that declare experiments (``pyproject.toml``; the registry,
:func:`resflow.experiments.registered`, loads the same ones); preset names are a list here that
``tests/test_cli.py`` checks against the registry, so a new preset that is not added fails the suite.
"""

from __future__ import annotations

__all__ = ["EXPERIMENT_ENTRY_POINTS", "PRESETS", "OVERVIEW", "experiment_names", "list_experiments",
           "keys_listing", "demo_descriptions", "demo_listing"]

EXPERIMENT_ENTRY_POINTS = "resflow.experiments"  # the group the registry discovers experiments from
PRESETS = ("cpu", "cpu-certified", "cpu-converged", "cpu-long", "cpu-plays", "cpu-shared-head", "cpu-smooth",
           "gpu", "gpu-plays", "gpu-wide", "ground-truth", "long", "paper", "quick", "tiny")


def experiment_names() -> list[str]:
    """The registered experiments' names, read from the entry points' metadata (nothing is imported), sorted
    as the registry sorts them (by module path)."""
    from importlib.metadata import entry_points

    return [p.name for p in sorted(entry_points(group=EXPERIMENT_ENTRY_POINTS), key=lambda p: p.value)]


def list_experiments() -> str:
    """Every experiment with its presets: students, steps, and what a run cost on the 2-core machine (plain
    lines: names are never cut to fit a terminal)."""
    from resflow.experiments import registered

    lines = []
    for name, experiment in registered().items():
        lines.append(f"{name}: {experiment.summary}")
        for preset_name, config in experiment.presets.items():
            axis = experiment.grid(preset_name)
            lines.append(f"  --preset {preset_name:14s} {config.describe()}"
                         + (f" at each value, an axis ({'; '.join(axis)}; resflow sweep)" if axis else "")
                         + f"; on 2 CPU cores: {experiment.costs.get(preset_name, 'not measured')}")
    return "\n".join(lines)


def keys_listing(config) -> str:
    """Every key ``--set`` takes for ``config`` (an experiment's preset): its declared type and its value in
    the preset, written as ``--set`` takes it (plain lines: names are never cut to fit a terminal)."""
    def written(value) -> str:
        if isinstance(value, tuple | list):
            return ",".join(map(written, value))
        return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    rows = []
    missing = object()
    for key, kind in config.keys().items():
        value = config
        for part in key.split("."):
            value = getattr(value, part, missing)
        # not a field of this optimizer: another rule's: set optimizer.name first
        shown = ("(not a field of this optimizer)" if value is missing
                 else written(value) or "(empty)")
        declared = kind.__name__ if isinstance(kind, type) else str(kind).replace("typing.", "")
        rows.append((key, declared, shown))
    width = max(len(k) for k, _, _ in rows)
    kinds = max(len(t) for _, t, _ in rows)
    return "\n".join(f"{k:{width}s}  {t:{kinds}s}  {v}" for k, t, v in rows)


# the dynamics-core overview (resflow.workflows.run_flow_demo), beside the classroom demos
OVERVIEW = "overview"
OVERVIEW_TEXT = ("The dynamics core: tied stacks converge to their ODE at each scheme's order, ensembles "
                 "average, teachers' update angles.")


def demo_descriptions() -> dict[str, str]:
    """Every demo's description: the whole first paragraph of its docstring (a sentence or two, never cut)."""
    from resflow.demos import DEMOS

    described = {name: " ".join((function.__doc__ or "").strip().split("\n\n")[0].split())
                 for name, function in DEMOS.items()}
    return {OVERVIEW: OVERVIEW_TEXT} | described


def demo_listing(width: int) -> str:
    """``resflow demo --list``: each demo's whole description, wrapped to ``width`` beside its name."""
    import textwrap

    descriptions = demo_descriptions()
    indent = max(map(len, descriptions)) + 2
    return "\n".join(textwrap.fill(text, max(width, indent + 40), initial_indent=f"{name:{indent}s}",
                                   subsequent_indent=" " * indent) for name, text in descriptions.items())
