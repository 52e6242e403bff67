"""Workflows: one public function under every command, each returning a typed result.

==============  ===============================  =============================================
module          function                         command
==============  ===============================  =============================================
``run``         :func:`run_experiment`           ``resflow run`` (build, train, store, fit, figure)
``plan``        :class:`RunPlan`                 a run's configuration resolved once, before any work
``stages``      :func:`run_stages`               the run as stages: train, measure, record, fit, draw
``ladder``      :func:`run_ladder`               ``resflow run lm-ladder`` (language models trained here);
                :func:`ladder_depth_use_of`      the depth-use measures of a finished ladder's work directory
``fit``         :func:`fit_store`                ``resflow fit`` (fit records; reuses existing ones)
``llm``         :func:`fit_llm_table`            ``resflow llm-fit``
``probe``       :func:`probe_models`             ``resflow probe``
``compare``     :func:`compare_stores`           ``resflow compare``
``demo``        :func:`run_flow_demo`            ``resflow demo``
``sweep``       :func:`run_sweep`                ``resflow sweep`` (a grid of cells on dask.distributed)
``bench``       :func:`bench_engine`             ``resflow bench`` (a ``bench`` record)
``report``      :func:`report_run`               ``resflow report`` (Markdown tables of a run)
``optimum``     :func:`reach_optima`             ``resflow optimum`` (a finished run's optima by L-BFGS)
``axis``        :func:`axis_report`              ``resflow report STORE --axis KEY`` (a sweep along a key)
``figures``     :func:`draw_run_figure`          a run's figure redrawn from its record (docs/results.md)
``intervene``   :func:`intervene_models`         ``resflow intervene`` (lesion, swap, trace)
``stores``      :func:`check_store`              ``resflow store check`` (each kind checked by its writer),
                :func:`gc_store`                 ``resflow store gc``
``rundir``      :class:`RunDir`                  a run's directory (run.json, lock, checkpoints, record);
                :func:`run_dirs`                 the one scanner of a store's runs;
                :func:`resumable`                the one policy of resuming (run, ladder, check, report)
``unfinished``  :func:`unfinished_runs`          runs without a record: in progress, interrupted, idle
``resume``      :func:`resume_config`            ``resflow run RUN --resume`` (the saved configuration)
``measures``    :func:`register_measure`         ``resflow run``: what is measured on trained students
                                                 (tracking, interventions, early exit,
                                                 constructions, smoothness, group angles:
                                                 ``tracking``, ``intervene``, ``exits``,
                                                 ``constructions``, ``smoothness``,
                                                 ``group_angles``)
==============  ===============================  =============================================

This is the orchestration layer: it sits above simulation (:mod:`resflow.training`), analysis
(:mod:`resflow.analysis`), the LLM side (:mod:`resflow.llm`) and the store, which never import it.
The command line (:mod:`resflow.cli`) only parses, calls one of these and prints.
"""

from .axis import axis_figure, axis_report
from .bench import BenchResult, bench_engine
from .compare import Comparison, compare_stores
from .demo import FlowDemoConfig, FlowDemoResult, run_flow_demo
from .figures import RunFigure, draw_run_figure
from .fit import RunFits, fit_store
from .intervene import InterventionRun, intervene_models, intervene_teacher
from .ladder import LadderRun, ladder_depth_use_of, run_ladder
from .llm import LLMFitResult, fit_llm_table
from .measures import (
    MEASURES,
    Measure,
    Measurements,
    TrainedStudent,
    TrainedStudents,
    chosen_measures,
    register_measure,
)
from .optimum import OptimaRun, OptimumExponent, reach_optima
from .plan import RunPlan
from .probe import ProbeRun, probe_models, probe_teacher
from .report import report_run, unfinished_note
from .resume import resume_config
from .run import ExperimentResult, find_resumable, run_experiment
from .rundir import RunDir, resumable, run_dirs
from .stages import STAGES, RunContext, run_stages
from .stores import StoreCheck, check_store, gc_store
from .sweep import SweepCell, SweepPlan, SweepResult, load_manifest, parse_grid, run_sweep
from .unfinished import UnfinishedRun, unfinished_runs

__all__ = [
    "ExperimentResult", "run_experiment", "find_resumable", "RunFits", "fit_store", "LLMFitResult",
    "fit_llm_table", "ProbeRun", "probe_models", "probe_teacher", "Comparison", "compare_stores",
    "FlowDemoConfig", "FlowDemoResult", "run_flow_demo", "SweepPlan", "SweepCell", "SweepResult", "run_sweep",
    "parse_grid", "load_manifest", "BenchResult", "bench_engine", "report_run", "axis_report", "axis_figure",
    "check_store",
    "InterventionRun", "intervene_models", "intervene_teacher", "LadderRun", "run_ladder",
    "ladder_depth_use_of", "StoreCheck",
    "gc_store", "UnfinishedRun", "unfinished_runs", "resume_config", "unfinished_note", "RunFigure",
    "draw_run_figure", "MEASURES", "Measure", "TrainedStudent", "TrainedStudents", "register_measure",
    "chosen_measures", "OptimaRun", "OptimumExponent", "reach_optima", "RunDir", "run_dirs", "resumable",
    "Measurements", "RunPlan", "RunContext", "STAGES", "run_stages",
]
