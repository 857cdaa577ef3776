"""Every dotted `keras_bert_impl.…` name written in the docs, docstrings and recipes exists.

Issue 14 found docstrings naming modules and functions that did not exist
(`keras_bert_impl.data.classifier_preprocessor`,
`keras_bert_impl.training.split_features_labels`). This test reads every such
name in README.md, docs/*.md, the package's modules and recipes/, and imports
it: a module, or a module's attribute (a class's attribute too).
"""

import importlib
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]
# A dotted name starting at the package, not part of a path or a longer name.
_NAME = re.compile(r"(?<![\w/.])(keras_bert_impl(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def _sources():
    yield REPO / "README.md"
    yield from sorted((REPO / "docs").glob("*.md"))
    yield from sorted((REPO / "keras_bert_impl").rglob("*.py"))
    yield from sorted((REPO / "recipes").glob("*.py"))


def _names():
    found = {}
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        for match in _NAME.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.setdefault(match.group(1), f"{path.relative_to(REPO)}:{line}")
    return found


def _resolves(name):
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and module_name.startswith(error.name) and error.name.startswith("keras_bert_impl"):
                continue  # not a module: try one level up, the rest are attributes
            raise
        for attribute in parts[split:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def test_the_sources_name_the_package():
    assert len(_names()) >= 50


def test_every_dotted_name_exists():
    missing = [f"{where}: {name}" for name, where in sorted(_names().items()) if not _resolves(name)]
    assert not missing, "names of no module or attribute of the package:\n" + "\n".join(missing)


def test_the_architecture_page_names_every_module():
    """docs/architecture.md is the newcomer's map: a module it does not name is a room nobody was shown."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    package = REPO / "keras_bert_impl"
    unnamed = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "__init__.py" and not re.search(rf"(?<![\w]){re.escape(path.name)}(?![\w])", page)
    )
    assert not unnamed, "docs/architecture.md does not name these modules (add a line each to 'What each folder holds'):\n" + "\n".join(unnamed)
