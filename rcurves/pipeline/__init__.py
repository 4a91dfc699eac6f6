"""The machinery that runs the measures at scale: evaluations, chunked resumable runs, devices, reports.

* :mod:`~rcurves.pipeline.evaluation` -- models x data x norms -> distances, curves, tables (:func:`evaluate`);
* :mod:`~rcurves.pipeline.measures` -- sparsity and inter-class runs of a data set;
* :mod:`~rcurves.pipeline.sweep` -- robustness over training (checkpoint sweeps);
* :mod:`~rcurves.pipeline.demo` -- ``rcurves demo`` as a library call;
* :mod:`~rcurves.pipeline.runner` -- chunked, atomic, resumable runs of any per-point function;
* :mod:`~rcurves.pipeline.distributed` -- the points axis sharded over devices;
* :mod:`~rcurves.pipeline.report` -- tables, flips and files of an evaluation.
"""
from rcurves.pipeline.evaluation import AttackSettings as AttackSettings
from rcurves.pipeline.evaluation import Evaluation as Evaluation
from rcurves.pipeline.evaluation import compute_distances as compute_distances
from rcurves.pipeline.evaluation import evaluate as evaluate
from rcurves.pipeline.runner import DistanceConfig as DistanceConfig
from rcurves.pipeline.runner import RunnerError as RunnerError
from rcurves.pipeline.runner import chunk_path as chunk_path
from rcurves.pipeline.runner import load_result as load_result
from rcurves.pipeline.runner import make_distance_fn as make_distance_fn
from rcurves.pipeline.runner import point_keys as point_keys
from rcurves.pipeline.runner import run_chunked as run_chunked
from rcurves.pipeline.distributed import AXIS as AXIS
from rcurves.pipeline.distributed import make_mesh as make_mesh
from rcurves.pipeline.distributed import on_mesh as on_mesh
from rcurves.pipeline.distributed import per_shard as per_shard
from rcurves.pipeline.distributed import resolve_mesh as resolve_mesh
from rcurves.pipeline.distributed import shard_points as shard_points
from rcurves.pipeline.distributed import to_host as to_host
from rcurves.pipeline.report import DEFAULT_THRESHOLDS as DEFAULT_THRESHOLDS
from rcurves.pipeline.report import build_report as build_report
from rcurves.pipeline.report import ranking_flips as ranking_flips
from rcurves.pipeline.report import ranks as ranks
from rcurves.pipeline.report import write_curves_csv as write_curves_csv
from rcurves.pipeline.report import write_distances_csv as write_distances_csv
from rcurves.pipeline.report import write_report as write_report
from rcurves.pipeline.sweep import Sweep as Sweep
from rcurves.pipeline.sweep import checkpoint_epochs as checkpoint_epochs
from rcurves.pipeline.sweep import checkpoint_sweep as checkpoint_sweep
from rcurves.pipeline.sweep import evaluate_checkpoints as evaluate_checkpoints
from rcurves.pipeline.demo import DemoSettings as DemoSettings
from rcurves.pipeline.demo import run_demo as run_demo
from rcurves.pipeline.measures import interclass_run as interclass_run
from rcurves.pipeline.measures import sparsity_run as sparsity_run
