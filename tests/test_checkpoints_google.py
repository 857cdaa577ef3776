"""Original Google TF1 checkpoints: the real MiniLM weights written under the TF1 names load with equal outputs.

The checkpoint is written by the test with `tf.compat.v1.train.Saver` (as the
original google-research/bert code did), with the names converted from the
Hugging Face file by the rules of transformers' TF->PyTorch converter, plus the
pretraining head, global_step and Adam slots that real release checkpoints carry.
"""

import json
import re
import zipfile

import numpy as np
import pytest

from keras_bert_impl import BertBackbone
from keras_bert_impl.checkpoints import CheckpointMismatchError, resolve_tokenizer_assets
from keras_bert_impl.presets import backbone_presets
from local_http_server import serve_directory
from minilm_reference import max_diffs, numpy_outputs, real_batch


def _tf1_name(hf_name):
    """`encoder.layer.0.attention.self.query.weight` -> `bert/encoder/layer_0/attention/self/query/kernel`."""
    parts = hf_name.split(".")
    out = []
    i = 0
    while i < len(parts):
        if parts[i] == "layer" and i + 1 < len(parts) and parts[i + 1].isdigit():
            out.append(f"layer_{parts[i + 1]}")
            i += 2
            continue
        out.append(parts[i])
        i += 1
    if out[0] == "embeddings" and out[-1] == "weight" and out[-2] != "LayerNorm":
        out.pop()  # embedding tables have no "/weight" suffix
    elif out[-2] == "LayerNorm":
        out[-1] = {"weight": "gamma", "bias": "beta"}[out[-1]]
    elif out[-1] == "weight":
        out[-1] = "kernel"
    return "bert/" + "/".join(out)


