"""Hugging Face checkpoints: strict checking (names and shapes), skipped tensors, naming variants, pickles.

Every checkpoint here is the real all-MiniLM-L6-v2 safetensors file, renamed or
altered the way real files differ (a `bert.` prefix and gamma/beta names from
BertForPreTraining exports, pretraining heads, a config that does not match).
"""

import json

import zipfile

import numpy as np
import pytest
from keras import ops

from keras_bert_impl import BertBackbone
from keras_bert_impl.checkpoints import CheckpointMismatchError
from keras_bert_impl.checkpoints.huggingface import load_weights, read_backbone_config


@pytest.fixture(scope="module")
def tensors(minilm_dir):
    from safetensors.numpy import load_file

    return load_file(str(minilm_dir / "model.safetensors"))


@pytest.fixture(scope="module")
def backbone(minilm_dir):
    return BertBackbone(**read_backbone_config(str(minilm_dir)))


def write_hf_dir(directory, minilm_dir, tensors, **config_changes):
    from safetensors.numpy import save_file

    directory.mkdir()
    config = json.loads((minilm_dir / "config.json").read_text())
    config.update(config_changes)
    (directory / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


def test_missing_tensor_is_named_with_shape(tmp_path, minilm_dir, tensors, backbone):
    damaged = {k: v for k, v in tensors.items() if k != "encoder.layer.3.output.dense.weight"}
    directory = write_hf_dir(tmp_path / "hf", minilm_dir, damaged)
    with pytest.raises(CheckpointMismatchError) as info:
        load_weights(backbone, directory)
    message = str(info.value)
    assert "model.safetensors does not match the BertBackbone config (1 problem(s))" in message
    assert (
        "missing tensor 'encoder.layer.3.output.dense.weight' (expected shape (384, 1536), "
        "for BertBackbone variable 'transformer_layer_3/output/kernel')"
    ) in message


def test_a_checkpoint_without_a_pooler_loads_the_rest_and_says_so(tmp_path, minilm_dir, tensors, backbone):
    """transformers' `BertForMaskedLM` (what `run_mlm.py` saves) has no pooler: every other weight loads (the
    pooler keeps its initialisation and `left_new` names it); one pooler tensor without the other is still an error."""
    directory = write_hf_dir(tmp_path / "mlm", minilm_dir, {k: v for k, v in tensors.items() if "pooler" not in k})
    before = ops.convert_to_numpy(backbone.pooled_dense.kernel).copy()
    report = load_weights(backbone, directory)
    assert sorted(report.left_new) == ["pooled_dense/bias", "pooled_dense/kernel"]
    assert report.left_new["pooled_dense/kernel"].startswith(
        "the checkpoint has no pooler (as transformers saves BertForMaskedLM, BertForTokenClassification and "
        "BertForQuestionAnswering)")
    assert "Left 2 weights at their new initialisation:" in str(report)
    np.testing.assert_array_equal(ops.convert_to_numpy(backbone.pooled_dense.kernel), before)
    np.testing.assert_array_equal(ops.convert_to_numpy(backbone.token_embedding.embeddings),
                                  tensors["embeddings.word_embeddings.weight"])

    half = write_hf_dir(tmp_path / "half", minilm_dir, {k: v for k, v in tensors.items() if k != "pooler.dense.bias"})
    with pytest.raises(CheckpointMismatchError, match=r"missing tensor 'pooler\.dense\.bias'"):
        load_weights(backbone, half)


def test_unexpected_tensor_is_named_with_shape(tmp_path, minilm_dir, tensors, backbone):
    extra = dict(tensors, **{"encoder.layer.1.attention.self.rotary.weight": np.zeros((4, 4), "float32")})
    directory = write_hf_dir(tmp_path / "hf", minilm_dir, extra)
    with pytest.raises(CheckpointMismatchError, match=r"unexpected tensor 'encoder\.layer\.1\.attention\.self\.rotary\.weight' with shape \(4, 4\)"):
        load_weights(backbone, directory)


def test_shape_mismatch_names_both_shapes(tmp_path, minilm_dir, tensors, backbone):
    bad = dict(tensors, **{"encoder.layer.0.intermediate.dense.weight": np.zeros((1535, 384), "float32")})
    directory = write_hf_dir(tmp_path / "hf", minilm_dir, bad)
    with pytest.raises(CheckpointMismatchError) as info:
        load_weights(backbone, directory)
    assert (
        "shape mismatch for tensor 'encoder.layer.0.intermediate.dense.weight': checkpoint has (1535, 384), "
        "expected (1536, 384) (for BertBackbone variable 'transformer_layer_0/intermediate/kernel')"
    ) in str(info.value)


def test_config_that_does_not_match_the_weights(tmp_path, minilm_dir, tensors):
    directory = write_hf_dir(tmp_path / "hf", minilm_dir, tensors, intermediate_size=1024)
    with pytest.raises(CheckpointMismatchError) as info:
        BertBackbone.from_preset(str(directory))
    message = str(info.value)
    assert "(18 problem(s))" in message  # intermediate kernel, bias and output kernel of 6 layers
    assert (
        "shape mismatch for tensor 'encoder.layer.0.output.dense.weight': checkpoint has (384, 1536), "
        "expected (384, 1024)"
    ) in message


def test_prefixed_gamma_beta_names_load_and_heads_are_skipped(tmp_path, minilm_dir, tensors, backbone):
    renamed = {}
    for name, value in tensors.items():
        name = "bert." + name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        renamed[name] = value
    rng = np.random.default_rng(0)
    renamed["cls.predictions.bias"] = np.zeros(30522, "float32")
    renamed["cls.predictions.transform.dense.weight"] = rng.normal(0, 0.02, (384, 384)).astype("float32")
    renamed["cls.seq_relationship.weight"] = rng.normal(0, 0.02, (2, 384)).astype("float32")
    directory = write_hf_dir(tmp_path / "hf", minilm_dir, renamed)
    report = load_weights(backbone, directory)
    assert "bert.embeddings.LayerNorm.gamma" in report.loaded
    assert set(report.skipped) == {
        "bert.embeddings.position_ids",
        "cls.predictions.bias",
        "cls.predictions.transform.dense.weight",
        "cls.seq_relationship.weight",
    }
    assert "pretraining head" in report.skipped["cls.seq_relationship.weight"]
    assert "cls.predictions.bias: pretraining head" in str(report)
    layer = backbone.transformer_layers[2]
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer.attention_layer_norm.gamma), tensors["encoder.layer.2.attention.output.LayerNorm.weight"]
    )
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer.qkv_dense.kernel)[:, 384:768], tensors["encoder.layer.2.attention.self.key.weight"].T
    )


