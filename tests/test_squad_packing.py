"""SQuAD fine-tuning on packed rows (issue 18, packing): several training windows a row, each window's loss
exactly its loss alone in a row, on real dev windows with the real MiniLM backbone, on every backend."""

import numpy as np
import pytest

from keras_bert_impl.models.span_extractor import SpanLoss
from keras_bert_impl.tasks import span_qa as squad
from keras_bert_impl.tasks.span_qa.batches import packed_training_rows

pytestmark = pytest.mark.multibackend


@pytest.fixture(scope="module")
def features(shared_data):
    from keras_bert_impl.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer.from_preset("all_minilm_l6_v2_en")
    dataset = squad.load_squad_json(shared_data / "squad" / "dev-v1.1.json.gz")
    examples, _ = squad.read_squad_examples(dataset, is_training=True, source="dev")
    # The first question of 14 paragraphs: contexts of different lengths, several windows a row once packed.
    chosen = list({e.context: e for e in reversed(examples)}.values())[::-1][:14]
    return squad.encode_examples(chosen, tokenizer, is_training=True, sequence_length=384, doc_stride=128)


@pytest.fixture(scope="module")
def extractor():
    import keras

    from keras_bert_impl import BertBackbone, BertSpanExtractor

    keras.utils.set_random_seed(0)
    return BertSpanExtractor(BertBackbone.from_preset("all_minilm_l6_v2_en"))


def test_packed_rows_hold_every_window_with_its_answer_in_row_positions(features):
    inputs, labels, examples_per_row = packed_training_rows(features, seed=0)
    assert examples_per_row >= 2 and len(inputs["token_ids"]) < len(features)
    found = 0
    for r in range(len(inputs["token_ids"])):
        ids = inputs["padding_mask"][r]
        for k in range(examples_per_row):
            start, end = labels["start_logits"][r, k], labels["end_logits"][r, k]
            if k + 1 > ids.max():
                assert start == end == -1  # no such window in this row
                continue
            found += 1
            own = np.flatnonzero(ids == k + 1)
            assert own[0] <= start <= end <= own[-1]
    assert found == len(features)
    # The answer's tokens in the row are the window's answer tokens.
    answered = [i for i in range(len(features)) if features.start_positions[i] > 0]
    assert answered


@pytest.mark.slow
def test_the_packed_loss_is_the_unpacked_loss(extractor, features):
    import keras

    inputs, labels, examples_per_row = packed_training_rows(features, seed=0)
    packed_model = extractor.packed_training_model(examples_per_row)
    out = packed_model(inputs, training=False)
    unpacked = extractor(features.inputs(), training=False)
    loss = SpanLoss()
    for name, positions in (("start_logits", features.start_positions), ("end_logits", features.end_positions)):
        packed_loss = float(keras.ops.convert_to_numpy(loss(labels[name], out[name])))
        unpacked_loss = float(keras.ops.convert_to_numpy(loss(positions, unpacked[name])))
        assert packed_loss == pytest.approx(unpacked_loss, abs=1e-5)
        assert unpacked_loss > 0.1  # an untrained head: a real loss, not a degenerate zero
    # Each window's slice equals its unpacked logits on its own tokens.
    lengths = features.lengths
    packed_start = keras.ops.convert_to_numpy(out["start_logits"])
    unpacked_start = keras.ops.convert_to_numpy(unpacked["start_logits"])
    window = 0
    for r in range(len(inputs["token_ids"])):
        offset = 0
        for k in range(int(inputs["padding_mask"][r].max())):
            n = int(np.sum(inputs["padding_mask"][r] == k + 1))
            matches = [i for i in range(len(features)) if lengths[i] == n
                       and np.array_equal(features.token_ids[i, :n], inputs["token_ids"][r, offset : offset + n])]
            assert matches
            np.testing.assert_allclose(packed_start[r, k, offset : offset + n], unpacked_start[matches[0], :n],
                                       rtol=0, atol=1e-5)
            offset += n
            window += 1
    assert window == len(features)


def test_packed_training_model_refuses_attention_on_lengths():
    from keras_bert_impl import BertBackbone, BertSpanExtractor

    backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=32, attention_padding="lengths")
    with pytest.raises(ValueError) as error:
        BertSpanExtractor(backbone).packed_training_model(2)
    assert str(error.value) == (
        "packed_training_model() needs a backbone with attention_padding='mask': packed rows keep their examples "
        "apart with the block-diagonal mask, and this backbone has attention_padding='lengths' (one length per "
        "row, for unpacked rows).")


def test_bad_packing_arguments_are_one_clear_line(features):
    from keras_bert_impl.layers import PerExampleLogits
    from keras_bert_impl.tasks.span_qa.batches import make_packed_dataset

    for bad in (0, 1.5, True):
        with pytest.raises(ValueError) as error:
            PerExampleLogits(bad)
        assert str(error.value) == f"`examples_per_row` must be a positive int, got {bad!r}."
    import dataclasses

    empty = dataclasses.replace(features, examples=[], **{
        field.name: getattr(features, field.name)[:0]
        for field in dataclasses.fields(features) if isinstance(getattr(features, field.name), np.ndarray)})
    with pytest.raises(ValueError) as error:
        make_packed_dataset(empty, batch_size=8)
    assert str(error.value) == "no training windows to pack"
