"""Fine-tuning plumbing: length buckets, padding in order, finetune() with best checkpoint and early stop.

Uses real SST-2 dev sentences (a word-level model keeps it fast; the BERT
heads are trained in tests/test_classifier.py).
"""

import csv
import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.batching.boundaries import default_boundaries
from keras_bert_impl.batching.tf_batches import bucket_by_length, pad_to_boundaries
from keras_bert_impl.training.finetuning import BestEpochCheckpoint, finetune, setup_finetuning
from interruptions import StopAfterEpoch, StopAtBatch


@pytest.fixture(scope="module")
def sst2_dev(shared_data):
    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    sentences = [r[0] for r in rows]
    labels = np.array([int(r[1]) for r in rows], "int32")
    return sentences, labels


def _word_ids(sentences, vocab_size=2000):
    vectorizer = keras.layers.TextVectorization(max_tokens=vocab_size, output_mode="int")
    vectorizer.adapt(sentences)
    return [np.asarray(keras.ops.convert_to_numpy(vectorizer([s])))[0] for s in sentences]


def _examples(ids, labels):
    def gen():
        for row, label in zip(ids, labels):
            yield {"token_ids": row.astype("int32"), "padding_mask": np.ones_like(row, "int32")}, label

    spec = {"token_ids": tf.TensorSpec([None], tf.int32), "padding_mask": tf.TensorSpec([None], tf.int32)}
    return tf.data.Dataset.from_generator(gen, output_signature=(spec, tf.TensorSpec([], tf.int32)))


def test_default_boundaries():
    assert default_boundaries(128) == [32, 64, 128]
    assert default_boundaries(100) == [32, 64, 100]
    assert default_boundaries(16) == [16]
    with pytest.raises(ValueError, match="sequence_length"):
        default_boundaries(0)


def test_bucket_by_length_pads_to_bucket_and_keeps_every_example(sst2_dev):
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:200])
    boundaries = [16, 32, 64]
    batches = list(bucket_by_length(_examples(ids, labels[:200]), boundaries, batch_size=8))
    seen = 0
    for features, label in batches:
        width = features["token_ids"].shape[1]
        assert width in boundaries
        lengths = features["padding_mask"].numpy().sum(axis=1)
        # Each example is in the smallest bucket that holds it.
        smallest = [min(b for b in boundaries if b >= n) for n in lengths]
        assert set(smallest) == {width}
        assert label.shape == (features["token_ids"].shape[0],)
        seen += len(lengths)
    assert seen == 200
    # Real SST-2 sentences are short: most batches are narrower than the longest bucket.
    assert sum(f["token_ids"].shape[1] < 64 for f, _ in batches) > len(batches) // 2


def test_bucket_by_length_takes_dict_labels_and_per_token_labels(sst2_dev):
    # SQuAD: labels are a dict of scalars; CoNLL: per-token labels padded with an ignored value.
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:60])

    def gen():
        for row, label in zip(ids, labels[:60]):
            features = {"token_ids": row.astype("int32"), "padding_mask": np.ones_like(row, "int32")}
            yield features, {"start": label, "end": label + 1}, row.astype("int32") % 5

    spec = {"token_ids": tf.TensorSpec([None], tf.int32), "padding_mask": tf.TensorSpec([None], tf.int32)}
    scalar = tf.TensorSpec([], tf.int32)
    dataset = tf.data.Dataset.from_generator(
        gen, output_signature=(spec, {"start": scalar, "end": scalar}, tf.TensorSpec([None], tf.int32))
    )
    seen = []
    for features, spans, token_labels in bucket_by_length(dataset, [16, 32, 64], 8, label_padding_value=-1):
        width = features["token_ids"].shape[1]
        assert token_labels.shape == (spans["start"].shape[0], width)
        real = features["padding_mask"].numpy().astype(bool)
        assert (token_labels.numpy()[~real] == -1).all() and (token_labels.numpy()[real] >= 0).all()
        np.testing.assert_array_equal(spans["end"].numpy(), spans["start"].numpy() + 1)
        seen += [tuple(r[m]) for r, m in zip(features["token_ids"].numpy(), real)]
    assert sorted(seen) == sorted(tuple(r) for r in ids)


def test_pad_to_boundaries_keeps_order(sst2_dev):
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:50])
    batches = list(pad_to_boundaries(_examples(ids, labels[:50]), [16, 32, 64], batch_size=16))
    got = np.concatenate([l.numpy() for _, l in batches])
    np.testing.assert_array_equal(got, labels[:50])
    first = batches[0][0]["token_ids"].numpy()
    np.testing.assert_array_equal(first[0, : len(ids[0])], ids[0])
    assert (first[0, len(ids[0]) :] == 0).all()


