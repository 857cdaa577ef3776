"""The import rules of the package, checked on the source (docs/architecture.md).

Every module of `keras_bert_impl` is parsed with `ast` and ALL its imports are
read, including the ones inside functions (a lazy import is still an import).
The test fails on:

- a cycle between modules;
- an import from a lower room to a higher one (`LAYER_ORDER`);
- a TensorFlow import (`tensorflow`, `tensorflow_text`) in `layers/` or `models/`,
  or in the NumPy pretraining pipeline (`NO_TENSORFLOW_MODULES`, for GPU hosts
  without TensorFlow);
- and, in a subprocess with TensorFlow made unimportable, on any of those
  modules that does not import under `KERAS_BACKEND=jax`.
"""

import ast
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.multibackend  # reads the source; the subprocess picks its own backend

PACKAGE = "keras_bert_impl"
ROOT = pathlib.Path(__file__).resolve().parent.parent / PACKAGE

# Lower rooms first; a module may import its own room and the rooms before it, never a later one.
LAYER_ORDER = (
    ("layers", "metrics", "batching", "optimizers", "file_errors", "file_patterns", "hugging_face_names", "raw_text",
     "table_columns", "tensorflow_devices"),  # the bottom: nothing else from the package
    ("presets", "version", "checkpoints"),
    ("text",),
    ("models",),
    ("data",),
    ("training",),
    ("tasks",),
)
# The package's own __init__ (the public facade, `from keras_bert_impl import BertBackbone`) sits on top.
FACADE = PACKAGE
NO_TENSORFLOW_ROOMS = ("layers", "models")
NO_TENSORFLOW_MODULES = ("keras_bert_impl.data.array_masking", "keras_bert_impl.data.array_pretraining",
                         "keras_bert_impl.data.array_sentence_pairs", "keras_bert_impl.data.pipeline_arguments")
TENSORFLOW_MODULES = ("tensorflow", "tensorflow_text")


def _module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _imports(name, path):
    """(imported dotted name, line) for every import in the module, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                found.append((submodule if submodule in MODULES else module, node.lineno))
    return found


def _graph():
    graph = {}
    for name, path in MODULES.items():
        edges = {}
        for target, line in _imports(name, path):
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                while target not in MODULES:  # `import keras_bert_impl.x.y` of a name: its module
                    target = target.rsplit(".", 1)[0]
                if target != name:
                    edges.setdefault(target, line)
        graph[name] = edges
    return graph


def _room(module):
    if module == FACADE:
        return None
    top = module.split(".")[1]
    for rank, rooms in enumerate(LAYER_ORDER):
        if top in rooms:
            return rank, top
    raise AssertionError(f"{module}: its folder {top!r} is in no room of LAYER_ORDER; add it there.")


def test_every_module_is_in_a_room():
    for module in MODULES:
        _room(module)


def test_no_import_cycles():
    graph = _graph()
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in graph[node]:
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_upward_imports():
    upward = []
    for module, edges in _graph().items():
        room = _room(module)
        if room is None:
            continue
        for target, line in edges.items():
            target_room = _room(target)
            if target_room is None or target_room[0] > room[0]:
                upward.append(f"{MODULES[module].relative_to(ROOT.parent)}:{line}: {module} ({room[1]}) imports "
                              f"{target} ({'the package facade' if target_room is None else target_room[1]})")
    assert not upward, "imports from a lower room to a higher one (see LAYER_ORDER):\n" + "\n".join(upward)


def _without_tensorflow(module):
    room = _room(module)
    return module in NO_TENSORFLOW_MODULES or (room is not None and room[1] in NO_TENSORFLOW_ROOMS)


def test_the_modules_without_tensorflow_exist():
    assert set(NO_TENSORFLOW_MODULES) <= set(MODULES), sorted(set(NO_TENSORFLOW_MODULES) - set(MODULES))


def test_no_tensorflow_in_layers_models_and_the_numpy_pipeline():
    found = []
    for module, path in MODULES.items():
        if not _without_tensorflow(module):
            continue
        for target, line in _imports(module, path):
            if target.split(".")[0] in TENSORFLOW_MODULES:
                found.append(f"{path.relative_to(ROOT.parent)}:{line}: imports {target}")
    assert not found, "layers/, models/ and the NumPy pretraining pipeline must not import TensorFlow:\n" + "\n".join(found)


_IMPORT_WITHOUT_TENSORFLOW = """
import importlib, sys
sys.modules["tensorflow"] = None
sys.modules["tensorflow_text"] = None
failed = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as error:
        failed.append(f"{name}: {type(error).__name__}: {error}")
