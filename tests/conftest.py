"""Test configuration: 4 host CPU devices for sharding tests, Agg plots, a fresh cache, a key fixture."""
import atexit
import functools
import os
import shutil
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
# Hermetic: a fresh model/evaluation cache per session (per worker process), as on a CI machine
# (a developer's ~/.cache/rcurves must not make a test pass or fast); removed when the process exits.
os.environ["RCURVES_CACHE"] = tempfile.mkdtemp(prefix="rcurves-test-cache-")
atexit.register(functools.partial(shutil.rmtree, os.environ["RCURVES_CACHE"], ignore_errors=True))
os.environ.pop("RCURVES_JAX_CACHE", None)
os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402
import pytest  # noqa: E402

#: ``RCURVES_TEST_EMULATE=tf32`` (or ``bf16``): the whole session computes float32 products below HIGHEST
#: precision as that accelerator does (tests/_accelerator.py); unset, only the tests marked ``accelerator`` do
_SESSION_EMULATION = os.environ.get("RCURVES_TEST_EMULATE", "").strip().lower() or None


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "accelerator(kind='tf32'): run under an accelerator's float32 products, emulated on the CPU "
                   "(tests/_accelerator.py; kind 'tf32' as an NVIDIA GPU, 'bf16' as a TPU)")
    config.addinivalue_line(
        "markers", "highest: checks arithmetic that holds with exact float32 products (a model's forward against "
                   "a float64 reference, two programs' equal outputs, an attack's exact-arithmetic landing); the test "
                   "runs under attacks.precision.exact_precision on every device (a no-op on XLA:CPU)")
    if _SESSION_EMULATION:
        from tests._accelerator import BITS, install

        if _SESSION_EMULATION not in BITS:
            raise pytest.UsageError(f"RCURVES_TEST_EMULATE: expected one of {sorted(BITS)}, got {_SESSION_EMULATION!r}")
        install(_SESSION_EMULATION)


@pytest.fixture(autouse=True)
def _highest_products(request):
    """A test marked ``highest`` traces its programs with float32 products at HIGHEST (docs/precision.md)."""
    if request.node.get_closest_marker("highest") is None:
        yield
        return
    from attacks.precision import exact_precision

    with exact_precision():
        yield