def test_fill_batches_gives_fixed_shapes_and_ignorable_labels(sst2_dev):
    import tensorflow as tf

    from keras_bert_impl.batching.tf_batches import fill_batches

    dataset = tf.data.Dataset.from_tensor_slices(({"token_ids": [[1, 2, 0], [3, 0, 0], [4, 5, 6]]}, [0, 1, 1]))
    batches = list(fill_batches(dataset.batch(2), 2, label_fill_value=-1))
    assert [b[0]["token_ids"].numpy().tolist() for b in batches] == [[[1, 2, 0], [3, 0, 0]], [[4, 5, 6], [4, 5, 6]]]
    assert [b[1].numpy().tolist() for b in batches] == [[0, 1], [1, -1]]
    assert list(fill_batches(dataset.batch(2), 2).element_spec[0].values())[0].shape.as_list() == [2, 3]
    features_only = list(fill_batches(dataset.map(lambda f, y: f).batch(2), 2))
    assert features_only[-1]["token_ids"].numpy().tolist() == [[4, 5, 6], [4, 5, 6]]
    with pytest.raises(ValueError, match="batch_size"):
        fill_batches(dataset.batch(2), 0)


def test_too_long_example_is_an_error(sst2_dev):
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:20])
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than the last bucket boundary 4"):
        list(bucket_by_length(_examples(ids, labels[:20]), [2, 4], batch_size=4))


def test_bad_arguments():
    ds = tf.data.Dataset.range(3)
    with pytest.raises(ValueError, match="strictly increasing"):
        bucket_by_length(ds, [64, 32], 8)
    with pytest.raises(ValueError, match="batch_size"):
        pad_to_boundaries(ds, [32], 0)
    with pytest.raises(ValueError, match=r"^--mixed_precision='fp8': expected auto, none, bf16 or fp16 \(or a Keras "
                                         r"policy name: float32, mixed_bfloat16, mixed_float16\)$"):
        setup_finetuning(mixed_precision="fp8")


def _bag_of_words_model(vocab_size=2000, dropout=0.0):
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
    x = keras.layers.Embedding(vocab_size, 16)(token_ids)
    mask = keras.ops.expand_dims(keras.ops.cast(padding_mask, "float32"), -1)
    x = keras.ops.sum(x * mask, axis=1) / keras.ops.maximum(keras.ops.sum(mask, axis=1), 1.0)
    if dropout:
        x = keras.layers.Dropout(dropout)(x)  # unseeded, as every dropout of the package's models
    logits = keras.layers.Dense(2)(x)
    return keras.Model({"token_ids": token_ids, "padding_mask": padding_mask}, logits)


def test_finetune_trains_saves_best_and_stops_early(sst2_dev, tmp_path):
    setup_finetuning(seed=0)
    sentences, labels = sst2_dev
    ids = _word_ids(sentences)
    train = bucket_by_length(_examples(ids[:600], labels[:600]).shuffle(600, seed=0), [16, 32, 64], 32)
    dev = pad_to_boundaries(_examples(ids[600:], labels[600:]), [16, 32, 64], 64)
    dev_labels = labels[600:]
    model = _bag_of_words_model()
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])

    def eval_fn(m):
        predictions = m.predict(dev, verbose=0).argmax(-1)
        return {"dev_accuracy": float((predictions == dev_labels).mean())}

    result = finetune(
        model, train, epochs=6, learning_rate=5e-2, eval_fn=eval_fn, model_dir=str(tmp_path),
        seed=0, verbose=0,
    )
    assert result.train_steps == sum(1 for _ in train)
    # One optimizer step a batch: Keras counted one more at each end of an unknown-length input before finetune
    # fed it as one stream (the learning-rate schedule ran ahead a step every epoch).
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 6 * result.train_steps
    assert len(result.epoch_seconds) == len(result.history["loss"])
    assert result.history["loss"][-1] < result.history["loss"][0]
    assert "dev_accuracy" in result.history and "accuracy" in result.history
    best = max(range(len(result.history["dev_accuracy"])), key=lambda i: result.history["dev_accuracy"][i])
    assert result.best_epoch == best + 1
    assert result.best_metrics["dev_accuracy"] == pytest.approx(max(result.history["dev_accuracy"]))
    assert result.best_weights_path == str(tmp_path / "best.weights.h5")
    assert os.path.exists(result.best_weights_path)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".weights.h5") and n != "best.weights.h5"]
    assert os.listdir(tmp_path / "logs")  # TensorBoard event files
    # The restored model is the best epoch's: evaluating again gives the best value.
    assert eval_fn(model)["dev_accuracy"] == pytest.approx(result.best_metrics["dev_accuracy"])
    reloaded = _bag_of_words_model()
    reloaded.load_weights(result.best_weights_path)
    assert eval_fn(reloaded)["dev_accuracy"] == pytest.approx(result.best_metrics["dev_accuracy"])


