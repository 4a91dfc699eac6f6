"""Test configuration: 4 host CPU devices for sharding tests, Agg plots, a fresh cache, a key fixture."""
import os
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
# Hermetic: a fresh model/evaluation cache per session, as on a CI machine
# (a developer's ~/.cache/rcurves must not make a test pass or fast).
os.environ["RCURVES_CACHE"] = tempfile.mkdtemp(prefix="rcurves-test-cache-")
os.environ.pop("RCURVES_JAX_CACHE", None)
os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402
import pytest  # noqa: E402


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
