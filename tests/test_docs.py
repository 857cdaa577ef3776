"""Every Python snippet in docs/quickstart.md and the README's "Use it" section runs as written.

Each fenced ```python block runs in a fresh interpreter (TensorFlow backend),
from an empty working directory, as a user would paste it.
"""

import os
import pathlib
import re
import subprocess
import sys

import keras
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = ["docs/quickstart.md", "README.md"]
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _snippets():
    for document in DOCUMENTS:
        text = (REPO / document).read_text(encoding="utf-8")
        for index, match in enumerate(_BLOCK.finditer(text)):
            line = text[: match.start()].count("\n") + 2
            yield pytest.param(document, line, match.group(1), id=f"{document}:{line}")


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="snippets run once, on the default backend")
@pytest.mark.parametrize("document,line,code", list(_snippets()))
def test_snippet_runs(document, line, code, tmp_path):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{document}, line {line}:\n{result.stderr[-3000:]}"


def test_documents_have_snippets():
    assert len(list(_snippets())) >= 6