def test_a_second_finetune_in_the_same_model_dir_is_refused_while_the_first_runs(sst2_dev, tmp_path):
    # Session 56's audit: two fine-tuning runs started on one --model_dir both trained to the end, each writing over
    # the other's checkpoints and best weights. The run's lock is pretraining's (`run_lock`), held by `finetune`.
    from keras_bert_impl.training.run_lock import ModelDirInUseError, hold_model_dir

    sentences, labels = sst2_dev
    train = bucket_by_length(_examples(_word_ids(sentences[:64]), labels[:64]), [16, 32, 64], 32)
    model = _bag_of_words_model()
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with hold_model_dir(tmp_path):  # the first run, as another process holds it
        with pytest.raises(ModelDirInUseError) as error:
            finetune(model, train, epochs=1, learning_rate=1e-2, model_dir=str(tmp_path), seed=0, verbose=0)
    assert str(error.value).startswith(f"--model_dir {tmp_path} is in use by another run (pid {os.getpid()} on ")
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 0
    result = finetune(model, train, epochs=1, learning_rate=1e-2, model_dir=str(tmp_path), seed=0, verbose=0)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == result.train_steps > 0  # then it runs
    with hold_model_dir(tmp_path):  # and the lock is free again once finetune returned
        pass


def test_finetune_jit_compile_choice_reaches_the_model(sst2_dev):
    """`"auto"` is Keras's choice (XLA off on a CPU-only TensorFlow machine); True forces XLA; the losses agree."""
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:128])
    losses = {}
    for jit_compile in ("auto", True):
        setup_finetuning(seed=0)
        train = pad_to_boundaries(_examples(ids, labels[:128]), [64], 32)
        model = _bag_of_words_model()
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        result = finetune(model, train, epochs=2, learning_rate=1e-2, seed=0, verbose=0, jit_compile=jit_compile)
        losses[jit_compile] = result.history["loss"]
        if jit_compile is True:
            assert model.jit_compile is True
        elif not tf.config.list_physical_devices("GPU"):
            assert model.jit_compile is False
    np.testing.assert_allclose(losses["auto"], losses[True], rtol=1e-2)  # the same training, XLA or not


def test_finetune_trains_a_task_model_loaded_from_an_inference_only_save(sst2_dev, tmp_path):
    """A run's `model.keras` is saved without its optimizer and loads uncompiled; `finetune` trains it on the task's
    defaults (its loss, the loss counting real rows), as the model's own `fit` does (before: "`model` is not compiled
    and no `loss` was given", so no recipe could train a fine-tuned model.keras further)."""
    from keras_bert_impl import BertBackbone, BertClassifier

    setup_finetuning(seed=0)
    sentences, labels = sst2_dev
    token_ids = np.zeros((64, 16), "int32")
    for i, row in enumerate(_word_ids(sentences[:64], vocab_size=500)):
        token_ids[i, :min(16, len(row))] = row[:16]
    x = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": (token_ids > 0).astype("int32")}
    backbone = BertBackbone(vocabulary_size=500, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    BertClassifier(backbone, 2, label_names=["negative", "positive"]).save(tmp_path / "model.keras")
    model = keras.saving.load_model(tmp_path / "model.keras")
    assert not model.compiled
    train = tf.data.Dataset.from_tensor_slices((x, labels[:64])).batch(16)
    result = finetune(model, train, epochs=1, learning_rate=1e-3, seed=0, verbose=0)
    assert model.compiled_with_default_loss and np.isfinite(result.history["loss"][0]) and result.train_steps == 4


def test_finetune_runs_the_steps_per_epoch_it_is_given(sst2_dev):
    """`steps_per_epoch` sets both the schedule's length and each epoch's: 3 epochs of 2 steps (of 8 batches) take
    6 optimizer steps, and the learning rate ends at 0."""
    setup_finetuning(seed=0)
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:256])
    train = pad_to_boundaries(_examples(ids, labels[:256]), [64], 32)  # 8 batches
    seen = []

    class Batches(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)))

    model = _bag_of_words_model()
    result = finetune(model, train, epochs=3, learning_rate=1e-2, steps_per_epoch=2, seed=0, verbose=0,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), callbacks=[Batches()])
    assert result.train_steps == 2 and len(result.history["loss"]) == 3
    assert seen == [1, 2, 3, 4, 5, 6]
    assert float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)) == 0.0  # the decay's end: step 6


def test_early_stopping_and_monitor_errors(sst2_dev):
    setup_finetuning(seed=0)
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:128])
    train = pad_to_boundaries(_examples(ids, labels[:128]), [64], 32)
    model = _bag_of_words_model()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    constant = lambda m: {"score": 0.5}  # never improves after epoch 1
    result = finetune(model, train, epochs=10, learning_rate=1e-3, loss=loss, eval_fn=constant,
                      early_stopping_patience=2, verbose=0)
    assert result.stopped_early and len(result.history["loss"]) == 3 and result.best_epoch == 1
    with pytest.raises(ValueError, match="monitor='f1' is not among"):
        finetune(_bag_of_words_model(), train, epochs=1, learning_rate=1e-3, loss=loss,
                 eval_fn=constant, monitor="f1", verbose=0)
    with pytest.raises(ValueError, match="no `loss` was given"):
        finetune(_bag_of_words_model(), train, epochs=1, learning_rate=1e-3, verbose=0)
    with pytest.raises(ValueError, match="infinite"):
        finetune(_bag_of_words_model(), train.repeat(), epochs=1, learning_rate=1e-3, loss=loss, verbose=0)
    with pytest.raises(ValueError, match="weights.h5"):
        BestEpochCheckpoint(weights_path="best.h5")