import keras
assert keras.backend.backend() == "jax", keras.backend.backend()
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_layers_and_models_import_without_tensorflow():
    pytest.importorskip("jax")
    names = sorted(m for m in MODULES if _without_tensorflow(m))
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _IMPORT_WITHOUT_TENSORFLOW, *names], env=env,
                          capture_output=True, text=True, timeout=300, cwd=ROOT.parent)
    assert proc.returncode == 0, f"modules that need TensorFlow to import:\n{proc.stdout}\n{proc.stderr[-3000:]}"


def test_every_serialisable_class_outside_the_models_is_known_to_the_package_on_import():
    """`keras.saving.load_model` after `import keras_bert_impl` finds every class a `.keras` file may name.

    Classes in `layers/`, `models/` and `optimizers/` are imported by the package itself (checked here: the
    registered class is the real one); the ones in the TensorFlow rooms (preprocessors, tokenizer) and the
    schedule are registered by name on import (`_PREPROCESSING`, `_TRAINING_OBJECTS`) and imported on first use. A class missing there (`BertPretrainerPreprocessor` was)
    saves, but does not load in a fresh process.
    """
    import keras

    import keras_bert_impl

    known = {**keras_bert_impl._PREPROCESSING, **keras_bert_impl._TRAINING_OBJECTS}  # noqa: SLF001
    missing = []
    for name, path in MODULES.items():
        imported_with_the_package = name.split(".")[1:2] in (["layers"], ["models"], ["optimizers"])
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    "register_keras_serializable" in ast.unparse(d) for d in node.decorator_list):
                registered = keras.saving.get_registered_object(f"keras_bert_impl>{node.name}")
                if imported_with_the_package:
                    if getattr(registered, "__module__", None) != name:
                        missing.append(f"{name}.{node.name} (not imported by `import keras_bert_impl`)")
                elif known.get(node.name) != name:
                    missing.append(f"{name}.{node.name}")
    assert not missing, f"add to keras_bert_impl/__init__.py's _PREPROCESSING or _TRAINING_OBJECTS: {missing}"


# The house's top level (README "The house"): anything else committed at the root is a stray file.
TOP_LEVEL = {".ci", ".gitignore", "README.md", "benchmarks", "docs", "keras_bert_impl", "pyproject.toml", "recipes", "tests"}


def test_the_repository_root_holds_only_the_house():
    repo = ROOT.parent
    listed = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    top = {path.split("/", 1)[0] for path in listed.stdout.splitlines()}
    strays = sorted(top - TOP_LEVEL)
    assert not strays, f"committed at the repository root but not part of the house: {strays} (git rm them, or add them to TOP_LEVEL and the README)"


MAX_MODULE_LINES = 600  # one concept per file: a module that grows past this holds two (docs/architecture.md)


def test_no_module_outgrows_one_concept():
    """Every module of the package and of recipes/ is at most `MAX_MODULE_LINES` lines; split a longer one by
    concept (as `models/task.py` became `task.py`, `raw_text_inputs.py` and `task_saving.py`)."""
    recipes = ROOT.parent / "recipes"
    sizes = {str(path.relative_to(ROOT.parent)): len(path.read_text(encoding="utf-8").splitlines())
             for path in [*ROOT.rglob("*.py"), *recipes.rglob("*.py")]}
    too_long = {path: lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split each by concept): {too_long}"
