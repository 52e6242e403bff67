"""Bad input, fuzzed: every command and the public constructors and functions get generated bad
input and must answer with a clear error, never a traceback, never a hang, never a changed store.

* API: each case names a public callable, a valid call and one argument; hypothesis draws a bad
  value for that argument (wrong type, non-finite, out of range, unknown name).  The call must raise
  a :class:`~resflow.errors.ResflowError` whose message names the argument.
* CLI: generated bad argument lists for every command (unknown names, malformed ``--set`` pairs,
  out-of-range options) and damaged inputs (corrupt or foreign stores, truncated zarr chunks, bad
  CSVs, truncated or foreign checkpoints).  Each must exit non-zero with resflow's or click's
  message, without a traceback, and a checksum of every store involved is the same before and after.

The counts of cases tried are printed in the test summary ("fuzz: ..."); examples that once failed
are kept in ``tests/data/fuzz-corpus.json`` and replayed first.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import resflow
from resflow.cli import app
from resflow.errors import ResflowError
from resflow.experiments import ExperimentConfig, config_keys
from resflow.llm import ScalingFitSettings
from resflow.training import TrainConfig

CORPUS = json.loads((Path(__file__).parent / "data" / "fuzz-corpus.json").read_text())
runner = CliRunner()

# ---------------------------------------------------------------------------------------- values
not_a_number = st.one_of(st.none(), st.text(max_size=5), st.lists(st.integers(), max_size=2), st.booleans(),
                         st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])


def bad_int(minimum: int):
    return st.one_of(not_a_number, st.integers(max_value=minimum - 1), st.floats(allow_nan=True),
                     st.integers(min_value=minimum).map(float))


def bad_real(low=None, high=None, *, low_ok=False, high_ok=True):
    """Not a real number, non-finite, or outside [low, high] (``low_ok``/``high_ok``: the end itself is valid)."""
    out = [not_a_number, non_finite]
    if low is not None:
        out.append(st.floats(max_value=low, exclude_max=low_ok, allow_nan=False, allow_infinity=False))
    if high is not None:
        out.append(st.floats(min_value=high, exclude_min=high_ok, allow_nan=False, allow_infinity=False))
    return st.one_of(*out)


def bad_law_value(low_ok=False, high=None):
    """A law parameter may be an array (laws broadcast), so lists are not bad in themselves."""
    scalar_junk = st.one_of(st.none(), st.text(max_size=5), st.booleans(), st.dictionaries(st.text(max_size=2),
                                                                                          st.integers(), max_size=1))
    not_inf = lambda v: isinstance(v, float) and v != math.inf  # noqa: E731  (+inf is a limit the laws allow)
    return st.one_of(scalar_junk, bad_real(0.0, high, low_ok=low_ok).filter(not_inf),
                     st.lists(st.sampled_from([math.nan, -math.inf]), min_size=1, max_size=2))


def bad_name(valid):
    return st.one_of(st.none(), st.integers(), st.text(max_size=12).filter(lambda s: s.strip() not in valid))


def bad_tuple_of(element):
    return st.one_of(not_a_number.filter(lambda v: not isinstance(v, str | list)), st.lists(element, min_size=1,
                                                                                          max_size=3).map(tuple))


# ------------------------------------------------------------------------------------ API cases
def field():
    return resflow.MLPField(4, seed=0)


API_CASES = {
    # name: (callable(**kwargs), valid kwargs, {argument: strategy of bad values})
    "ExperimentConfig": (ExperimentConfig, {"experiment": "smooth-vs-rough"}, {
        "width": bad_int(1), "teacher_depth": bad_int(1), "vocab": bad_int(1), "replicates": bad_int(1),
        "seed": bad_int(0), "teacher_seed": bad_int(0),
        "depths": st.one_of(st.just(()), st.just((4, 4)), bad_tuple_of(bad_int(1))),
        "schemes": bad_tuple_of(bad_name(resflow.TABLEAUX).filter(lambda s: s is not None)),
        "targets": st.one_of(st.just(()), bad_tuple_of(st.text(min_size=1, max_size=8).filter(
            lambda s: s not in ("independent", "tied")))),
        "lengths": st.one_of(st.just(()), st.just((0.5,)), st.just((1.0, 1.0)), bad_tuple_of(bad_real(0.0, 1.0))),
    }),
    "TrainConfig": (TrainConfig, {}, {
        **{k: bad_int(1) for k in ("steps", "batch", "eval_every", "eval_batches", "eval_batch_size",
                                   "checkpoint_every")},
        **{k: bad_name(v) for k, v in {"loss": ("mse", "kl"), "head": ("learned", "shared"),
                                       "decay": ("linear", "geometric", "none"), "dtype": ("float32", "float64"),
                                       "device": ("auto", "cpu", "cuda")}.items()},
        **{k: bad_real(0.0) for k in ("lr_base", "lr_scale")},
        "constant_fraction": bad_real(0.0, 1.0, low_ok=True),
        "final_lr_fraction": bad_real(0.0, 1.0),
        "optimizer": st.one_of(st.integers(), st.none(), st.sampled_from(["adamw", "", "sgd"])),
        "temperatures": bad_tuple_of(bad_real(0.0)),
        **{k: st.one_of(st.integers(), st.text(max_size=3), st.none()) for k in ("tf32", "lr_depth_scaling")},
    }),
    "ResidualStack": (lambda **kw: resflow.ResidualStack(**kw), {"fields": field(), "depth": 4}, {
        "depth": bad_int(1), "scheme": bad_name(resflow.TABLEAUX),
        "horizon": bad_real(0.0).filter(lambda v: v is not None),  # None: the default horizon
    }),
    "MLPField": (resflow.MLPField, {"dim": 4}, {
        "dim": bad_int(1), "hidden": bad_int(1).filter(lambda v: v is not None),
        "activation": bad_name(("relu2", "softplus2")),
    }),
    "NoisyEnsemble": (resflow.NoisyEnsemble, {"n_members": 4, "sigma": 1.0}, {
        "n_members": bad_int(1), "sigma": bad_real(0.0),
        "correlation": st.one_of(st.integers(), st.text(max_size=12).filter(
            lambda s: not s.startswith(("correlated:", "fractional:")) and s != "iid")),
    }),
    "Fractional": (resflow.Fractional, {"hurst": 0.7}, {"hurst": bad_real(0.0, 1.0)}),
    "Equicorrelated": (resflow.Equicorrelated, {"rho": 0.5}, {"rho": bad_real(0.0, 1.0, low_ok=True)}),
    "laws.evaluate": (lambda **kw: resflow.laws.evaluate(kw.pop("name"), **kw),
                      {"name": "ensemble-equicorrelated", "L": 4, "sigma": 1.0, "rho": 0.5},
                      {"name": bad_name(()).filter(lambda s: s is not None), "L": bad_law_value(),
                       "sigma": bad_law_value(), "rho": bad_law_value(low_ok=True, high=1.0)}),
    "get_tableau": (lambda **kw: resflow.get_tableau(kw["scheme"]), {"scheme": "euler"},
                    {"scheme": bad_name(resflow.TABLEAUX)}),
    "preset": (lambda **kw: resflow.preset(kw["experiment"], kw["preset"]), {"experiment": "rk2", "preset": "cpu"},
               {"experiment": bad_name(resflow.experiments.registered()), "preset": bad_name(("cpu", "paper"))}),
    "ScalingFitSettings": (ScalingFitSettings, {}, {
        "loss": bad_name(("huber", "squared")), "huber_delta": bad_real(0.0), "n_starts": bad_int(1),
        "exclude_top": bad_int(0).filter(lambda v: v is not None),  # None: the study's cut on its table only
        "depth_offset": bad_real(0.0, low_ok=True),
    }),
    "FitSettings": (resflow.FitSettings, {}, {"confidence": bad_real(0.0, 1.0, high_ok=False),
                                              "bootstrap_samples": bad_int(1), "drift_tolerance": bad_real(0.0),
                                              "gain_tolerance": bad_real(0.0)}),
}
COUNTS: dict[str, int] = {}


def _call_expecting_error(case: str, argument: str, value) -> None:
    call, valid, _ = API_CASES[case]
    kwargs = {**valid, argument: value}
    with pytest.raises(ResflowError) as info:
        call(**kwargs)
    message = str(info.value).lower()
    named = re.search(rf"(?<![a-z_]){re.escape(argument.lower())}(?![a-z_])", message)  # the word, not a part
    assert named, (case, argument, value, message)


api_examples = st.sampled_from(sorted((c, a) for c, (_, _, args) in API_CASES.items() for a in args))


FUZZ = settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# a command line costs about 0.3 s: 100 in the default suite, 1000 under `make test-slow` (HYPOTHESIS_PROFILE=slow)
FUZZ_CLI = settings(max_examples=settings.default.max_examples,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(data=st.data())
def test_api_rejects_bad_arguments_by_name(data, record_property):
    case, argument = data.draw(api_examples)
    value = data.draw(API_CASES[case][2][argument], label=f"{case}.{argument}")
    COUNTS[case] = COUNTS.get(case, 0) + 1
    _call_expecting_error(case, argument, value)
    record_property("fuzz_api_cases", 1)


@pytest.mark.parametrize("entry", CORPUS["api"], ids=lambda e: f"{e['case']}.{e['argument']}")
def test_api_corpus(entry):
    _call_expecting_error(entry["case"], entry["argument"], entry["value"])


# ------------------------------------------------------------------------------------ CLI cases
TINY = ["train.steps=4", "train.eval_every=2", "train.eval_batches=1", "train.eval_batch_size=8",
        "train.batch=4", "width=4", "teacher_depth=4", "depths=2,4", "replicates=1", "train.device=cpu",
        "train.checkpoint_every=2", "routes=scratch", "inits=1", "lengths=0.5,1"]


def checksum(path: Path) -> str:
    """Names and bytes of everything under ``path`` (or the file itself)."""
    digest = hashlib.sha256()
    if path.is_file():
        digest.update(path.read_bytes())
    elif path.is_dir():
        for item in sorted(path.rglob("*")):
            digest.update(str(item.relative_to(path)).encode())
            if item.is_file():
                digest.update(item.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Damaged stores, tables and checkpoints, built once."""
    from resflow.experiments import preset
    from resflow.store import Store
    from resflow.workflows import run_experiment

    root = tmp_path_factory.mktemp("fuzz")
    config = preset("smooth-vs-rough", "cpu").with_overrides(TINY)
    good = root / "good"
    run_experiment(config, out=good)
    stores = {"good": good, "missing": root / "missing", "empty-dir": root / "empty-dir"}
    stores["empty-dir"].mkdir()
    (root / "a-file").write_text("not a store\n")
    stores["a-file"] = root / "a-file"
    for name, damage in {
        "no-marker": lambda p: (p / "resflow-store.json").unlink(),
        "corrupt-marker": lambda p: (p / "resflow-store.json").write_text("{not json"),
        "future-version": lambda p: (p / "resflow-store.json").write_text('{"schema": "resflow-store", "version": 9}'),
        "foreign-marker": lambda p: (p / "resflow-store.json").write_text('{"schema": "other"}'),
        "truncated-chunk": lambda p: [c.write_bytes(c.read_bytes()[: len(c.read_bytes()) // 2])
                                      for c in (p / "runs").glob("toy-run*/test_loss/*") if c.name[0].isdigit()],
        "corrupt-metadata": lambda p: [(r / ".zmetadata").write_text("{broken") for r in (p / "runs").glob("*.zarr")],
        "foreign-record": lambda p: Store.open(p).write(xr.Dataset({"x": (("i",), np.arange(3.0))},
                                                                   attrs={"experiment": "smooth-vs-rough"}),
                                                        kind="toy-run", name="foreign"),
    }.items():
        shutil.copytree(good, root / name)
        damage(root / name)
        shutil.rmtree(root / name / "work", ignore_errors=True)  # fit records stay; figures do not matter
        stores[name] = root / name
    # an interrupted run whose checkpoint is then damaged, for `run --resume`
    checkpoints = {}
    for name, damage in {
        "truncated": lambda c: c.write_bytes(c.read_bytes()[:100]),
        "random-bytes": lambda c: c.write_bytes(np.random.default_rng(0).bytes(4096)),
        "foreign-pickle": lambda c: __import__("torch").save({"format": 1, "weights": [1, 2]}, c),
        "empty": lambda c: c.write_bytes(b""),
    }.items():
        store = root / f"ckpt-{name}"
        run_experiment(config, out=store, stop_after=2)
        ckpt = next(store.glob("work/*/checkpoint.pt"))
        damage(ckpt)
        checkpoints[name] = store
    tables = {}
    header = "model_size,FLOP,loss,num_tokens,d_model,n_layers\n"
    rows = "".join(f"{1e6 * k},{1e18 * k},{3.0 - 0.01 * k},{1e9 * k},{64 * k},{2 + k}\n" for k in range(1, 21))
    assert rows.count(",2.99,") == 1  # the first row's loss, replaced below
    for name, text in {
        "empty": "", "header-only": header, "missing-column": header.replace(",n_layers", "") +
        "".join(r.rpartition(",")[0] + "\n" for r in rows.splitlines()),
        "non-numeric": header + rows.replace(",2.99,", ",three,"), "negative": header + rows.replace(",2.99,", ",-3,"),
        "duplicated": header.replace("FLOP", "loss") + rows, "too-few-rows": header + "".join(rows.splitlines(True)[:3]),
        "binary": "\x00\x01\x02garbage\xff", "nan": header + rows.replace(",2.99,", ",nan,"),
    }.items():
        path = root / f"{name}.csv"
        path.write_text(text, errors="surrogateescape") if name != "binary" else path.write_bytes(b"\x00\x01\xff\xfe")
        tables[name] = path
    return {"stores": stores, "checkpoints": checkpoints, "tables": tables, "root": root}


def bad_set_pairs():
    keys = config_keys()
    int_keys = [k for k, t in keys.items() if t is int]
    float_keys = [k for k, t in keys.items() if t is float]
    bool_keys = [k for k, t in keys.items() if t is bool]
    choice_keys = ["train.loss", "train.head", "train.decay", "train.dtype", "train.device"]
    return st.one_of(
        st.tuples(st.sampled_from(int_keys), st.sampled_from(["-5", "1.5", "abc", "", "nan", "1e3", "-1"])),
        st.tuples(st.sampled_from(float_keys), st.sampled_from(["nan", "inf", "-inf", "-1", "abc", "", "1e999"])),
        st.tuples(st.sampled_from(bool_keys), st.sampled_from(["maybe", "2", "", "yes please"])),
        st.tuples(st.sampled_from(choice_keys), st.text(max_size=6).filter(
            lambda v: v.strip() not in ("mse", "kl", "learned", "shared", "linear", "geometric", "none", "float32",
                                        "float64", "auto", "cpu", "cuda") and "," not in v)),
        st.tuples(st.just("depths"), st.sampled_from(["", "a,b", "0,2", "-1,2", "3", "4,4", "2;4"])),
        st.tuples(st.just("lengths"), st.sampled_from(["", "0.5", "0,1", "2,1", "nan,1", "1,1"])),
        st.tuples(st.just("schemes"), st.text(min_size=1, max_size=8).filter(lambda v: v.strip(", ") and all(
            s.strip() not in resflow.TABLEAUX for s in v.split(",")))),
        st.tuples(st.just("targets"), st.sampled_from(["", "nosuch", "correlated:2", "fractional:1.5", "correlated:x",
                                                       "fractional:0", ","])),
        st.tuples(st.text(min_size=1, max_size=10).filter(lambda k: k.strip() not in keys and "=" not in k),
                  st.just("1")),
    ).map(lambda kv: f"{kv[0]}={kv[1]}")


def cli_cases(inputs):
    stores, tables, ckpts = inputs["stores"], inputs["tables"], inputs["checkpoints"]
    good = str(stores["good"])
    experiments = list(resflow.experiments.registered())
    damaged = st.sampled_from(sorted(set(stores) - {"good"})).map(lambda n: str(stores[n]))
    any_store = st.sampled_from(sorted(stores)).map(lambda n: str(stores[n]))
    junk = st.text(min_size=1, max_size=8).filter(lambda s: not s.startswith("-"))
    tiny = [a for pair in TINY for a in ("--set", pair)]
    return st.one_of(
        # every `run` case carries the tiny overrides, so one that were accepted by mistake ends in seconds
        st.tuples(st.just("run"), junk.filter(lambda s: s.strip() not in experiments)).map(
            lambda t: [*t, *tiny, "--out", good]),
        st.tuples(st.sampled_from(experiments), junk.filter(lambda s: s.strip() not in ("cpu", "paper", "gpu", "tiny"))).map(
            lambda t: ["run", t[0], "--preset", t[1], *tiny, "--out", good]),
        st.sampled_from(["0", "-1", "x", "1.5"]).map(lambda r: ["run", "smooth-vs-rough", "--replicates", r, *tiny,
                                                                "--out", good]),
        junk.filter(lambda s: s.strip() not in ("auto", "cpu", "cuda")).map(
            lambda d: ["run", "smooth-vs-rough", "--device", d, *tiny, "--out", good]),
        bad_set_pairs().map(lambda pair: ["run", "smooth-vs-rough", *tiny, "--set", pair, "--out", good]),
        st.just(["run", "smooth-vs-rough", "--set", "train.steps", "--out", good]),
        st.sampled_from(sorted(ckpts)).map(lambda n: ["run", "smooth-vs-rough", *tiny, "--resume", "--out",
                                                      str(ckpts[n])]),
        st.just(["run", "smooth-vs-rough", *tiny, "--resume", "--out", good]),  # nothing interrupted there
        # fit skips a foreign run record and names it (tests/test_llm.py), so only damage that leaves no
        # fittable run is an error here
        damaged.filter(lambda s: not s.endswith("foreign-record")).map(lambda s: ["fit", s]),
        # compare reads fit records only: a foreign run record is skipped (and said so), a damaged
        # loss chunk of a run is never read
        damaged.filter(lambda s: not s.endswith(("foreign-record", "truncated-chunk"))).map(lambda s: ["compare", s]),
        damaged.map(lambda s: ["store", "check", s]),
        st.sampled_from(sorted(tables)).map(lambda n: ["llm-fit", "--data", str(tables[n]), "--starts", "2",
                                                       "--exclude-top", "0", "--out", good]),
        st.sampled_from(["d_model", "d_model=", "=width", "nosuch=width", "d_model=width,,", "loss=nope"]).map(
            lambda c: ["llm-fit", "--data", str(tables["header-only"]), "--columns", c, "--out", good]),
        st.tuples(st.sampled_from(["--exclude-top", "--starts", "--loss", "--bootstrap", "--depth-offset"]),
                  st.sampled_from(["-1", "x", "nan", "-inf"])).map(
            lambda t: ["llm-fit", "--data", str(tables["negative"]), *t, "--out", good]),
        junk.filter(lambda s: s not in resflow.laws.names()).map(lambda n: ["theory", n]),
        st.sampled_from([["bench", "--case", "nosuch"], ["bench", "--check", "fp8"], ["bench", "--rounds", "0"],
                         ["bench", "--device", "tpu", "--case", "nosuch"], ["tableaux", "--bogus"],
                         ["demo", "overview", "--seed", "-1", "--out", good],
                         ["demo", "overview", "--out", str(stores["a-file"])]]),
        st.tuples(st.sampled_from(["teacher:nosuch", "teacher:correlated:7", "teacher:fractional:x",
                                   str(inputs["root"] / "no-such-model")]),
                  st.sampled_from([[], ["--max-tokens", "0"], ["--batch-size", "-1"], ["--device", "tpu"]])).map(
            lambda t: ["probe", t[0], *t[1], "--out", good]),
        any_store.map(lambda s: ["probe", "teacher:tied", "--texts", str(Path(s) / "missing.txt"), "--out", good]),
    )


def _run_cli_expecting_error(args: list[str], inputs) -> None:
    watched = [Path(a) for a in args if Path(a).exists() and str(Path(a)).startswith(str(inputs["root"]))]
    before = {p: checksum(p) for p in watched}
    result = runner.invoke(app, args)
    output = result.output
    assert result.exit_code not in (0, None), (args, output)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert "Traceback" not in output, (args, output)
    assert output.strip(), (args, "no message")
    for path, digest in before.items():
        assert checksum(path) == digest, (args, f"{path} changed")


@FUZZ_CLI
@given(data=st.data())
def test_cli_bad_input_fails_cleanly_and_changes_nothing(data, inputs, record_property):
    args = data.draw(cli_cases(inputs), label="argv")
    _run_cli_expecting_error(args, inputs)
    record_property("fuzz_cli_cases", 1)


@pytest.mark.parametrize("entry", CORPUS["cli"], ids=lambda e: " ".join(e["args"])[:40])
def test_cli_corpus(entry, inputs):
    """Regression cases: {store:NAME}, {table:NAME} and {checkpoint:NAME} are replaced by the fixtures."""
    def fill(arg):
        for kind, table in (("store", inputs["stores"]), ("table", inputs["tables"]),
                            ("checkpoint", inputs["checkpoints"])):
            if arg.startswith(f"{{{kind}:") and arg.endswith("}"):
                return str(table[arg[len(kind) + 2:-1]])
        return arg
    _run_cli_expecting_error([fill(a) for a in entry["args"]], inputs)
