"""LoRA on every backend: `backbone.enable_lora(rank)` -> `fit` on raw strings -> the `.lora.h5` file or a plain model.

Real data: SST-2 rows from ../shared/data (skip without it), the real all-MiniLM-L6-v2 checkpoint.
"""

import csv

import keras
import numpy as np
import pytest

from keras_bert_impl import BertBackbone, BertClassifier, BertPretrainer
from keras_bert_impl.checkpoints.huggingface import save_huggingface
from keras_bert_impl.models.lora import lora_rank
from interruptions import StopAfterEpoch

pytestmark = pytest.mark.multibackend
PRESET = "all_minilm_l6_v2_en"


def _sst2(shared_data, count):
    with open(shared_data / "glue" / "SST-2" / "train.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1 : 1 + count]
    return [row[0] for row in rows], np.array([int(row[1]) for row in rows])


def _values(variables):
    return {v.path: np.array(keras.ops.convert_to_numpy(v)) for v in variables}


@pytest.fixture(scope="module")
def tuned(shared_data):
    """A classifier after one epoch of LoRA (rank 4) on 32 SST-2 rows, and the rows; the tests only read it."""
    texts, labels = _sst2(shared_data, 32)
    classifier = BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=64)
    classifier.backbone.enable_lora(4)
    classifier.fit(texts, labels, batch_size=8, epochs=1, seed=0, verbose=0)
    return classifier, texts


@pytest.mark.slow
def test_enable_lora_trains_only_the_factors_and_the_head(shared_data):
    texts, labels = _sst2(shared_data, 32)
    classifier = BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=64)
    before = classifier.predict(texts, verbose=0)
    base = _values(classifier.backbone.weights)
    head = _values(classifier.get_layer("logits").weights)

    classifier.backbone.enable_lora(4)

    np.testing.assert_allclose(classifier.predict(texts, verbose=0), before, atol=1e-6)  # B starts at zero
    trainable = [v.path for v in classifier.backbone.trainable_variables]
    assert trainable and all(path.endswith(("lora_kernel_a", "lora_kernel_b")) for path in trainable), trainable
    assert len(trainable) == 2 * classifier.backbone.num_layers  # the qkv projection of every block
    assert lora_rank(classifier.backbone) == 4

    classifier.fit(texts, labels, batch_size=8, epochs=1, seed=0, verbose=0)

    # The "auto" optimizer was chosen at construction, before LoRA: fit picked LoRA's rate instead.
    assert float(keras.ops.convert_to_numpy(classifier.optimizer.learning_rate)) == pytest.approx(5e-4)
    after = _values(classifier.backbone.weights)
    for path, value in base.items():
        np.testing.assert_array_equal(after[path], value, err_msg=path)  # the pretrained weights stay frozen
    assert any(np.abs(v).max() > 0 for p, v in after.items() if p.endswith("lora_kernel_b"))
    assert any(not np.array_equal(v, head[p]) for p, v in _values(classifier.get_layer("logits").weights).items())


@pytest.mark.slow
def test_the_lora_file_holds_the_whole_update(tuned, tmp_path):
    classifier, texts = tuned
    expected = classifier.predict(texts, verbose=0)
    path = tmp_path / "sst2.lora.h5"
    classifier.backbone.save_lora_weights(path)

    fresh = BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=64)
    fresh.backbone.load_lora_weights(path)  # enables LoRA with the file's rank and targets
    fresh.get_layer("logits").set_weights(classifier.get_layer("logits").get_weights())

    assert lora_rank(fresh.backbone) == 4
    np.testing.assert_allclose(fresh.predict(texts, verbose=0), expected, atol=1e-5)


@pytest.mark.slow
def test_lora_file_errors_name_the_file_and_the_mismatch(tuned, tmp_path):
    classifier, _ = tuned
    with pytest.raises(ValueError, match=r"must end in '\.lora\.h5'"):
        classifier.backbone.save_lora_weights(tmp_path / "adapter.h5")
    path = tmp_path / "adapter.lora.h5"
    classifier.backbone.save_lora_weights(path)

    with pytest.raises(FileNotFoundError, match="missing.lora.h5: no such LoRA weights file"):
        BertBackbone.from_preset(PRESET).load_lora_weights(tmp_path / "missing.lora.h5")
    other_rank = BertBackbone.from_preset(PRESET)
    other_rank.enable_lora(8)
    with pytest.raises(ValueError, match="adapter.lora.h5: LoRA rank 4, but this backbone's LoRA has rank 8"):
        other_rank.load_lora_weights(path)
    narrow = BertBackbone(vocabulary_size=30522, num_layers=6, num_heads=2, hidden_dim=16, intermediate_dim=32)
    with pytest.raises(ValueError, match=r"qkv/lora_kernel_a has shape \(384, 4\), this backbone's has \(16, 4\)"):
        narrow.load_lora_weights(path)
    assert lora_rank(narrow) is None
    with pytest.raises(ValueError, match="no LoRA layers: call `backbone.enable_lora"):
        BertBackbone.from_preset(PRESET).save_lora_weights(tmp_path / "none.lora.h5")
    shallow = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=12, hidden_dim=384, intermediate_dim=32)
    shallow.enable_lora(2)
    shallow.save_lora_weights(tmp_path / "shallow.lora.h5")
    with pytest.raises(ValueError, match="shallow.lora.h5: no factors for layer 'transformer_layer_1/qkv': the file "
                                         "is for a backbone with fewer layers"):
        (deep := BertBackbone.from_preset(PRESET)).load_lora_weights(tmp_path / "shallow.lora.h5")
    assert lora_rank(deep) is None  # a file that does not fit changes nothing


