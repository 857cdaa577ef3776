"""BertBackbone on the real all-MiniLM-L6-v2 weights equals transformers and keras-hub; round trips keep outputs.

Runs on every backend. The batch is real GLUE text (SST-2 sentences and MRPC
pairs), padded; only real positions of sequence_output are compared.
"""

import numpy as np
import pytest

from keras_bert_impl import BertBackbone
from keras_bert_impl.checkpoints import save_huggingface
from minilm_reference import max_diffs, numpy_outputs, real_batch, transformers_outputs

pytestmark = pytest.mark.multibackend

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def batch(shared_data, minilm_dir):
    return real_batch(shared_data, minilm_dir)


@pytest.fixture(scope="module")
def reference(minilm_dir, batch):
    return transformers_outputs(minilm_dir, batch)


@pytest.fixture(scope="module")
def backbone():
    return BertBackbone.from_preset("all_minilm_l6_v2_en")


@pytest.fixture(scope="module")
def outputs(backbone, batch):
    return numpy_outputs(backbone, batch)


def test_minilm_preset_equals_transformers(backbone, outputs, reference, batch):
    assert backbone.activation == "gelu" and backbone.num_layers == 6 and backbone.hidden_dim == 384
    sequence, pooled = max_diffs(outputs, reference, batch["padding_mask"])
    print(f"max|diff| vs transformers: sequence_output {sequence:.3g}, pooled_output {pooled:.3g}")
    assert sequence <= TOLERANCE and pooled <= TOLERANCE


def test_load_report_lists_skipped_position_ids(backbone):
    report = backbone.load_report
    assert "embeddings.position_ids" in report.skipped
    assert "non-weight buffer" in report.skipped["embeddings.position_ids"]
    assert len(report.loaded) == 103  # every weight tensor of the checkpoint
    assert "Skipped 1 tensors" in str(report)


@pytest.fixture(scope="module")
def keras_hub_backbone(minilm_dir):
    import keras_hub

    return keras_hub.models.BertBackbone.from_preset(str(minilm_dir))


@pytest.fixture(scope="module")
def keras_hub_outputs(keras_hub_backbone, batch):
    return numpy_outputs(keras_hub_backbone, batch)


def test_equals_keras_hub_on_same_weights(minilm_dir, batch, keras_hub_outputs):
    # keras-hub's BERT encoder uses the tanh GELU; compare with the same variant.
    ours = BertBackbone.from_preset(str(minilm_dir), activation="gelu_approximate")
    sequence, pooled = max_diffs(numpy_outputs(ours, batch), keras_hub_outputs, batch["padding_mask"])
    print(f"max|diff| vs keras-hub: sequence_output {sequence:.3g}, pooled_output {pooled:.3g}")
    assert sequence <= TOLERANCE and pooled <= TOLERANCE


def test_keras_hub_preset_directory_loads(minilm_dir, batch, tmp_path, keras_hub_backbone, keras_hub_outputs):
    import keras_hub

    preset = tmp_path / "keras_hub_preset"
    keras_hub_backbone.save_to_preset(str(preset))
    keras_hub.models.BertTokenizer(vocabulary=str(minilm_dir / "vocab.txt"), lowercase=True).save_to_preset(str(preset))
    ours = BertBackbone.from_preset(str(preset))
    assert ours.activation == "gelu_approximate"
    sequence, pooled = max_diffs(numpy_outputs(ours, batch), keras_hub_outputs, batch["padding_mask"])
    assert sequence <= TOLERANCE and pooled <= TOLERANCE

    from keras_bert_impl.checkpoints import resolve_tokenizer_assets

    assets = resolve_tokenizer_assets(str(preset))
    assert assets["lowercase"] is True
    assert open(assets["vocabulary"]).read() == (minilm_dir / "vocab.txt").read_text()


def test_keras_file_round_trip(backbone, outputs, batch, tmp_path):
    import keras

    path = tmp_path / "minilm.keras"
    backbone.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertBackbone)
    np.testing.assert_array_equal(numpy_outputs(restored, batch)[1], outputs[1])
    np.testing.assert_array_equal(numpy_outputs(restored, batch)[0], outputs[0])


def test_preset_round_trip(backbone, outputs, batch, minilm_dir, tmp_path):
    preset = tmp_path / "own_preset"
    backbone.save_to_preset(preset, vocabulary=str(minilm_dir / "vocab.txt"), lowercase=True)
    restored = BertBackbone.from_preset(str(preset))
    assert restored.architecture_config() == backbone.architecture_config()
    restored_outputs = numpy_outputs(restored, batch)
    np.testing.assert_array_equal(restored_outputs[0], outputs[0])
    np.testing.assert_array_equal(restored_outputs[1], outputs[1])


def test_save_huggingface_loads_in_transformers(backbone, outputs, batch, minilm_dir, tmp_path):
    export = tmp_path / "hf_export"
    save_huggingface(backbone, export, vocabulary=str(minilm_dir / "vocab.txt"))
    exported = transformers_outputs(export, batch)
    sequence, pooled = max_diffs(exported, outputs, batch["padding_mask"])
    print(f"max|diff| transformers(export) vs ours: sequence_output {sequence:.3g}, pooled_output {pooled:.3g}")
    assert sequence <= TOLERANCE and pooled <= TOLERANCE
    # And it reads back into BertBackbone bit for bit.
    again = BertBackbone.from_preset(str(export))
    np.testing.assert_array_equal(numpy_outputs(again, batch)[1], outputs[1])