@pytest.mark.parametrize("how", ["zip", "legacy", "bfloat16"])
def test_a_pytorch_model_bin_loads_without_torch_running_nothing_from_it(tmp_path, minilm_dir, tensors, how):
    # Before: a directory with only pytorch_model.bin (many older checkpoints on the Hub) was refused unless
    # allow_pytorch_pickle=True, and then needed torch.load. The file is the real checkpoint's state dict, saved by
    # torch as transformers' save_pretrained(safe_serialization=False) does (zip format; the legacy format of
    # PyTorch before 1.6; bfloat16 tensors).
    import torch

    from keras_bert_impl.checkpoints.torch_weights import read_state_dict

    directory = tmp_path / "pickle_only"
    directory.mkdir()
    for name in ("config.json", "vocab.txt"):
        (directory / name).write_bytes((minilm_dir / name).read_bytes())
    state = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}
    if how == "bfloat16":
        state = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in state.items()}
    torch.save(state, directory / "pytorch_model.bin", _use_new_zipfile_serialization=how != "legacy")
    read = read_state_dict(directory / "pytorch_model.bin")
    assert sorted(read) == sorted(state)
    for name, tensor in state.items():
        np.testing.assert_array_equal(read[name], tensor.float().numpy() if tensor.is_floating_point()
                                      else tensor.numpy())
    loaded = BertBackbone.from_preset(str(directory))
    reference = BertBackbone.from_preset(str(minilm_dir))
    for ours, theirs in zip(loaded.weights, reference.weights):
        expected = ops.convert_to_numpy(theirs)
        if how == "bfloat16":
            expected = torch.from_numpy(expected).to(torch.bfloat16).float().numpy()
        np.testing.assert_array_equal(ops.convert_to_numpy(ours), expected)


