"""Continued pretraining on raw strings: `BertPretrainer.from_preset(p, nsp=False).fit(texts)` (keras-hub's BertMaskedLM
habit), on every backend.

Real text: the held-out lines of the public-domain corpus bundled in the package; real weights: all-MiniLM-L6-v2;
the reference for the pieces: Hugging Face `tokenizers` with the checkpoint's own tokenizer.json.
"""

import pathlib

import keras
import numpy as np
import pytest

from keras_bert_impl import BertPretrainer
from keras_bert_impl.text.pretrainer_preprocessor import BertPretrainerPreprocessor

PRESET = "all_minilm_l6_v2_en"
VALID = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_impl" / "assets" / "corpus" / "valid.txt"
CLS, SEP, PAD, MASK = 101, 102, 0, 103


@pytest.fixture(scope="module")
def lines():
    return [line.strip() for line in VALID.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_rows_are_the_reference_pieces_cut_every_sequence_length_minus_two(lines, minilm_dir):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    reference.no_truncation()
    reference.no_padding()
    texts = [" ".join(lines[i : i + 6]) for i in range(0, 60, 6)]  # paragraphs of 6 lines: several rows each
    preprocessor = BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=32)
    rows = preprocessor.rows(texts).to_list()
    assert all(row[0] == CLS and row[-1] == SEP and len(row) <= 32 for row in rows)
    expected = []
    for text in texts:
        pieces = reference.encode(text, add_special_tokens=False).ids
        expected += [[CLS, *pieces[start : start + 30], SEP] for start in range(0, len(pieces), 30)]
    assert rows == expected and len(rows) > len(texts)
    assert preprocessor.count_examples(texts) == len(rows)


def test_masks_follow_bert_rates_and_never_touch_special_tokens(lines):
    preprocessor = BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=64)
    assert preprocessor.max_predictions_per_seq == 12  # round(64 x 0.15) = 10, up to a multiple of 4
    rows = preprocessor.rows(lines[:1200])
    originals = rows.to_tensor(PAD, shape=[None, 64]).numpy()
    x, y, weights = preprocessor.mask(rows.to_tensor(PAD, shape=[None, 64]), np.array([3, 4]))
    token_ids, positions = x["token_ids"].numpy(), x["mask_positions"].numpy()
    mask_ids, real = y["mlm"].numpy(), weights["mlm"].numpy() > 0
    eligible = int(((originals != CLS) & (originals != SEP) & (originals != PAD)).sum())
    chosen = positions[real]
    rows_of = np.nonzero(real)[0]
    assert 0.14 < len(chosen) / eligible < 0.16  # 15% of the pieces (a cap of 12 a row is rarely reached)
    assert not np.isin(originals[rows_of, chosen], [CLS, SEP, PAD]).any()
    np.testing.assert_array_equal(mask_ids[real], originals[rows_of, chosen])  # the labels are the original pieces
    now = token_ids[rows_of, chosen]
    as_mask, unchanged = (now == MASK).mean(), (now == originals[rows_of, chosen]).mean()
    assert 0.77 < as_mask < 0.83 and 0.07 < unchanged < 0.13 and 0.07 < 1 - as_mask - unchanged < 0.13
    untouched = np.ones_like(originals, bool)
    untouched[rows_of, chosen] = False
    np.testing.assert_array_equal(token_ids[untouched], originals[untouched])  # nothing else changes
    np.testing.assert_array_equal(x["segment_ids"].numpy(), 0)


def _batches(dataset):
    return [(x["token_ids"].numpy(), x["mask_positions"].numpy(), w["mlm"].numpy()) for x, _, w in dataset]


@pytest.mark.slow
def test_training_masks_change_every_epoch_and_evaluation_masks_do_not(lines):
    preprocessor = BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=64)
    train = preprocessor.make_dataset(lines[:40], batch_size=8, shuffle=True, seed=5)
    first, second = _batches(train), _batches(train)
    assert len(first) == len(second) == int(train.cardinality())
    assert any(not np.array_equal(a[1], b[1]) for a, b in zip(first, second))  # dynamic masking
    again = _batches(preprocessor.make_dataset(lines[:40], batch_size=8, shuffle=True, seed=5))
    for a, b in zip(first, again):  # the same seed: the same order and masks
        for left, right in zip(a, b):
            np.testing.assert_array_equal(left, right)
    evaluation = preprocessor.make_dataset(lines[:40], batch_size=8)
    for a, b in zip(_batches(evaluation), _batches(evaluation)):
        np.testing.assert_array_equal(a[1], b[1])