def write_google_checkpoint(minilm_dir, directory, hidden_act="gelu"):
    import tensorflow as tf
    from safetensors.numpy import load_file

    directory.mkdir(parents=True)
    variables = {}
    for name, array in load_file(str(minilm_dir / "model.safetensors")).items():
        if name == "embeddings.position_ids":
            continue
        is_linear = array.ndim == 2 and not name.startswith("embeddings.")
        variables[_tf1_name(name)] = array.T if is_linear else array
    hidden = variables["bert/pooler/dense/kernel"].shape[0]
    vocab = variables["bert/embeddings/word_embeddings"].shape[0]
    rng = np.random.default_rng(0)
    variables.update(
        {
            "cls/predictions/output_bias": rng.normal(0, 0.02, vocab).astype("float32"),
            "cls/predictions/transform/dense/kernel": rng.normal(0, 0.02, (hidden, hidden)).astype("float32"),
            "cls/predictions/transform/dense/bias": rng.normal(0, 0.02, hidden).astype("float32"),
            "cls/predictions/transform/LayerNorm/gamma": rng.normal(1, 0.02, hidden).astype("float32"),
            "cls/predictions/transform/LayerNorm/beta": rng.normal(0, 0.02, hidden).astype("float32"),
            "cls/seq_relationship/output_weights": rng.normal(0, 0.02, (2, hidden)).astype("float32"),
            "cls/seq_relationship/output_bias": rng.normal(0, 0.02, 2).astype("float32"),
            "global_step": np.array(1000000, "int64"),
            "bert/pooler/dense/kernel/adam_m": np.zeros((hidden, hidden), "float32"),
            "bert/pooler/dense/kernel/adam_v": np.zeros((hidden, hidden), "float32"),
        }
    )
    with tf.Graph().as_default():
        tf_vars = {name: tf.compat.v1.Variable(value, name=name.replace("/", "_")) for name, value in variables.items()}
        saver = tf.compat.v1.train.Saver(var_list=tf_vars)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(directory / "bert_model.ckpt"), write_meta_graph=False)
    hf_config = json.loads((minilm_dir / "config.json").read_text())
    keys = (
        "attention_probs_dropout_prob", "hidden_dropout_prob", "hidden_size", "initializer_range",
        "intermediate_size", "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
        "type_vocab_size", "vocab_size",
    )
    bert_config = {key: hf_config[key] for key in keys}
    bert_config["hidden_act"] = hidden_act
    (directory / "bert_config.json").write_text(json.dumps(bert_config, indent=2))
    (directory / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
    return directory


@pytest.fixture(scope="module")
def google_dir(tmp_path_factory, minilm_dir):
    return write_google_checkpoint(minilm_dir, tmp_path_factory.mktemp("google") / "uncased_L-6_H-384_A-12")


@pytest.fixture(scope="module")
def batch(shared_data, minilm_dir):
    return real_batch(shared_data, minilm_dir)


@pytest.fixture(scope="module")
def expected(minilm_dir, batch):
    # The same weights from the Hugging Face file, with the original code's tanh GELU.
    return numpy_outputs(BertBackbone.from_preset(str(minilm_dir), activation="gelu_approximate"), batch)


@pytest.fixture(scope="module")
def google_backbone(google_dir):
    return BertBackbone.from_preset(str(google_dir))


def test_google_checkpoint_loads_with_equal_outputs(google_backbone, batch, expected):
    backbone = google_backbone
    # The original TF code's "gelu" is the tanh approximation.
    assert backbone.activation == "gelu_approximate"
    sequence, pooled = max_diffs(numpy_outputs(backbone, batch), expected, batch["padding_mask"])
    print(f"max|diff| Google checkpoint vs HF file: sequence_output {sequence:.3g}, pooled_output {pooled:.3g}")
    assert sequence <= 1e-5 and pooled <= 1e-5

    skipped = backbone.load_report.skipped
    assert "pretraining head" in skipped["cls/predictions/output_bias"]
    assert "pretraining head" in skipped["cls/seq_relationship/output_weights"]
    assert "step counter" in skipped["global_step"]
    assert "optimizer slot" in skipped["bert/pooler/dense/kernel/adam_m"]
    assert "bert/encoder/layer_5/attention/self/value/kernel" in backbone.load_report.loaded


def test_tanh_gelu_backbone_exports_to_transformers(google_backbone, batch, expected, tmp_path):
    from keras_bert_impl.checkpoints import save_huggingface
    from minilm_reference import transformers_outputs

    save_huggingface(google_backbone, tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["hidden_act"] == "gelu_pytorch_tanh"
    sequence, pooled = max_diffs(transformers_outputs(tmp_path / "hf", batch), expected, batch["padding_mask"])
    assert sequence <= 1e-5 and pooled <= 1e-5


def test_google_tokenizer_assets(google_dir):
    assets = resolve_tokenizer_assets(str(google_dir))
    assert assets["vocabulary"] == str(google_dir / "vocab.txt")
    assert assets["lowercase"] is True  # "uncased" in the release directory name


def _with_config(google_dir, directory, **changes):
    directory.mkdir()
    for path in google_dir.iterdir():
        (directory / path.name).symlink_to(path)
    config = json.loads((google_dir / "bert_config.json").read_text())
    config.update(changes)
    (directory / "bert_config.json").unlink()
    (directory / "bert_config.json").write_text(json.dumps(config))
    return directory


def test_config_checkpoint_mismatch_names_variables_and_shapes(google_dir, tmp_path):
    fewer = _with_config(google_dir, tmp_path / "fewer_layers", num_hidden_layers=5, intermediate_size=1535)
    with pytest.raises(CheckpointMismatchError) as info:
        BertBackbone.from_preset(str(fewer))
    message = str(info.value)
    assert "bert_model.ckpt does not match the BertBackbone config" in message
    assert "unexpected tensor 'bert/encoder/layer_5/attention/output/LayerNorm/beta' with shape (384,)" in message
    assert "... and 4 more unexpected" in message  # 16 tensors of layer 5, 12 listed
    assert (
        "shape mismatch for tensor 'bert/encoder/layer_0/intermediate/dense/kernel': "
        "checkpoint has (384, 1536), expected (384, 1535)"
    ) in message

    more = _with_config(google_dir, tmp_path / "more_layers", num_hidden_layers=7)
    with pytest.raises(CheckpointMismatchError) as info:
        BertBackbone.from_preset(str(more))
    assert "missing tensor 'bert/encoder/layer_6/attention/self/query/kernel' (expected shape (384, 384)" in str(
        info.value
    )


def test_google_release_zip_downloads_from_local_server(google_dir, batch, expected, tmp_path, monkeypatch, capfd):
    served = tmp_path / "served"
    served.mkdir()
    with zipfile.ZipFile(served / "uncased_L-6_H-384_A-12.zip", "w", zipfile.ZIP_STORED) as archive:
        for path in sorted(google_dir.iterdir()):
            archive.write(path, f"uncased_L-6_H-384_A-12/{path.name}")
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    with serve_directory(served) as (base_url, requests):
        monkeypatch.setitem(
            backbone_presets,
            "test_minilm_google_zip",
            {
                "metadata": {"description": "test entry", "params": 0, "lowercase": True},
                "config": {},
                "sources": [
                    {"format": "google_zip", "url": f"{base_url}/missing.zip", "sha256": {}},
                    {"format": "google_zip", "url": f"{base_url}/uncased_L-6_H-384_A-12.zip", "sha256": {}},
                ],
            },
        )
        backbone = BertBackbone.from_preset("test_minilm_google_zip")
        assert requests == ["/missing.zip", "/uncased_L-6_H-384_A-12.zip"]
        progress = capfd.readouterr().err
        # The rate's unit follows the speed (a local server may reach GB/s), so any unit is accepted.
        assert re.search(r"Downloading uncased_L-6_H-384_A-12\.zip: [0-9.]+ MB/[0-9.]+ MB \(100%\) [0-9.]+ (B|KB|MB|GB)/s\n", progress), progress
        sequence, pooled = max_diffs(numpy_outputs(backbone, batch), expected, batch["padding_mask"])
        assert sequence <= 1e-5 and pooled <= 1e-5
        cached = tmp_path / "cache" / "test_minilm_google_zip"
        assert (cached / "bert_config.json").exists() and (cached / "bert_model.ckpt.index").exists()
        # Second use comes from the cache: no request.
        assert resolve_tokenizer_assets("test_minilm_google_zip")["vocabulary"] == str(cached / "vocab.txt")
        assert len(requests) == 2


def test_the_pretraining_heads_of_a_release_checkpoint_load_into_the_pretrainer(google_dir):
    import tensorflow as tf
    from keras import ops

    from keras_bert_impl import BertPretrainer

    reader = tf.train.load_checkpoint(str(google_dir / "bert_model.ckpt"))
    model = BertPretrainer.from_preset(str(google_dir), preprocessor=None)
    assert model.heads_loaded == ["masked LM", "next sentence"]
    head, nsp = model.masked_lm_head, model.next_sentence_head
    pairs = [
        (head.transform_dense.kernel, "cls/predictions/transform/dense/kernel", False),
        (head.transform_dense.bias, "cls/predictions/transform/dense/bias", False),
        (head.layer_norm.gamma, "cls/predictions/transform/LayerNorm/gamma", False),
        (head.layer_norm.beta, "cls/predictions/transform/LayerNorm/beta", False),
        (head.output_bias, "cls/predictions/output_bias", False),
        (nsp.dense.kernel, "cls/seq_relationship/output_weights", True),  # (2, hidden) in the checkpoint
        (nsp.dense.bias, "cls/seq_relationship/output_bias", False),
    ]
    for variable, name, transposed in pairs:
        value = reader.get_tensor(name)
        np.testing.assert_array_equal(ops.convert_to_numpy(variable), value.T if transposed else value, err_msg=name)
