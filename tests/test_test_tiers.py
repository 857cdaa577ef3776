"""The two tiers of the suite (tests/run_all_backends.py): the fast tier, which CI runs, leaves out the tests marked
`slow`; `--full` runs them too. These checks read the runner and the docs; they start no model."""

import run_all_backends
import test_docs


def _last_m(command):
    """The expression pytest uses: that of the last `-m` on its command line."""
    return command[len(command) - command[::-1].index("-m")]


def test_the_fast_tier_leaves_the_slow_tests_out_on_every_backend_and_full_runs_them():
    assert run_all_backends.marker_expression("tensorflow", full=False) == "not slow"
    assert run_all_backends.marker_expression("jax", full=False) == "multibackend and not slow"
    assert run_all_backends.marker_expression("torch", full=False) == "multibackend and not slow"
    assert run_all_backends.marker_expression("tensorflow", full=True) is None
    assert run_all_backends.marker_expression("jax", full=True) == "multibackend"


def test_the_runner_passes_the_tier_to_pytest_and_a_callers_m_replaces_it(monkeypatch, capsys):
    commands = []
    monkeypatch.setattr(run_all_backends, "BACKENDS", ["tensorflow", "jax"])
    monkeypatch.setattr(run_all_backends.subprocess, "call", lambda command, env: commands.append(command) or 0)
    assert run_all_backends.main(["-q"]) == 0
    tensorflow_parts, doctests, jax = commands[:-2], commands[-2], commands[-1]
    assert len(tensorflow_parts) == run_all_backends.TENSORFLOW_PARTS
    for command in tensorflow_parts:
        assert _last_m(command) == "not slow"
    assert _last_m(jax) == "multibackend and not slow"
    assert "--doctest-modules" in doctests
    assert "fast tier" in capsys.readouterr().out

    commands.clear()
    assert run_all_backends.main(["--full", "-q"]) == 0
    assert "--full" not in sum(commands, [])  # ours, not pytest's
    assert all("not slow" not in command for command in commands)
    assert _last_m(commands[-1]) == "multibackend"

    commands.clear()
    run_all_backends.main(["-m", "slow"])
    # pytest keeps the last -m: the caller's comes after ours
    assert all(_last_m(command) == "slow" for command in commands if "--doctest-modules" not in command)


def test_a_docs_snippet_under_the_slow_comment_is_marked_slow_and_the_others_are_not():
    snippets = list(test_docs._snippets())
    slow = [snippet.id for snippet in snippets if any(mark.name == "slow" for mark in snippet.marks)]
    assert slow, "no docs snippet carries the slow comment"
    for snippet in snippets:
        document, line = snippet.values[0], snippet.values[1]
        text = (test_docs.REPO / document).read_text(encoding="utf-8").split("\n")
        above = [previous for previous in text[: line - 2] if previous.strip()][-1]
        assert (above.strip() == test_docs.SLOW) == (snippet.id in slow), snippet.id
