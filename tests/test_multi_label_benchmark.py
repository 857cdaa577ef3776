"""benchmarks/multi_label_conll.py: transformers' reference trains on the very batches, from the very initial head, that
our recipe's run (`tasks.classification.table_run.run`) trains on, so the benchmark compares implementations and not
two draws of the batch order (which alone move micro F1 by several points on this task)."""

import numpy as np
import pytest

from repo_scripts import load_script


@pytest.mark.slow
def test_the_reference_starts_from_the_recipes_head_and_batches(shared_data, tmp_path, monkeypatch):
    benchmark = load_script("benchmarks/multi_label_conll.py")
    from keras_bert_impl.tasks.classification import table_run

    args = benchmark.parse_args(["--data_dir", str(shared_data / "conll2003"), "--epochs", "1"])
    rows = benchmark.entity_type_rows(str(shared_data / "conll2003" / "eng.train"), 40)
    train_file = str(tmp_path / "train.jsonl")
    benchmark.write_jsonl(train_file, rows)
    config = benchmark.recipe_config(args, train_file, train_file, str(tmp_path / "model"))
    config.batch_size = 16
    batches, kernel, bias, label_names = benchmark.recipe_batches_and_head(config)
    reference = [(f["token_ids"].numpy(), y.numpy(), w.numpy()) for f, y, w in batches.repeat(2)]

    seen = {}
    build_model = table_run.build_model

    def spied_build(config, inputs, strategy=None):  # records what `run` starts from
        classifier, tokenizer = build_model(config, inputs, strategy)
        seen["head"] = classifier.get_layer("logits").get_weights()
        make_dataset = classifier.preprocessor.make_dataset

        def spied_make_dataset(*positional, **keywords):
            dataset = make_dataset(*positional, **keywords)
            if keywords.get("shuffle"):
                seen["batches"] = [(f["token_ids"].numpy(), y.numpy(), w.numpy()) for f, y, w in dataset.repeat(2)]
            return dataset

        classifier.preprocessor.make_dataset = spied_make_dataset
        return classifier, tokenizer

    monkeypatch.setattr(table_run, "build_model", spied_build)
    table_run.run(config)

    assert label_names == benchmark.LABELS
    np.testing.assert_array_equal(seen["head"][0], kernel)
    np.testing.assert_array_equal(seen["head"][1], bias)
    assert len(seen["batches"]) == len(reference) == 2 * int(batches.cardinality())
    for ours, theirs in zip(seen["batches"], reference):  # both epochs, in order: ids, labels and filler weights
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(reference[0][1], reference[len(reference) // 2][1])  # epoch 2 is reshuffled
