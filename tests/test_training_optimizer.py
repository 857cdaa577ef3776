"""WarmupLinearDecay, create_optimizer: schedule shape, weight-decay exclusions, wrappers, errors."""

import keras
import numpy as np
import pytest

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.layers.masked_lm_head import MaskedLMHead
from keras_bert_impl.training.optimizer import create_optimizer, mixed_precision_policy
from keras_bert_impl.training.schedule import WarmupLinearDecay


def test_schedule_warms_up_then_decays_linearly():
    schedule = WarmupLinearDecay(2e-4, warmup_steps=100, total_steps=1100, end_learning_rate=1e-5)
    values = [float(schedule(s)) for s in (0, 50, 100, 600, 1100, 5000)]
    np.testing.assert_allclose(values, [0.0, 1e-4, 2e-4, 1.05e-4, 1e-5, 1e-5], rtol=1e-5, atol=1e-12)


def test_schedule_without_warmup_starts_at_peak():
    schedule = WarmupLinearDecay(1e-3, warmup_steps=0, total_steps=10)
    np.testing.assert_allclose([float(schedule(0)), float(schedule(5))], [1e-3, 5e-4], rtol=1e-6)


def test_schedule_serialises_round_trip():
    schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=100, end_learning_rate=1e-6)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert isinstance(restored, WarmupLinearDecay)
    assert restored.get_config() == schedule.get_config()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(peak_learning_rate=0.0, warmup_steps=1, total_steps=10), "peak_learning_rate"),
        (dict(peak_learning_rate=1e-4, warmup_steps=20, total_steps=10), "warmup_steps"),
        (dict(peak_learning_rate=1e-4, warmup_steps=1, total_steps=0), "total_steps"),
    ],
)
def test_schedule_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WarmupLinearDecay(**kwargs)


def _tiny_model_variables():
    backbone = BertBackbone(
        vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=16,
    )
    head = MaskedLMHead(token_embedding=backbone.token_embedding)
    head.build((None, None, 8))
    return backbone.trainable_weights + head.trainable_weights


def test_weight_decay_skips_layer_norm_and_bias():
    variables = _tiny_model_variables()
    opt = create_optimizer(1e-3, num_train_steps=10, warmup_steps=0, weight_decay=0.1)
    decayed = {v.path: opt._use_weight_decay(v) for v in variables}
    for path, uses_decay in decayed.items():
        name = path.split("/")[-1]
        expected = name not in ("gamma", "beta", "bias", "output_bias")
        assert uses_decay == expected, path
    assert any(decayed.values()) and not all(decayed.values())


def test_weight_decay_really_leaves_excluded_weights_alone():
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    bias = keras.Variable(np.ones((2,), "float32"), name="bias")
    opt = create_optimizer(0.5, num_train_steps=10, warmup_steps=0, weight_decay=0.1)
    opt.apply_gradients([(np.zeros((2, 2), "float32"), kernel), (np.zeros((2,), "float32"), bias)])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(bias), 1.0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(kernel), 1.0 - 0.5 * 0.1, rtol=1e-6)


def test_optimizer_variants():
    adamw = create_optimizer(1e-4, 100, 10)
    assert isinstance(adamw, keras.optimizers.AdamW)
    assert adamw.global_clipnorm == 1.0 and adamw.epsilon == 1e-6
    lamb = create_optimizer(1e-3, 100, 10, optimizer="lamb", gradient_accumulation_steps=4)
    assert isinstance(lamb, keras.optimizers.Lamb) and lamb.gradient_accumulation_steps == 4
    fp16 = create_optimizer(1e-4, 100, 10, mixed_precision="fp16")
    assert isinstance(fp16, keras.optimizers.LossScaleOptimizer)
    assert isinstance(fp16.inner_optimizer, keras.optimizers.AdamW)
    assert not isinstance(create_optimizer(1e-4, 100, 10, mixed_precision="bf16"), keras.optimizers.LossScaleOptimizer)
    assert mixed_precision_policy("bf16") == "mixed_bfloat16"
    assert mixed_precision_policy(None) == "float32"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(optimizer="sgd"), "Unknown optimizer='sgd'"),
        (dict(mixed_precision="fp8"), "--mixed_precision='fp8': expected auto, none, bf16 or fp16"),
        (dict(gradient_accumulation_steps=0), "gradient_accumulation_steps"),
        (dict(clipnorm=-1.0), "clipnorm"),
    ],
)
def test_optimizer_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        create_optimizer(1e-4, 100, 10, **kwargs)