def test_batches_are_bucketed_filled_and_weighted_over_real_predictions(lines):
    preprocessor = BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=128)
    texts = lines[:11]
    batches = list(preprocessor.make_dataset(texts, batch_size=4))
    assert len(batches) == 3
    assert all(int(x["token_ids"].shape[0]) == 4 for x, _, _ in batches)
    assert all(int(x["token_ids"].shape[1]) in preprocessor.default_boundaries() for x, _, _ in batches)
    assert preprocessor.default_boundaries()[-1] == 128
    x, _, weights = batches[-1]  # 11 rows: the last batch holds 3 and one filler row
    weights = weights["mlm"].numpy()
    assert not weights[3].any() and weights[:3].any()
    for _, _, w in batches:  # the weights sum to the slots: the loss is the mean over the real predictions
        assert float(w["mlm"].numpy().sum()) == pytest.approx(4 * preprocessor.max_predictions_per_seq, rel=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"y": [1]}, "Masked-LM pretraining makes its own labels (the masked pieces): pass the texts alone."),
        ({"x": []}, "No examples: the list of texts is empty."),
        ({"x": ["   "]}, "No examples: every text is empty (no WordPiece pieces)."),
        ({"batch_size": 0}, "`batch_size` must be a positive int, got 0."),
    ],
)
def test_bad_input_is_one_line(kwargs, message):
    preprocessor = BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=32)
    arguments = {"x": ["A line of text."], **kwargs}
    with pytest.raises(ValueError) as error:
        preprocessor.make_dataset(**arguments)
    assert str(error.value) == message


@pytest.mark.slow
@pytest.mark.multibackend
def test_fit_on_raw_text_lowers_the_held_out_masked_lm_loss_and_round_trips(lines, tmp_path):
    keras.utils.set_random_seed(0)
    model = BertPretrainer.from_preset(PRESET, nsp=False, sequence_length=64)
    assert isinstance(model.preprocessor, BertPretrainerPreprocessor)
    held_out = lines[1000:1064]
    before = model.evaluate(held_out, batch_size=16, verbose=0, return_dict=True)
    assert before == model.evaluate(held_out, batch_size=16, verbose=0, return_dict=True)  # the same masks
    history = model.fit(lines[:192], batch_size=16, epochs=2, seed=0, verbose=0).history
    after = model.evaluate(held_out, batch_size=16, verbose=0, return_dict=True)
    assert len(history["loss"]) == 2 and history["loss"][1] < history["loss"][0]
    assert after["mlm_loss"] < before["mlm_loss"] - 1.0, (before, after)
    path = tmp_path / "mlm.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.preprocessor.get_config() == model.preprocessor.get_config()
    reloaded = restored.evaluate(held_out, batch_size=16, verbose=0, return_dict=True)
    assert reloaded["mlm_loss"] == pytest.approx(after["mlm_loss"], rel=1e-4)


@pytest.mark.multibackend
def test_next_sentence_prediction_on_raw_strings_names_the_two_ways():
    model = BertPretrainer.from_preset(PRESET, sequence_length=32)
    with pytest.raises(ValueError) as error:
        model.fit(["One text.", "Another text."], verbose=0)
    assert str(error.value).startswith(
        "BertPretrainer(nsp=True) trains next-sentence prediction, which needs sentence pairs cut from documents, "
        "not a list of texts: build it with BertPretrainer.from_preset(preset, nsp=False)")


_LOAD_AND_PREDICT = """
import json, sys, keras, numpy as np
import keras_bert_impl  # no other import: the package registers the preprocessor's class for Keras
model = keras.saving.load_model(sys.argv[1])
inputs = {k: np.asarray(v, "int32") for k, v in json.loads(sys.argv[2]).items()}
print(json.dumps([type(model.preprocessor).__name__, model.preprocessor.get_config()["sequence_length"],
                  np.asarray(model.predict(inputs, verbose=0)["mlm"], "float64").tolist()]))
"""


