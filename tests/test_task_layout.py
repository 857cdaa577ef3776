"""The house of `keras_bert_impl/tasks/`: each task has its code in one place, in the same steps under the same names.

Read from the source (no TensorFlow, no model): every task folder has the same step modules; every fine-tuning story
(`run.py`, and classification's `table_run.py` for your own tables) has the same public steps, called in the same
order by its `run`; every step has one function of the same name in every task (`read_examples`, `encode_examples`,
`make_dataset`, `evaluate`, `write_outputs`, `predict`), and step 3 the same three functions with the same arguments.
"""

import ast
import pathlib

import pytest

TASKS = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_impl" / "tasks"
TASK_NAMES = ("classification", "span_qa", "tagging")
STEP_MODULES = ("reading", "features", "batches", "evaluation", "outputs", "prediction", "run")
STORIES = [f"{task}/run.py" for task in TASK_NAMES] + ["classification/table_run.py"]
# What every story defines, in the order its `run` first calls them.
STORY_STEPS = ("check_flags", "read_inputs", "build_model", "finetune")


def _tree(relative):
    return ast.parse((TASKS / relative).read_text(encoding="utf-8"))


def _top_level(tree):
    return {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


@pytest.mark.parametrize("task", TASK_NAMES)
def test_every_task_has_the_same_step_modules(task):
    modules = {path.stem for path in (TASKS / task).glob("*.py")} - {"__init__"}
    missing = set(STEP_MODULES) - modules
    assert not missing, f"tasks/{task} lacks the step module(s) {sorted(missing)}"


# Each step's one name in every task (the module it lives in, the name): the task's own names are the same functions.
STEP_NAMES = (("reading", "read_examples"), ("features", "encode_examples"), ("batches", "make_dataset"),
              ("evaluation", "evaluate"), ("outputs", "write_outputs"), ("prediction", "predict"))


def _defines(tree, name):
    """True where the module defines `name` at its top level, by `def` or by `name = other_function`."""
    if name in _top_level(tree):
        return True
    return any(isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
               for node in tree.body)


@pytest.mark.parametrize("task", TASK_NAMES)
@pytest.mark.parametrize("module, name", STEP_NAMES)
def test_every_step_has_the_same_name_in_every_task(task, module, name):
    assert _defines(_tree(f"{task}/{module}.py"), name), f"tasks/{task}/{module}.py defines no {name}"
    exported = _tree(f"{task}/__init__.py")
    imported = {alias.name for node in exported.body if isinstance(node, ast.ImportFrom)
                and node.module == f"keras_bert_impl.tasks.{task}.{module}" for alias in node.names}
    assert name in imported, f"keras_bert_impl.tasks.{task} does not re-export {module}.{name}"


@pytest.mark.parametrize("task", TASK_NAMES)
def test_step_two_is_encode_examples_in_every_task(task):
    functions = _top_level(_tree(f"{task}/features.py"))
    assert "encode_examples" in functions, f"tasks/{task}/features.py has no encode_examples"
    arguments = [a.arg for a in functions["encode_examples"].args.args]
    assert len(arguments) >= 2, (task, arguments)  # (the examples, the tokenizer or preprocessor, ...)


@pytest.mark.parametrize("task", TASK_NAMES)
def test_step_three_has_the_same_functions_in_every_task(task):
    functions = _top_level(_tree(f"{task}/batches.py"))
    for name in ("make_dataset", "make_packed_dataset", "make_array_batches"):
        assert name in functions, f"tasks/{task}/batches.py has no {name}"
        arguments = [a.arg for a in functions[name].args.args + functions[name].args.kwonlyargs]
        assert {"batch_size", "training", "seed", "fixed_batch_size"} <= set(arguments), (task, name, arguments)


@pytest.mark.parametrize("story", STORIES)
def test_every_story_has_the_same_steps(story):
    top = _top_level(_tree(story))
    configs = [name for name, node in top.items() if isinstance(node, ast.ClassDef) and name.endswith("Config")]
    inputs = [name for name, node in top.items() if isinstance(node, ast.ClassDef) and name.endswith("Inputs")]
    assert len(configs) == 1, f"{story}: one `...Config` dataclass, found {configs}"
    assert len(inputs) == 1, f"{story}: one `...Inputs` (what read_inputs returns), found {inputs}"
    assert [base.id for base in top[inputs[0]].bases] == ["NamedTuple"], f"{story}: {inputs[0]} is a NamedTuple"
    for name in ("check_flags", "read_inputs", "build_model", "run"):
        assert name in top and isinstance(top[name], ast.FunctionDef), f"{story} defines no function {name}"
        assert ast.get_docstring(top[name]), f"{story}: {name} has no docstring"
    argument_names = {name: [a.arg for a in top[name].args.args] for name in ("check_flags", "read_inputs",
                                                                              "build_model", "run")}
    assert argument_names["check_flags"] == ["config"], (story, argument_names)
    assert argument_names["read_inputs"][0] == "config", (story, argument_names)
    assert argument_names["build_model"][:3] == ["config", "inputs", "strategy"], (story, argument_names)
    assert argument_names["run"][0] == "config", (story, argument_names)


@pytest.mark.parametrize("story", STORIES)
def test_every_run_calls_the_steps_in_the_same_order(story):
    run = _top_level(_tree(story))["run"]
    first_call = {}
    for node in ast.walk(run):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in STORY_STEPS:
            first_call[node.func.id] = min(first_call.get(node.func.id, node.lineno), node.lineno)
    assert set(first_call) == set(STORY_STEPS), f"{story}: run calls {sorted(first_call)}, expected {STORY_STEPS}"
    order = sorted(first_call, key=first_call.get)
    assert order == list(STORY_STEPS), f"{story}: run calls the steps in the order {order}"


def test_the_inputs_of_read_inputs_are_what_build_model_takes():
    """`build_model(config, read_inputs(config), strategy)` in every story: its `inputs` fields are read by name."""
    for story in STORIES:
        top = _top_level(_tree(story))
        inputs_class = next(node for name, node in top.items() if isinstance(node, ast.ClassDef)
                            and name.endswith("Inputs"))
        fields = {node.target.id for node in inputs_class.body if isinstance(node, ast.AnnAssign)}
        used = {node.attr for node in ast.walk(top["build_model"])
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "inputs"}
        assert used <= fields, f"{story}: build_model reads inputs.{sorted(used - fields)}, not fields of {fields}"