def test_enable_lora_argument_errors():
    backbone = BertBackbone(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16)
    with pytest.raises(ValueError, match="`rank` must be a positive int"):
        backbone.enable_lora(0)
    with pytest.raises(ValueError, match="Unknown LoRA target layer 'query'"):
        backbone.enable_lora(2, target_layer_names=["query"])
    with pytest.raises(ValueError, match=r"`target_layer_names`=\[\] names no layer of this backbone"):
        backbone.enable_lora(2, target_layer_names=[])
    backbone.enable_lora(2, target_layer_names=["qkv", "intermediate", "output"])
    assert len(backbone.trainable_variables) == 3 * 2 * 2
    with pytest.raises(ValueError, match="LoRA is already enabled on this backbone \\(rank 2\\)"):
        backbone.enable_lora(4)


@pytest.mark.slow
def test_a_lora_model_saves_and_loads_as_a_plain_model(tuned, tmp_path):
    classifier, texts = tuned
    expected = classifier.predict(texts, verbose=0)

    classifier.save(tmp_path / "classifier.keras")
    loaded = keras.saving.load_model(tmp_path / "classifier.keras")
    classifier.save_to_preset(tmp_path / "preset")
    from_preset = BertClassifier.from_preset(tmp_path / "preset")

    for model in (loaded, from_preset):
        assert lora_rank(model.backbone) is None  # the factors are merged into the kernels
        assert model.count_params() == BertClassifier.from_preset(PRESET, num_classes=2).count_params()
        np.testing.assert_allclose(model.predict(texts, verbose=0), expected, atol=1e-5)

    save_huggingface(classifier.backbone, tmp_path / "huggingface")
    features = classifier.preprocessor(texts[:4])
    exported = BertBackbone.from_preset(tmp_path / "huggingface")(features)["sequence_output"]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(exported),
                               keras.ops.convert_to_numpy(classifier.backbone(features)["sequence_output"]), atol=1e-5)


@pytest.mark.slow
def test_continued_pretraining_with_lora_moves_only_the_factors_and_the_mlm_head():
    texts = [
        "The note was immediately despatched, and its contents as quickly complied with.",
        "Mrs. Bennet, accompanied by her two youngest girls, reached Netherfield soon after the family breakfast.",
    ]
    pretrainer = BertPretrainer.from_preset(PRESET, nsp=False, sequence_length=32)
    pretrainer.backbone.enable_lora(2)
    base = {p: v for p, v in _values(pretrainer.backbone.weights).items() if "lora" not in p}
    pretrainer.fit(texts, batch_size=2, epochs=1, seed=0, verbose=0)
    after = _values(pretrainer.backbone.weights)
    for path, value in base.items():
        np.testing.assert_array_equal(after[path], value, err_msg=path)  # the tied token embedding included
    assert float(keras.ops.convert_to_numpy(pretrainer.optimizer.learning_rate)) == pytest.approx(5e-4)


@pytest.mark.slow
def test_an_interrupted_lora_finetune_resumes_to_the_uninterrupted_factors(shared_data, tmp_path):
    """The run checkpoints hold every variable as it is (the frozen kernels and the factors apart), so a resumed
    LoRA run goes on training its factors; a Keras `.weights.h5` would hold the merged kernels, and loading one
    into a LoRA layer zeroes both factors (which then get no gradient)."""
    from keras_bert_impl import BertClassifierPreprocessor
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning

    texts, labels = _sst2(shared_data, 48)
    preprocessor = BertClassifierPreprocessor.from_preset(PRESET, sequence_length=32)

    def run(model_dir, callbacks=()):
        setup_finetuning(seed=0)
        backbone = BertBackbone(vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                                max_sequence_length=32)
        classifier = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor)
        backbone.enable_lora(2)
        train = preprocessor.make_dataset(texts, labels, batch_size=16, shuffle=True, seed=0)
        finetune(classifier, train, epochs=3, learning_rate=1e-2, model_dir=str(model_dir), seed=0, verbose=0,
                 callbacks=list(callbacks), tensorboard=False)
        return classifier

    straight = run(tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed", [StopAfterEpoch(2)])
    resumed = run(tmp_path / "resumed")
    assert lora_rank(resumed.backbone) == 2
    factors = [v for v in straight.weights if "lora_kernel" in v.path]
    assert len(factors) == 4 and all(np.abs(keras.ops.convert_to_numpy(v)).max() > 0 for v in factors)
    for a, b in zip(straight.weights, resumed.weights):
        assert a.path == b.path
        np.testing.assert_allclose(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), atol=1e-6, rtol=0,
                                   err_msg=a.path)


@pytest.mark.slow
def test_lora_enabled_after_training_recompiles_the_auto_optimizer_or_says_to(shared_data):
    texts, labels = _sst2(shared_data, 8)
    classifier = BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=32)
    classifier.fit(texts, labels, batch_size=4, verbose=0)
    classifier.backbone.enable_lora(2)
    classifier.fit(texts, labels, batch_size=4, verbose=0)  # before: Keras's "Unknown variable: <Variable ...>"
    assert float(keras.ops.convert_to_numpy(classifier.optimizer.learning_rate)) == pytest.approx(5e-4)

    classifier = BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=32)
    classifier.compile(optimizer=keras.optimizers.Adam(1e-5))
    classifier.fit(texts, labels, batch_size=4, verbose=0)
    classifier.backbone.enable_lora(2)
    with pytest.raises(ValueError) as error:
        classifier.fit(texts, labels, batch_size=4, verbose=0)
    assert str(error.value) == (
        "This BertClassifier's trainable weights changed since its optimizer was built (layers unfrozen or LoRA "
        "enabled): call compile(optimizer=...) with a new optimizer before fit.")
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3))
    assert np.isfinite(classifier.fit(texts, labels, batch_size=4, verbose=0).history["loss"][0])