def test_an_interrupted_finetune_resumes_to_the_uninterrupted_weights(sst2_dev, tmp_path):
    """3 epochs straight, and 3 epochs interrupted after the 2nd then run again with the same model_dir: the same
    history, best epoch and final weights (the third epoch sees the same shuffled batches), and no checkpoint left."""
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:320])
    dev_labels = labels[256:320]

    def run(model_dir, callbacks=()):
        setup_finetuning(seed=0)
        train = bucket_by_length(_examples(ids[:256], labels[:256]).shuffle(256, seed=0), [16, 32, 64], 32)
        dev = pad_to_boundaries(_examples(ids[256:], dev_labels), [16, 32, 64], 64)
        model = _bag_of_words_model()
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        accuracy = lambda m: {"dev_accuracy": float((m.predict(dev, verbose=0).argmax(-1) == dev_labels).mean())}
        result = finetune(model, train, epochs=3, learning_rate=5e-2, eval_fn=accuracy, model_dir=str(model_dir),
                          seed=0, verbose=0, callbacks=list(callbacks), restore_best_weights=False)
        return model, result

    straight, straight_result = run(tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed", [StopAfterEpoch(2)])
    assert os.listdir(tmp_path / "resumed" / "checkpoints") == ["ckpt-000000002"]
    resumed, resumed_result = run(tmp_path / "resumed")
    assert resumed_result.history.keys() == straight_result.history.keys()
    for key, values in straight_result.history.items():
        np.testing.assert_allclose(resumed_result.history[key], values, rtol=1e-5, err_msg=key)
    assert resumed_result.best_epoch == straight_result.best_epoch and len(resumed_result.epoch_seconds) == 3
    for a, b in zip(straight.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    assert not os.path.exists(tmp_path / "resumed" / "checkpoints")  # finished: removed
    assert not os.path.exists(tmp_path / "straight" / "checkpoints")


@pytest.mark.slow
@pytest.mark.multibackend
def test_a_resumed_finetune_ends_with_the_uninterrupted_weights_on_every_backend(sst2_dev, tmp_path):
    """Dropout and a shuffled input, interrupted after epoch 2 of 3: the same weights as the run never interrupted.

    Two things broke this on JAX and PyTorch: Keras's `fit` built the metrics from a first batch of an extra
    iterator, which spent one of the input's reshuffles (a resumed input, skipping the finished epochs, spent
    another); and PyTorch's unseeded dropout draws from torch's global generator, which no checkpoint held.
    """
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:192])

    def run(model_dir, callbacks=()):
        setup_finetuning(seed=0)
        train = bucket_by_length(_examples(ids, labels[:192]).shuffle(192, seed=0), [16, 32, 64], 32)
        model = _bag_of_words_model(dropout=0.3)
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        finetune(model, train, epochs=3, learning_rate=5e-2, model_dir=str(model_dir), seed=0, verbose=0,
                 callbacks=list(callbacks), restore_best_weights=False, tensorboard=False)
        return [keras.ops.convert_to_numpy(w) for w in model.weights]

    straight = run(tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed", [StopAfterEpoch(2)])
    resumed = run(tmp_path / "resumed")
    for a, b in zip(straight, resumed):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


# Runs `_cross_backend_run` of this file in a fresh process on KERAS_BACKEND; prints the final weights as JSON.
RESUME_ELSEWHERE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import test_finetuning
print(json.dumps([w.tolist() for w in test_finetuning._cross_backend_run(sys.argv[2], sys.argv[3])]))
"""


def _cross_backend_run(shared_data, model_dir, callbacks=()):
    """Three epochs of the bag-of-words model on 192 real SST-2 dev rows, shuffled, checkpointed in `model_dir`."""
    with open(os.path.join(shared_data, "glue", "SST-2", "dev.tsv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:193]
    setup_finetuning(seed=0)
    train = bucket_by_length(_examples(_word_ids([r[0] for r in rows]), [int(r[1]) for r in rows]).shuffle(
        192, seed=0), [16, 32, 64], 32)
    model = _bag_of_words_model()
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    finetune(model, train, epochs=3, learning_rate=5e-2, model_dir=model_dir, seed=0, verbose=0,
             callbacks=list(callbacks), restore_best_weights=False, tensorboard=False)
    return [np.asarray(keras.ops.convert_to_numpy(w)) for w in model.weights]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_finetune_stopped_on_tensorflow_resumes_on_another_backend_to_the_same_weights(shared_data, tmp_path,
                                                                                          backend):
    """A fine-tuning run stopped after epoch 1 of 3 on TensorFlow, resumed in a fresh process on JAX or PyTorch
    (the checkpoint's variables go back by path: `checkpoint_variable_order.restore_order`), ends with the weights of the
    run never stopped (measured: max |diff| 6e-8 on JAX, 3e-7 on PyTorch)."""
    import subprocess
    import sys

    straight = _cross_backend_run(str(shared_data), str(tmp_path / "straight"))
    with pytest.raises(KeyboardInterrupt):
        _cross_backend_run(str(shared_data), str(tmp_path / "stopped"), [StopAfterEpoch(1)])
    done = subprocess.run(
        [sys.executable, "-c", RESUME_ELSEWHERE, os.path.dirname(os.path.abspath(__file__)), str(shared_data),
         str(tmp_path / "stopped")], capture_output=True, text=True, timeout=900,
        env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Resuming from" in done.stderr and "1 epoch(s) done" in done.stderr
    resumed = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(resumed) == len(straight)
    for a, b in zip(straight, resumed):
        np.testing.assert_allclose(a, np.asarray(b, a.dtype), atol=1e-5, rtol=0)


@pytest.mark.multibackend
def test_a_finetune_stopped_within_an_epoch_keeps_the_weights_of_its_last_step(sst2_dev):
    """Ctrl-C at batch 3: the model holds the weights it had after 3 steps (those a callback sees at batch 3 of the
    same run uninterrupted), and predicts.

    `finetune` runs `fit` through `run_recoverably`, as `Task.fit` does, so a plain Keras model (the packed training
    models are) gets its weights back on JAX whatever stops it (Keras 3.15's own `finally` covers every step but
    an error inside the first).
    """
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:192])

    def run(callbacks):
        setup_finetuning(seed=0)
        train = bucket_by_length(_examples(ids, labels[:192]), [16, 32, 64], 32)
        model = _bag_of_words_model(dropout=0.0)
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        try:
            finetune(model, train, epochs=1, learning_rate=5e-2, seed=0, verbose=0, callbacks=callbacks,
                     restore_best_weights=False, tensorboard=False)
        except KeyboardInterrupt:
            pass
        return model

    class RecordAtBatch(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 3:  # (on JAX, `self.model` puts the weights back on the model first)
                self.weights = [np.array(w) for w in self.model.get_weights()]

    stopped = run([StopAtBatch(3)])
    record = RecordAtBatch()
    run([record])
    for a, b in zip(record.weights, stopped.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    row = np.asarray(ids[0], "int32")[None]
    assert np.isfinite(stopped.predict({"token_ids": row, "padding_mask": np.ones_like(row)}, verbose=0)).all()


def test_a_checkpoint_of_other_settings_is_refused_in_one_line(sst2_dev, tmp_path):
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:128])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def run(learning_rate, callbacks=()):
        setup_finetuning(seed=0)
        train = pad_to_boundaries(_examples(ids, labels[:128]), [64], 32)
        return finetune(_bag_of_words_model(), train, epochs=2, learning_rate=learning_rate, loss=loss,
                        model_dir=str(tmp_path), verbose=0, callbacks=list(callbacks))

    with pytest.raises(KeyboardInterrupt):
        run(1e-2, [StopAfterEpoch(1)])
    with pytest.raises(ValueError) as error:
        run(3e-2)
    message = str(error.value)
    assert "\n" not in message and message == (
        f"{tmp_path / 'checkpoints' / 'ckpt-000000001'} was written by a fine-tuning run with learning_rate=0.01, "
        f"and this run has learning_rate=0.03: run the same command as before to resume it, or remove "
        f"{tmp_path / 'checkpoints'} (or pass another model_dir) to start again")
    assert run(1e-2).history["loss"] and not os.path.exists(tmp_path / "checkpoints")  # the same settings: resumed
    # A pretraining run's checkpoint in the same folder is not taken for one.
    from keras_bert_impl.training.run_checkpoints import CheckpointManager

    model = _bag_of_words_model()
    model.compile(optimizer="adam", loss=loss)
    model.optimizer.build(model.trainable_variables)
    CheckpointManager(str(tmp_path / "checkpoints")).save(40, model, model.optimizer, state={"run": "pretraining"})
    with pytest.raises(ValueError, match=r"ckpt-000000040 is not a fine-tuning checkpoint \(a pretraining run's\?\): "
                                         "fine-tune into another model_dir$"):
        run(1e-2)


def test_a_checkpoint_of_another_batch_size_names_the_batch_size(sst2_dev, tmp_path):
    """A rerun with another --batch_size was refused naming only steps_per_epoch, which no flag sets."""
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:128])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def run(batch_size, callbacks=()):
        setup_finetuning(seed=0)
        train = pad_to_boundaries(_examples(ids, labels[:128]), [64], batch_size)
        return finetune(_bag_of_words_model(), train, epochs=2, learning_rate=1e-2, loss=loss,
                        model_dir=str(tmp_path), verbose=0, callbacks=list(callbacks))

    with pytest.raises(KeyboardInterrupt):
        run(32, [StopAfterEpoch(1)])
    with pytest.raises(ValueError) as error:
        run(16)
    assert str(error.value) == (
        f"{tmp_path / 'checkpoints' / 'ckpt-000000001'} was written by a fine-tuning run with steps_per_epoch=4, "
        "and this run has steps_per_epoch=8 (the batches of an epoch: the batch size, --batch_size, or the number "
        "of training examples changed): run the same command as before to resume it, or remove "
        f"{tmp_path / 'checkpoints'} (or pass another model_dir) to start again")


def test_a_checkpoint_of_other_data_or_seed_is_refused_and_kept_checkpoints_outlive_training(sst2_dev, tmp_path):
    """Before: a checkpoint resumed whatever the data, task, starting checkpoint or seed (only the optimizer's
    settings were compared): a GLUE run of RTE resumed an SST-2 run's epoch and reported its score. And the
    checkpoints were removed as training ended, before the recipe wrote its outputs: a run killed then started
    over from epoch 1."""
    from keras_bert_impl.training.finetuning_resume import data_digest

    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:128])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def run(train_labels, seed=0, callbacks=(), keep_checkpoints=False, starting_point=str(tmp_path)):
        setup_finetuning(seed=seed)
        train = pad_to_boundaries(_examples(ids, train_labels), [64], 32)
        return finetune(_bag_of_words_model(), train, epochs=2, learning_rate=1e-2, loss=loss, seed=seed,
                        model_dir=str(tmp_path), verbose=0, callbacks=list(callbacks),
                        run_identity={"train_data": data_digest(sentences[:128], train_labels),
                                      "starting_point": starting_point},
                        keep_checkpoints=keep_checkpoints)

    with pytest.raises(KeyboardInterrupt):
        run(labels[:128], callbacks=[StopAfterEpoch(1)])
    flipped = 1 - np.asarray(labels[:128])
    with pytest.raises(ValueError) as error:
        run(flipped)
    assert str(error.value) == (
        f"{tmp_path / 'checkpoints' / 'ckpt-000000001'} was written by a fine-tuning run with "
        f"train_data={data_digest(sentences[:128], labels[:128])!r}, and this run has "
        f"train_data={data_digest(sentences[:128], flipped)!r} (a digest of the training examples: the training "
        "file, its labels, or --max_train_samples changed): run the same command as before to resume it, or "
        f"remove {tmp_path / 'checkpoints'} (or pass another model_dir) to start again")
    with pytest.raises(ValueError, match="with seed=0, and this run has seed=7"):
        run(labels[:128], seed=7)

    with pytest.raises(ValueError, match="with starting_point="):  # another folder
        run(labels[:128], starting_point=str(tmp_path / "checkpoints"))
    # Resumed, its starting point typed another way (the same folder): epoch 2 trained, the checkpoint left.
    finished = run(labels[:128], keep_checkpoints=True, starting_point=f"{tmp_path}/./")
    assert os.listdir(tmp_path / "checkpoints") == ["ckpt-000000002"]
    again = run(labels[:128], keep_checkpoints=True)  # killed before its outputs were written: run again
    assert again.history == finished.history and again.best_epoch == finished.best_epoch  # nothing retrained
    again.remove_checkpoints()
    assert not os.path.exists(tmp_path / "checkpoints")


def test_a_starting_point_moved_or_copied_resumes_and_another_is_refused(sst2_dev, tmp_path, capfd):
    """Before: the starting checkpoint was compared by path, so a run whose pretrained export moved to another disk
    could not resume ('was written by a fine-tuning run with starting_point=...'). Now a local starting point is
    identified by its files' sha256 as well."""
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:64])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    export = tmp_path / "pretrained" / "export"
    export.mkdir(parents=True)
    (export / "config.json").write_text('{"num_layers": 2}')
    (export / "vocab.txt").write_text("[PAD]\n[UNK]\nfilm\n")
    model_dir = tmp_path / "run"

    def run(starting_point, callbacks=()):
        setup_finetuning(seed=0)
        train = pad_to_boundaries(_examples(ids, labels[:64]), [64], 32)
        return finetune(_bag_of_words_model(), train, epochs=3, learning_rate=1e-2, loss=loss,
                        model_dir=str(model_dir), verbose=0, callbacks=list(callbacks), keep_checkpoints=True,
                        run_identity={"starting_point": str(starting_point)})

    with pytest.raises(KeyboardInterrupt):
        run(export, [StopAfterEpoch(1)])
    other = shutil.copytree(export, tmp_path / "other")
    (other / "vocab.txt").write_text("[PAD]\n[UNK]\nfilms\n")
    with pytest.raises(ValueError, match=f"with starting_point='{export}', and this run has starting_point='{other}'"):
        run(other)
    moved = shutil.move(str(export), str(tmp_path / "disk2"))
    capfd.readouterr()
    with pytest.raises(KeyboardInterrupt):
        run(moved, [StopAfterEpoch(2)])
    assert (f"Resuming with starting point {moved}: the files of {export}, moved or copied (the same bytes, "
            "sha256).") in capfd.readouterr().err.splitlines()
    assert os.listdir(model_dir / "checkpoints") == ["ckpt-000000002"]
    # The same folder written again since: the run goes on from its checkpoint, saying how to start anew instead.
    (tmp_path / "disk2" / "config.json").write_text('{"num_layers": 4}')
    result = run(moved)
    assert (f"Resuming {model_dir} although the files of starting point {moved} changed since the run started: the "
            "run goes on from its checkpoint (which holds its weights); to start from the new files, remove "
            f"{model_dir / 'checkpoints'} or pass another model_dir.") in capfd.readouterr().err.splitlines()
    assert len(result.history["loss"]) == 3