def _steps_beside_torch(optimizer, torch_optimizer, learning_rate):
    """Five steps of `optimizer` and of `torch_optimizer(kernel, bias)` + `clip_grad_norm_(1.0)` from the same weights
    on the same gradients (global norm 10, per weight about 1e-2 to 1e-5 after clipping); `learning_rate(step)` is
    the torch rate at each step. Returns ours and theirs, {name: array}."""
    import torch

    rng = np.random.default_rng(0)
    start = {"kernel": rng.normal(0, 0.02, (64, 32)).astype("float32"), "bias": np.zeros(32, "float32")}
    gradients = [{name: (rng.normal(0, 1, value.shape) * np.logspace(-3, 0, value.shape[-1])).astype("float32")
                  for name, value in start.items()} for _ in range(5)]
    for step in gradients:
        scale = 10.0 / np.sqrt(sum(np.sum(g ** 2) for g in step.values()))
        for name in step:
            step[name] *= scale

    ours = {name: keras.Variable(value, name=name) for name, value in start.items()}
    theirs = {name: torch.nn.Parameter(torch.tensor(value)) for name, value in start.items()}
    reference = torch_optimizer(theirs["kernel"], theirs["bias"])
    for step, grads in enumerate(gradients):
        for group in reference.param_groups:
            group["lr"] = learning_rate(step)
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(grads[name]), ours[name]) for name in ours])
        for name, parameter in theirs.items():
            parameter.grad = torch.tensor(grads[name])
        torch.nn.utils.clip_grad_norm_(list(theirs.values()), 1.0)
        reference.step()
    ours = {name: keras.ops.convert_to_numpy(variable) for name, variable in ours.items()}
    for name in ours:
        assert not np.allclose(ours[name], start[name])
    return ours, {name: parameter.detach().numpy() for name, parameter in theirs.items()}


@pytest.mark.multibackend
def test_adamw_steps_equal_torch_adamw_with_hugging_face_settings():
    """BERT's AdamW (weight decay 0.01 but not on biases, epsilon 1e-6, clipping to global norm 1) takes the steps of
    `torch.optim.AdamW` + `clip_grad_norm_`, what Hugging Face fine-tunes with: epsilon is added after the bias
    correction. (Keras's own AdamW adds it before: its first steps on gradients of about 1e-5 are 3.8x smaller.)"""
    import torch

    ours, theirs = _steps_beside_torch(
        create_optimizer(2e-3, num_train_steps=1000, warmup_steps=0),
        lambda kernel, bias: torch.optim.AdamW([{"params": [kernel], "weight_decay": 0.01},
                                                {"params": [bias], "weight_decay": 0.0}], lr=2e-3, eps=1e-6),
        lambda step: 2e-3 * (1 - step / 1000))  # the schedule's rate at this step (linear decay to 0 at step 1000)
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-5, atol=1e-7)


@pytest.mark.multibackend
def test_the_auto_optimizer_of_a_task_steps_as_the_hugging_face_trainer_defaults():
    """`Task.compile()`'s optimizer is the `Trainer`'s with its default arguments (AdamW at 5e-5, epsilon 1e-8, no
    weight decay, `max_grad_norm` 1), at a constant rate."""
    import torch

    from keras_bert_impl import BertBackbone, BertClassifier

    backbone = BertBackbone(vocabulary_size=16, num_layers=1, num_heads=1, hidden_dim=8, intermediate_dim=16)
    classifier = BertClassifier(backbone, num_classes=2)
    classifier.compile()
    assert type(classifier.optimizer).__name__ == "GlobalClipAdamW"
    ours, theirs = _steps_beside_torch(
        classifier.default_optimizer(),
        lambda kernel, bias: torch.optim.AdamW([kernel, bias], lr=5e-5, eps=1e-8, weight_decay=0.0),
        lambda step: 5e-5)
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-5, atol=1e-8)  # weights move by up to 2.5e-4
