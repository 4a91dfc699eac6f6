"""Test configuration: 4 host CPU devices for sharding tests, Agg plots, a key fixture."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)