def _three_epochs_scored(sst2_dev):
    """`run(model_dir, scores, callbacks=())`: 3 epochs of the bag-of-words model on 128 SST-2 sentences, epoch k
    scored `scores[k - 1]` (popped); returns the model and the `FinetuneResult`."""
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:128])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def run(model_dir, scores, callbacks=()):
        setup_finetuning(seed=0)
        train = pad_to_boundaries(_examples(ids, labels[:128]), [64], 32)
        model = _bag_of_words_model()
        result = finetune(model, train, epochs=3, learning_rate=1e-2, loss=loss, eval_fn=lambda m: {"score": scores.pop(0)},
                          model_dir=str(model_dir), verbose=0, callbacks=list(callbacks))
        return model, result

    return run


def test_a_run_stopped_before_its_best_weights_file_resumes_with_the_best_weights(sst2_dev, tmp_path):
    """The best epoch's weights file is written after its checkpoint. A run stopped between the two (here: the best
    epoch 2's file replaced by epoch 1's, as if never rewritten) resumes with epoch 2's weights from the checkpoint:
    it ends on the uninterrupted run's best weights, and rewrites the file with them."""
    import shutil

    run = _three_epochs_scored(sst2_dev)

    class KeepEpochOneFile(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                shutil.copy(tmp_path / "resumed" / "best.weights.h5", tmp_path / "epoch1.weights.h5")

    straight, straight_result = run(tmp_path / "straight", [0.1, 0.9, 0.5])
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed", [0.1, 0.9], [KeepEpochOneFile(), StopAfterEpoch(2)])
    shutil.copy(tmp_path / "epoch1.weights.h5", tmp_path / "resumed" / "best.weights.h5")  # the stale file
    resumed, resumed_result = run(tmp_path / "resumed", [0.5])
    assert resumed_result.best_epoch == straight_result.best_epoch == 2
    for a, b in zip(straight.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    from_file = _bag_of_words_model()
    from_file.load_weights(str(tmp_path / "resumed" / "best.weights.h5"))
    for a, b in zip(straight.get_weights(), from_file.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_a_best_weights_file_cut_short_or_removed_before_the_resume(sst2_dev, tmp_path, capsys):
    """The best epoch (1) is older than the checkpoint (2). Its weights file cut short (a copy that stopped half-way)
    was h5py's "Unable to synchronously open file (truncated file: ...)", naming no file; now one line that says what
    it holds and what to do. Removed, the run ended with epoch 1's scores as its best but epoch 3's weights; now it
    warns, and keeps the best of epochs 2 and 3: their weights, their scores, and a file of them."""
    import shutil

    run = _three_epochs_scored(sst2_dev)

    model_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run(model_dir, [0.9, 0.5], [StopAfterEpoch(2)])
    best = model_dir / "best.weights.h5"
    shutil.copy(best, tmp_path / "whole.weights.h5")
    best.write_bytes(best.read_bytes()[:3000])
    with pytest.raises(ValueError) as error:
        run(model_dir, [0.7])
    assert str(error.value).startswith(f"{best} cannot be read (Unable to synchronously open file (truncated file: ")
    assert str(error.value).endswith(
        "): it holds the weights of epoch 1, the best so far (score 0.9); put it back from a copy, or remove it (rm "
        f"{best}) and run the same command again, which then keeps the best of epochs 2 to the last")

    best.unlink()
    capsys.readouterr()
    model, result = run(model_dir, [0.7])
    assert f"warning: {best} is gone; it held the weights of epoch 1, the best so far (score 0.9): this run keeps the " \
           "best of epochs 2 to the last\n" in capsys.readouterr().err
    assert (result.best_epoch, result.best_metrics["score"]) == (3, 0.7)
    from_file = _bag_of_words_model()
    from_file.load_weights(str(best))
    for a, b in zip(model.get_weights(), from_file.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)

    # Epoch 2 (0.5) is the best of the rest when epoch 3 scores lower: the weights the checkpoint held.
    shutil.rmtree(model_dir)
    with pytest.raises(KeyboardInterrupt):
        run(model_dir, [0.9, 0.5], [StopAfterEpoch(2)])
    best.unlink()
    model, result = run(model_dir, [0.2])
    assert (result.best_epoch, result.best_metrics["score"]) == (2, 0.5)


def test_a_diverged_epoch_ends_the_run_in_one_line_and_is_not_saved(sst2_dev, tmp_path):
    """Before: a loss of nan (e.g. --learning_rate inf) trained on, and the recipe saved the nan weights as its
    result with exit status 0."""
    setup_finetuning(seed=0)
    sentences, labels = sst2_dev
    train = bucket_by_length(_examples(_word_ids(sentences[:64]), labels[:64]), [16, 32, 64], 32)
    model = _bag_of_words_model()
    model.compile(loss=lambda y, logits: keras.ops.log(-keras.ops.mean(keras.ops.abs(logits), axis=-1) - 1.0))
    with pytest.raises(ValueError) as error:
        finetune(model, train, epochs=2, learning_rate=2e-5, model_dir=str(tmp_path), seed=0, verbose=0)
    assert str(error.value) == (
        "the training loss of epoch 1 is nan: training diverged (learning_rate=2e-05), and nothing of this epoch is "
        "kept; train again with a lower learning rate, in a new model_dir (the same one resumes only with the same "
        "settings).")
    assert not os.path.exists(tmp_path / "checkpoints") or not [
        n for n in os.listdir(tmp_path / "checkpoints") if n.startswith("ckpt-")]
    with pytest.raises(ValueError) as error:
        finetune(model, train, epochs=2, learning_rate=float("inf"))
    assert str(error.value) == "`learning_rate` must be a finite number > 0, got inf."


def test_an_eval_fn_value_named_as_a_training_metric_keeps_the_training_one_as_train_name(sst2_dev):
    """Before: the dev "accuracy" of `eval_fn` replaced the compiled training "accuracy" in the progress bar, History
    and TensorBoard, and `best_metrics` mixed the two."""
    setup_finetuning(seed=0)
    sentences, labels = sst2_dev
    train = bucket_by_length(_examples(_word_ids(sentences[:64]), labels[:64]), [16, 32, 64], 32)
    model = _bag_of_words_model()
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    result = finetune(model, train, epochs=2, learning_rate=1e-3, eval_fn=lambda m: {"accuracy": 0.125}, seed=0,
                      verbose=0)
    assert result.history["accuracy"] == [0.125, 0.125]
    assert len(result.history["train_accuracy"]) == 2 and 0.125 not in result.history["train_accuracy"]
    assert result.best_metrics["accuracy"] == 0.125 and "train_accuracy" in result.best_metrics


def test_a_checkpoint_of_another_precision_is_refused_naming_mixed_precision(sst2_dev, tmp_path):
    """Before: a float32 run's checkpoint resumed under --mixed_precision bf16 without a word (its results then
    recorded bf16 for epochs that had run in float32)."""
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:64])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def run(mixed_precision, callbacks=()):
        setup_finetuning(seed=0, mixed_precision=mixed_precision)
        try:
            train = pad_to_boundaries(_examples(ids, labels[:64]), [64], 32)
            return finetune(_bag_of_words_model(), train, epochs=2, learning_rate=1e-2, loss=loss, seed=0,
                            model_dir=str(tmp_path), verbose=0, callbacks=list(callbacks))
        finally:
            keras.config.set_dtype_policy("float32")

    with pytest.raises(KeyboardInterrupt):
        run("none", callbacks=[StopAfterEpoch(1)])
    with pytest.raises(ValueError) as error:
        run("bf16")
    assert str(error.value) == (
        f"{tmp_path / 'checkpoints' / 'ckpt-000000001'} was written by a fine-tuning run with dtype_policy='float32', "
        "and this run has dtype_policy='mixed_bfloat16' (the precision the model computes in: --mixed_precision): run "
        f"the same command as before to resume it, or remove {tmp_path / 'checkpoints'} (or pass another model_dir) "
        "to start again")
    assert run("none").history["loss"]  # the same precision resumes


def test_a_changed_setting_of_the_runs_identity_is_named_before_the_steps_it_changed(sst2_dev, tmp_path):
    """Before: --sequence_length 64 -> 32 was refused as `steps_per_epoch=17 ... (the batch size, --batch_size, or
    the number of training examples changed)`: the length buckets had changed the batch count."""
    sentences, labels = sst2_dev
    ids = _word_ids(sentences[:96])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def run(sequence_length, batch_size, callbacks=()):
        setup_finetuning(seed=0)
        train = pad_to_boundaries(_examples(ids, labels[:96]), [64], batch_size)
        return finetune(_bag_of_words_model(), train, epochs=2, learning_rate=1e-2, loss=loss, seed=0,
                        model_dir=str(tmp_path), verbose=0, callbacks=list(callbacks),
                        run_identity={"sequence_length": sequence_length})

    with pytest.raises(KeyboardInterrupt):
        run(64, 32, callbacks=[StopAfterEpoch(1)])
    with pytest.raises(ValueError) as error:
        run(32, 16)
    # Every difference, in one line: the run's identity first, then the steps per epoch it (and the batch size)
    # changed. Before, the first alone, and a rerun for each of the others.
    assert str(error.value) == (
        f"{tmp_path / 'checkpoints' / 'ckpt-000000001'} was written by a fine-tuning run with sequence_length=64, "
        "and this run has sequence_length=32; with steps_per_epoch=3, and this run has steps_per_epoch=6 (the "
        "batches of an epoch: the batch size, --batch_size, or the number of training examples changed): run the "
        f"same command as before to resume it, or remove {tmp_path / 'checkpoints'} (or pass another model_dir) to "
        "start again")