@pytest.fixture(autouse=True)
def _accelerator_products(request):
    """A test marked ``accelerator`` runs under the emulation of its kind (default TF32); the compiled
    programs are dropped before and after it, so none crosses the boundary."""
    mark = request.node.get_closest_marker("accelerator")
    if mark is None or _SESSION_EMULATION:
        yield
        return
    from tests._accelerator import emulate

    with emulate(mark.args[0] if mark.args else mark.kwargs.get("kind", "tf32")):
        yield


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Drop every compiled program after each test module.

    Each XLA:CPU executable holds memory mappings of its own; the suite
    compiles thousands of programs, and one process kept them all until
    ``vm.max_map_count`` (65,530) ran out and a compilation aborted.
    """
    yield
    import gc

    jax.clear_caches()
    gc.collect()


#: Tests deselected by default (setup.cfg's ``addopts = -m "not slow"``, to keep ``pytest`` under 15 minutes
#: on 2 cores; ``pytest -m slow`` runs these, ``pytest -m "slow or not slow"`` everything). Each took >= 5 s on
#: an idle 2-core machine (2026-11-26 ``--durations``) and is an end-to-end run whose facts the default tests
#: also check on smaller cases: quick runs of the experiment scripts (their verdict rules have unit tests),
#: multi-device and multi-process equalities beyond the basic ones, CNN / ResNet paths of what the MLP paths
#: test. Keyed by ``path::function`` (every parametrisation).
SLOW = {
    "tests/experiments/test_experiments_000_001.py::" + f for f in (
        "test_table1_fig2_table_and_crossings_are_those_of_the_distances",
        "test_theorem2_on_a_trained_binary_linear_model", "test_fig7_examples_are_rechecked",
        "test_parabola_rows_and_attacks_against_closed_form", "test_fig1_smooth_and_squiggly_boundaries",
        "test_fig6_l2_curves_cross_linf_curves_do_not", "test_linear_toy_theorem1_and_interclass_scripts",
        "test_fig3_slope_change_counts", "test_fig4_rows_and_rules", "test_l2_bounded_by_linf_adversarials")
} | {
    "tests/experiments/test_experiments_002_003.py::" + f for f in (
        "test_nn1_agreement", "test_invariance_linf", "test_nn1_exact_curve", "test_nn1_table3",
        "test_invariance_robust_accuracy")
} | {
    "tests/experiments/test_experiments_004.py::" + f for f in (
        "test_tables_accounting_fair_samples_and_reproducible_points", "test_broken_defence_surrogates",
        "test_vs_eps_accounting", "test_augmentation_on_a_fixed_sample",
        # a quick run of two scripts checking they share per-point values (31 s): room for the ONNX / VNN-LIB /
        # verify tests (about 40 s idle) under 15 minutes; the EER rule has its own test (test_equal_error_rule_and_std_ratio)
        "test_histogram_reproduces_the_table_and_the_eer_rule")
} | {
    "tests/test_cli.py::test_sparsity_command_measures_exactly_the_vulnerable_points",
    "tests/test_cli.py::test_train_resnet_from_the_command_line",
    "tests/test_cli.py::test_curves_on_4_devices_equals_1_and_resumes_on_another_count",
    "tests/pipeline/test_distributed.py::test_sharding_example_routes_agree",
    "tests/pipeline/test_distributed.py::test_minimal_distance_on_4_devices_equals_1",
    "tests/pipeline/test_distributed.py::test_cw_and_pgd_on_4_devices_equal_1",
    "tests/pipeline/test_distributed.py::test_every_runner_in_run_chunked_on_4_devices_equals_1_bit_for_bit",
    "tests/pipeline/test_distributed.py::test_run_chunked_resumes_across_device_counts",
    "tests/pipeline/test_multihost.py::test_two_processes_equal_one_device",
    "tests/pipeline/test_runner.py::test_sigkill_at_random_points_then_resume_equals_an_uninterrupted_run",
    "tests/models/test_models.py::test_resnet20_structure_and_frozen_batch_norm",
    "tests/models/test_mmr.py::test_sampled_units_have_the_exact_rows_of_those_units",
    "tests/certify/test_certify.py::test_certified_below_exact_below_attack_trained",
    "tests/certify/test_certify.py::test_cnn_second_layer_bounds_equal_a_dense_numpy_crown_and_contain_logits",
    "tests/certify/test_bab.py::test_a_round_from_a_reused_frontier_never_overflows_and_stays_sound",
    "tests/attacks/test_convrewrite.py::test_flax_conv_model_rewritten_and_attacked_alike",
    "tests/attacks/test_ranking.py::test_ranked_search_on_a_boxed_linear_model",
    "tests/attacks/test_ensemble.py::test_default_members_are_independent_searches_and_spend_the_budget",
    "tests/attacks/test_xla.py::test_materialized_gradient_gives_the_same_attack",
    "tests/attacks/test_minimal.py::test_callable_inside_user_jit_and_shard_map",
    "tests/attacks/test_minimal.py::test_same_key_same_result_and_batch_equals_singles",
    "tests/attacks/test_modeltree.py::test_flax_nnx_modules_are_pytree_callables_sharing_programs",
    "tests/data/test_streaming.py::test_attack_results_do_not_depend_on_chunk_size",
    # 2026-11-26 (stop 40; 2 xdist workers, 684 s in all): end-to-end checks whose facts smaller tests also hold
    "tests/attacks/test_ensemble.py::test_l2_ensemble_of_every_member_is_their_minimum_and_exact",
    "tests/pipeline/test_runner.py::test_ensemble_distances_in_a_run",
    "tests/certify/test_certify.py::test_certified_below_milp_below_dense_random_search_and_attained",
}
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the tests of :data:`SLOW` ``slow`` before ``-m`` selects (the hook runs before the mark plugin's)."""
    for item in items:
        rel = os.path.relpath(str(item.path), _ROOT).replace(os.sep, "/")
        if f"{rel}::{getattr(item, 'originalname', item.name)}" in SLOW:
            item.add_marker(pytest.mark.slow)
