"""Every Python snippet in docs/*.md and README.md runs as written.

Each fenced ```python block runs in a fresh interpreter (TensorFlow backend),
from an empty working directory, as a user would paste it; a snippet that
reads the project's real data finds it through `KERAS_BERT_IMPL_SHARED_DATA`
(set here to ../shared/data), as the docs say. A block that took 12 s or more
(a fit to the end, a recipe run) has the line `<!-- slow test -->` just
above its fence, invisible on the rendered page: it runs with the `slow` tests
(`python tests/run_all_backends.py --full`).
"""

import os
import pathlib
import re
import subprocess
import sys

import keras
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
SHARED_DATA = os.environ.get("KERAS_BERT_IMPL_SHARED_DATA", str(REPO.parent / "shared" / "data"))
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
SLOW = "<!-- slow test -->"


def _snippets():
    for document in DOCUMENTS:
        text = (REPO / document).read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 2
            slow = text[: match.start()].rstrip().endswith(SLOW)
            yield pytest.param(document, line, match.group(1), id=f"{document}:{line}",
                               marks=[pytest.mark.slow] if slow else [])


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="snippets run once, on the default backend")
@pytest.mark.parametrize("document,line,code", list(_snippets()))
def test_snippet_runs(document, line, code, tmp_path):
    if "KERAS_BERT_IMPL_SHARED_DATA" in code and not os.path.isdir(SHARED_DATA):
        pytest.skip(f"the snippet reads ../shared/data, not found at {SHARED_DATA}")
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3", KERAS_BERT_IMPL_SHARED_DATA=SHARED_DATA)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{document}, line {line}:\n{result.stderr[-3000:]}"


def test_documents_have_snippets():
    assert len(list(_snippets())) >= 20