def test_a_pickle_that_would_run_code_is_refused_before_anything_runs(tmp_path):
    import torch

    from keras_bert_impl.checkpoints.torch_weights import read_state_dict

    ran = []

    class Payload:
        def __reduce__(self):
            return (ran.append, ("ran",))

    for legacy in (False, True):
        torch.save({"weight": torch.ones(2), "payload": Payload()}, tmp_path / "model.bin",
                   _use_new_zipfile_serialization=not legacy)
        with pytest.raises(ValueError) as error:
            read_state_dict(tmp_path / "model.bin")
        assert str(error.value).startswith(f"{tmp_path / 'model.bin'} refers to ")
        assert str(error.value).endswith(", which a file of weights does not need: not loaded (nothing in it ran).")
    assert ran == []
    torch.save({"weight": torch.ones(1000)}, tmp_path / "model.bin")
    data = (tmp_path / "model.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError) as error:
        read_state_dict(tmp_path / "cut.bin")
    assert str(error.value) == f"{tmp_path / 'cut.bin'} is a zip cut short (a truncated download: fetch it again)."
    torch.save({"weight": torch.ones(1000)}, tmp_path / "legacy.bin", _use_new_zipfile_serialization=False)
    data = (tmp_path / "legacy.bin").read_bytes()
    (tmp_path / "legacy_cut.bin").write_bytes(data[: len(data) - 4004])  # into the storage's length header
    with pytest.raises(ValueError) as error:
        read_state_dict(tmp_path / "legacy_cut.bin")
    assert str(error.value).startswith(f"{tmp_path / 'legacy_cut.bin'} is cut short before storage ")
    (tmp_path / "legacy_cut.bin").write_bytes(data[: len(data) - 2000])  # half the storage's values
    with pytest.raises(ValueError) as error:
        read_state_dict(tmp_path / "legacy_cut.bin")
    assert str(error.value).endswith(" holds 500 values, 1000 expected (a truncated file: download it again).")
    torch.save([torch.ones(2)], tmp_path / "list.bin")
    with pytest.raises(ValueError) as error:
        read_state_dict(tmp_path / "list.bin")
    assert str(error.value) == f"{tmp_path / 'list.bin'} holds a list, not a state dict of tensors."
    torch.save({"weight": torch.ones(2), "step": 3}, tmp_path / "mixed.bin")
    with pytest.raises(ValueError) as error:
        read_state_dict(tmp_path / "mixed.bin")
    assert str(error.value) == f"{tmp_path / 'mixed.bin'}: 'step' is int 3, not a tensor."
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as archive:
        archive.writestr("readme.txt", "not weights")
    with pytest.raises(ValueError) as error:
        read_state_dict(tmp_path / "other.zip")
    assert str(error.value) == f"{tmp_path / 'other.zip'} is a zip, but not a torch.save file (no <name>/data.pkl in it)."
    (tmp_path / "text.bin").write_text("not weights")
    with pytest.raises(ValueError) as error:
        read_state_dict(tmp_path / "text.bin")
    assert str(error.value) == (f"{tmp_path / 'text.bin'} is not a torch.save file (neither the zip format nor the "
                                "legacy one).")


def test_activation_mapping_and_unsupported_config(tmp_path, minilm_dir, tensors):
    from keras_bert_impl.checkpoints.huggingface import backbone_config_from_hf

    config = json.loads((minilm_dir / "config.json").read_text())
    assert backbone_config_from_hf(config)["activation"] == "gelu"
    for tanh_name in ("gelu_new", "gelu_pytorch_tanh"):
        assert backbone_config_from_hf(dict(config, hidden_act=tanh_name))["activation"] == "gelu_approximate"
    with pytest.raises(ValueError, match=r"hidden_act='swish'; supported"):
        backbone_config_from_hf(dict(config, hidden_act="swish"))
    with pytest.raises(ValueError, match=r"position_embedding_type='relative_key'"):
        backbone_config_from_hf(dict(config, position_embedding_type="relative_key"))
    with pytest.raises(TypeError, match=r"Unknown override\(s\) \['hidden_size'\]"):
        BertBackbone.from_preset(str(minilm_dir), hidden_size=5)


def test_sharded_safetensors_checkpoint_loads(tmp_path, minilm_dir, tensors, backbone):
    from safetensors.numpy import save_file

    directory = tmp_path / "sharded"
    directory.mkdir()
    (directory / "config.json").write_bytes((minilm_dir / "config.json").read_bytes())
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2 :]}
    weight_map = {}
    for shard, shard_names in shards.items():
        save_file({n: tensors[n] for n in shard_names}, str(directory / shard), metadata={"format": "pt"})
        weight_map.update({n: shard for n in shard_names})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    report = load_weights(backbone, directory)
    assert report.source.endswith("model.safetensors.index.json") and len(report.loaded) == 103
    np.testing.assert_array_equal(
        ops.convert_to_numpy(backbone.token_embedding.embeddings), tensors["embeddings.word_embeddings.weight"]
    )