@pytest.mark.slow
def test_an_uncompiled_pretrainer_saves_and_loads_in_a_fresh_process(lines, tmp_path):
    """`BertPretrainer.from_preset(...)` straight away (not compiled): `save` used to raise AttributeError
    ('optimizer'), and `load_model` after `import keras_bert_impl` could not find `BertPretrainerPreprocessor`."""
    import json
    import subprocess
    import sys

    model = BertPretrainer.from_preset(PRESET, nsp=False, sequence_length=32)
    path = str(tmp_path / "mlm.keras")
    model.save(path)
    ids = model.preprocessor.rows(lines[:2]).to_list()
    length = max(len(r) for r in ids)
    inputs = {"token_ids": [r + [PAD] * (length - len(r)) for r in ids],
              "segment_ids": [[0] * length for _ in ids],
              "padding_mask": [[1] * len(r) + [0] * (length - len(r)) for r in ids],
              "mask_positions": [[1, 2, 3] for _ in ids]}
    result = subprocess.run([sys.executable, "-c", _LOAD_AND_PREDICT, path, json.dumps(inputs)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    name, sequence_length, logits = json.loads(result.stdout.strip().splitlines()[-1])
    assert (name, sequence_length) == ("BertPretrainerPreprocessor", 32)
    expected = model.predict({k: np.asarray(v, "int32") for k, v in inputs.items()}, verbose=0)["mlm"]
    np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.multibackend
def test_validation_data_is_held_out_texts_alone(lines):
    # Before: validation_data=texts was refused with "add their labels" (which fit refuses), and (texts,) stopped on
    # Keras's "Unrecognized data type".
    backbone = _tiny_backbone()
    model = BertPretrainer(backbone, nsp=False, preprocessor=BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=16))
    for validation_data in (lines[8:12], (lines[8:12],), np.array(lines[8:12])):
        history = model.fit(lines[:8], validation_data=validation_data, batch_size=4, verbose=0).history
        assert sorted(history) == ["loss", "mlm_accuracy", "mlm_loss", "val_loss", "val_mlm_accuracy", "val_mlm_loss"]
    with pytest.raises(ValueError) as error:
        model.fit(lines[:8], validation_data=(lines[8:12], [0, 1, 0, 1]), verbose=0)
    assert str(error.value) == ("`validation_data`: Masked-LM pretraining makes its own labels (the masked pieces): "
                                "pass the texts alone.")


def test_masked_lm_alone_trains_without_gradient_warnings_and_leaves_the_pooler_to_a_classifier(lines):
    """`BertPretrainer(nsp=False)` never reads the pooler: it is frozen (before, every `fit` warned "Gradients do not
    exist for variables ['pooled_dense/kernel', 'pooled_dense/bias'] ... did you forget to provide a `loss`?"). A
    classifier then built on that backbone reads the pooler, and trains it again; a backbone the user froze stays
    frozen."""
    import warnings

    from keras_bert_impl import BertClassifier

    backbone = _tiny_backbone()
    model = BertPretrainer(backbone, nsp=False, preprocessor=BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=16))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(lines[:8], batch_size=4, verbose=0)
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)], [str(w.message) for w in caught]
    assert backbone.pooled_dense.trainable is False
    assert BertPretrainer(backbone, nsp=True).backbone.pooled_dense.trainable is True  # next-sentence reads it
    BertPretrainer(backbone, nsp=False)
    classifier = BertClassifier(backbone, num_classes=2)
    assert classifier.backbone.pooled_dense.trainable is True
    assert len(classifier.trainable_weights) == len(backbone.weights) + 2  # every backbone weight, and the head's
    frozen = _tiny_backbone()
    frozen.trainable = False  # a linear probe
    assert BertClassifier(frozen, num_classes=2).backbone.pooled_dense.trainable is False


def _tiny_backbone():
    from keras_bert_impl import BertBackbone

    return BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                        max_sequence_length=64)
