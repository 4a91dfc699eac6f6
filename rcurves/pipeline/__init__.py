"""The machinery that runs the measures at scale: evaluations, chunked resumable runs, devices, reports.

* :mod:`~rcurves.pipeline.evaluation` -- models x data x norms -> distances, curves, tables (:func:`evaluate`);
* :mod:`~rcurves.pipeline.measures` -- sparsity and inter-class runs of a data set;
* :mod:`~rcurves.pipeline.sweep` -- robustness over training (checkpoint sweeps);
* :mod:`~rcurves.pipeline.demo` -- ``rcurves demo`` as a library call;
* :mod:`~rcurves.pipeline.runner` -- chunked, atomic, resumable runs of any per-point function;
* :mod:`~rcurves.pipeline.distributed` -- the points axis sharded over devices;
* :mod:`~rcurves.pipeline.report` -- tables, flips and files of an evaluation.
"""
from attacks._lazy import attach

# public name -> 'module' (a submodule) or 'module:attribute'; imported on first use (PEP 562), so a
# program loads only the modules it uses (and a claim's code fingerprint covers only those)
__getattr__, __dir__ = attach(__name__, {
    'AttackSettings': 'rcurves.pipeline.evaluation:AttackSettings',
    'Evaluation': 'rcurves.pipeline.evaluation:Evaluation',
    'compute_distances': 'rcurves.pipeline.evaluation:compute_distances',
    'evaluate': 'rcurves.pipeline.evaluation:evaluate',
    'DistanceConfig': 'rcurves.pipeline.runner:DistanceConfig',
    'RunnerError': 'rcurves.pipeline.runner:RunnerError',
    'chunk_path': 'rcurves.pipeline.runner:chunk_path',
    'load_result': 'rcurves.pipeline.runner:load_result',
    'make_distance_fn': 'rcurves.pipeline.runner:make_distance_fn',
    'point_keys': 'rcurves.pipeline.runner:point_keys',
    'run_chunked': 'rcurves.pipeline.runner:run_chunked',
    'AXIS': 'rcurves.pipeline.distributed:AXIS',
    'make_mesh': 'rcurves.pipeline.distributed:make_mesh',
    'on_mesh': 'rcurves.pipeline.distributed:on_mesh',
    'per_shard': 'rcurves.pipeline.distributed:per_shard',
    'resolve_mesh': 'rcurves.pipeline.distributed:resolve_mesh',
    'shard_points': 'rcurves.pipeline.distributed:shard_points',
    'to_host': 'rcurves.pipeline.distributed:to_host',
    'DEFAULT_THRESHOLDS': 'rcurves.pipeline.report:DEFAULT_THRESHOLDS',
    'build_report': 'rcurves.pipeline.report:build_report',
    'ranking_flips': 'rcurves.pipeline.report:ranking_flips',
    'ranks': 'rcurves.pipeline.report:ranks',
    'write_curves_csv': 'rcurves.pipeline.report:write_curves_csv',
    'write_distances_csv': 'rcurves.pipeline.report:write_distances_csv',
    'write_report': 'rcurves.pipeline.report:write_report',
    'Sweep': 'rcurves.pipeline.sweep:Sweep',
    'checkpoint_epochs': 'rcurves.pipeline.sweep:checkpoint_epochs',
    'checkpoint_sweep': 'rcurves.pipeline.sweep:checkpoint_sweep',
    'evaluate_checkpoints': 'rcurves.pipeline.sweep:evaluate_checkpoints',
    'DemoSettings': 'rcurves.pipeline.demo:DemoSettings',
    'run_demo': 'rcurves.pipeline.demo:run_demo',
    'interclass_run': 'rcurves.pipeline.measures:interclass_run',
    'sparsity_run': 'rcurves.pipeline.measures:sparsity_run',
})

__all__ = sorted(['AttackSettings', 'Evaluation', 'compute_distances', 'evaluate', 'DistanceConfig', 'RunnerError', 'chunk_path', 'load_result', 'make_distance_fn', 'point_keys', 'run_chunked', 'AXIS', 'make_mesh', 'on_mesh', 'per_shard', 'resolve_mesh', 'shard_points', 'to_host', 'DEFAULT_THRESHOLDS', 'build_report', 'ranking_flips', 'ranks', 'write_curves_csv', 'write_distances_csv', 'write_report', 'Sweep', 'checkpoint_epochs', 'checkpoint_sweep', 'evaluate_checkpoints', 'DemoSettings', 'run_demo', 'interclass_run', 'sparsity_run'])