def test_pretraining_heads_of_a_bert_for_pretraining_checkpoint_load_with_equal_outputs(tmp_path, minilm_dir):
    """A `BertForPreTraining` (the real MiniLM encoder, seeded new heads) saved by `transformers`: our pretrainer's
    masked-LM logits at the masked positions and next-sentence logits equal the reference's."""
    import torch
    import transformers
    from tokenizers import Tokenizer

    from keras_bert_impl import BertPretrainer

    torch.manual_seed(0)
    reference = transformers.BertForPreTraining.from_pretrained(str(minilm_dir)).eval()
    with torch.no_grad():  # new heads: make them far from their initial values, so a head left new would show
        for parameter in reference.cls.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    reference.save_pretrained(str(tmp_path / "pretraining"), safe_serialization=True)
    model = BertPretrainer.from_preset(str(tmp_path / "pretraining"), preprocessor=None)
    assert model.heads_loaded == ["masked LM", "next sentence"]

    tokenizer = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tokenizer.no_padding()
    encoding = tokenizer.encode("The note was immediately despatched.", "Its contents were quickly complied with.")
    ids = np.array([encoding.ids], "int32")
    positions = np.array([[1, 3, 6, len(encoding.ids) - 3]], "int32")
    x = {"token_ids": ids, "segment_ids": np.array([encoding.type_ids], "int32"),
         "padding_mask": np.ones_like(ids), "mask_positions": positions}
    ours = model(x)
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor(ids, dtype=torch.long),
                             token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long))
    np.testing.assert_allclose(ops.convert_to_numpy(ours["mlm"])[0],
                               expected.prediction_logits[0, positions[0]].numpy(), atol=2e-4, rtol=0)
    np.testing.assert_allclose(ops.convert_to_numpy(ours["nsp"]), expected.seq_relationship_logits.numpy(),
                               atol=1e-4, rtol=0)

    assert BertPretrainer.from_preset(str(minilm_dir), preprocessor=None).heads_loaded == []  # it has no heads


def test_a_pretraining_head_with_a_missing_tensor_is_named(tmp_path, minilm_dir, tensors):
    from keras_bert_impl import BertPretrainer

    partial = dict(tensors)
    partial["cls.predictions.transform.dense.weight"] = np.zeros((384, 384), "float32")  # no bias, LayerNorm, ...
    directory = write_hf_dir(tmp_path / "partial", minilm_dir, partial)
    with pytest.raises(CheckpointMismatchError, match=r"cls\.predictions\.transform\.dense\.bias"):
        BertPretrainer.from_preset(str(directory), preprocessor=None, nsp=False)
