"""Load a script of the repository (a benchmark or a recipe, not a package module) as a module, for tests.

    >>> load_script("benchmarks/padding_fraction.py").__name__
    'padding_fraction_script'
"""

import importlib.util
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def load_script(relative_path):
    """The module of `REPO / relative_path`, executed once per call, named `<stem>_script`; its folder goes on
    `sys.path`, as `python recipes/finetune_glue.py` puts it (the recipes share `recipes/command_line.py`)."""
    path = REPO / relative_path
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"{path.stem}_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
