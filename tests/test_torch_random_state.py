"""PyTorch's global generators in checkpoints (`training/torch_random_state.py`): what unseeded dropout draws from."""

import json

import pytest

torch = pytest.importorskip("torch")

from keras_bert_impl.training.torch_random_state import (  # noqa: E402
    KEY,
    checkpoint_entry,
    draw_own_stream,
    restore_from_checkpoint_entry,
)


def test_a_checkpoint_entry_survives_json_and_replays_the_stream():
    torch.manual_seed(3)
    torch.rand(5)
    entry = json.loads(json.dumps(checkpoint_entry(backend="torch")))
    assert list(entry) == [KEY] and len(entry[KEY]) == 1  # one process
    expected = torch.rand(4)
    torch.manual_seed(99)
    assert restore_from_checkpoint_entry(entry, backend="torch")
    assert torch.equal(torch.rand(4), expected)


def test_an_older_fine_tuning_checkpoint_with_a_list_of_ints_is_still_read():
    torch.manual_seed(4)
    legacy = {"torch_rng_state": torch.get_rng_state().tolist()}
    expected = torch.rand(3)
    torch.manual_seed(5)
    assert restore_from_checkpoint_entry(legacy, backend="torch")
    assert torch.equal(torch.rand(3), expected)


def test_nothing_to_restore_on_other_backends_or_without_states():
    assert checkpoint_entry(backend="jax") == {}
    assert not restore_from_checkpoint_entry({KEY: [{"cpu": "AAAA"}]}, backend="tensorflow")
    assert not restore_from_checkpoint_entry({"step": 3}, backend="torch")


def test_a_checkpoint_of_two_processes_read_by_one_takes_process_zeros_stream():
    torch.manual_seed(6)
    zero = checkpoint_entry(backend="torch")[KEY][0]
    expected = torch.rand(3)
    torch.manual_seed(7)
    other = checkpoint_entry(backend="torch")[KEY][0]
    assert restore_from_checkpoint_entry({KEY: [zero, other]}, backend="torch")  # this (one) process is process 0
    assert torch.equal(torch.rand(3), expected)


def test_each_process_index_draws_its_own_stream_and_process_zero_keeps_its_own():
    draws = []
    for index in range(3):
        torch.manual_seed(1)
        draw_own_stream(index)
        draws.append(torch.rand(8))
    torch.manual_seed(1)
    assert torch.equal(draws[0], torch.rand(8))
    assert not torch.equal(draws[1], draws[0]) and not torch.equal(draws[2], draws[1])
    torch.manual_seed(1)
    draw_own_stream(2)
    assert torch.equal(torch.rand(8), draws[2])  # reproducible: the same seed and index, the same stream
