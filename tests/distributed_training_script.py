"""Subprocess body of the distribution tests (each mode needs a fresh process).

    python distributed_training_script.py MODE OUTPUT_JSON

MODE `mirrored`: 2 logical CPUs; 5 steps with MirroredStrategy and 5 with one
device, same global batches -> per-step losses of both.
MODE `multiworker`: one worker of a MultiWorkerMirroredStrategy (TF_CONFIG set
by the caller); 10 steps -> sha of weights and the weights' sum.
MODE `jax_data_parallel`: KERAS_BACKEND=jax with 2 host devices; DataParallel;
a few steps -> losses and the number of replicas.
MODE `jax_processes`: one of CLUSTER_NUM_PROCESSES JAX processes (CLUSTER_COORDINATOR, CLUSTER_PROCESS_ID),
`get_strategy("multiworker")`, each feeding its rows of 6 global batches of 8 -> its weights
(OUTPUT.npz); process 0 also trains one device on the whole global batches (OUTPUT.single.npz).
MODE `jax_pretrain`: one of 2 such processes: its shard of the bundled held-out text, then
`run_pretraining(--strategy multiworker)` 4 steps straight and 2 + a resume to 4 (under PRETRAIN_DIRS).
MODES `torch_processes`, `torch_pretrain`: the same two with KERAS_BACKEND=torch (torch.distributed over gloo).
MODE `finetune_processes`: one of 2 JAX or PyTorch processes, or TensorFlow workers (TF_CONFIG), running `finetune`
on its rows of 5 global batches of 8 for 2 epochs (model_dir FINETUNE_DIR) -> its last weights, dev logits, history
and optimizer steps (with FINETUNE_EXIT_AFTER_EPOCH=k the process exits with status 3 right after epoch k);
process 0 also fine-tunes alone (OUTPUT.single.npz, OUTPUT.single.dev.npy).
MODE `raw_fit_processes`: one of 2 JAX or PyTorch processes calling `BertClassifier.fit` on raw strings -> the
error it raises (type and message).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MODE, OUTPUT = sys.argv[1], sys.argv[2]

import numpy as np  # noqa: E402

if MODE == "mirrored":
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

keras.config.disable_traceback_filtering()

from keras_bert_impl.models.backbone import BertBackbone  # noqa: E402
from keras_bert_impl.models.pretrainer import BertPretrainer  # noqa: E402
from keras_bert_impl.training.optimizer import create_optimizer  # noqa: E402
from keras_bert_impl.training.strategy import check_global_batch_size, get_strategy  # noqa: E402
from pretraining_batches import make_batches  # noqa: E402

SHARED = os.environ["KERAS_BERT_IMPL_SHARED_DATA"]
TOKENIZER_JSON = os.environ["MINILM_TOKENIZER_JSON"]
GLOBAL_BATCH = 8


def build(strategy, steps, jit_compile=False, seed=1):
    keras.utils.set_random_seed(seed)
    with strategy.scope():
        backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
                                intermediate_dim=32, max_sequence_length=32, dropout=0.0)
        model = BertPretrainer(backbone)
        model.compile(optimizer=create_optimizer(1e-3, steps, 1), jit_compile=jit_compile)
    return model


def per_step_losses(model, data, steps):
    history = model.fit(data, epochs=steps, steps_per_epoch=1, verbose=0).history
    return history["loss"]


batches = make_batches(SHARED, TOKENIZER_JSON, num_examples=GLOBAL_BATCH * 10)


def join_cluster_and_take_rows(steps):
    """`get_strategy("multiworker")` from CLUSTER_* and this process's rows of `steps` global batches.

    Process p of n contributes rows [p * 8 / n, (p + 1) * 8 / n) of every global batch of 8; returns
    (strategy, index, local rows per batch, x, y, w, take) with `take` selecting this process's rows.
    """
    count, index = int(os.environ["CLUSTER_NUM_PROCESSES"]), int(os.environ["CLUSTER_PROCESS_ID"])
    strategy = get_strategy("multiworker", coordinator_address=os.environ["CLUSTER_COORDINATOR"],
                            num_processes=count, process_id=index)
    local = GLOBAL_BATCH // count
    x, y, w = BertPretrainer.split_features_labels(batches)
    rows = np.concatenate([np.arange(s * GLOBAL_BATCH + index * local, s * GLOBAL_BATCH + (index + 1) * local)
                           for s in range(steps)])
    return strategy, index, local, x, y, w, lambda tree: {k: v[rows] for k, v in tree.items()}

if MODE == "mirrored":
    import tensorflow as tf

    from keras_bert_impl.training.pretraining_inputs import split_features_labels

    dataset = tf.data.Dataset.from_tensor_slices(batches).batch(GLOBAL_BATCH, drop_remainder=True)
    dataset = dataset.map(split_features_labels)
    single = get_strategy("cpu")
    single_losses = per_step_losses(build(single, 5), dataset, 5)
    mirrored = get_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
    check_global_batch_size(GLOBAL_BATCH, mirrored.num_replicas_in_sync)
    mirrored_model = build(mirrored, 5)
    mirrored_losses = per_step_losses(mirrored_model, mirrored.experimental_distribute_dataset(dataset), 5)
    result = {"replicas": mirrored.num_replicas_in_sync, "single": single_losses, "mirrored": mirrored_losses}

    # The dropout masks of each replica (in a replica context, as in a training step), and of one device seeded
    # alike.
    keras.utils.set_random_seed(0)
    with mirrored.scope():
        layer = keras.layers.Dropout(0.5)
        layer.build((64,))
    masks = tf.function(lambda: mirrored.run(lambda: layer(tf.ones((64,)), training=True)))()
    result["replica_masks"] = [(v.numpy() > 0).tolist() for v in mirrored.experimental_local_results(masks)]
    keras.utils.set_random_seed(0)
    result["one_device_mask"] = (keras.ops.convert_to_numpy(
        keras.layers.Dropout(0.5)(tf.ones((64,)), training=True)) > 0).tolist()
elif MODE == "multiworker":
    import tensorflow as tf

    from keras_bert_impl.training.pretraining_inputs import split_features_labels

    strategy = get_strategy("multiworker")
    per_replica = check_global_batch_size(GLOBAL_BATCH, strategy.num_replicas_in_sync)

    def dataset_fn(context):
        data = tf.data.Dataset.from_tensor_slices(batches)
        data = data.shard(context.num_input_pipelines, context.input_pipeline_id)
        return data.batch(per_replica, drop_remainder=True).map(split_features_labels).repeat()

    model = build(strategy, 10)
    from keras_bert_impl.training.multiworker_patches import (
        build_before_distributed_fit,
        patch_multiworker_metric_reduction,
    )

    patch_multiworker_metric_reduction()

    x, y, w = BertPretrainer.split_features_labels({k: v[:per_replica] for k, v in batches.items()})
    build_before_distributed_fit(model, strategy, (x, y, w))
    losses = per_step_losses(model, strategy.distribute_datasets_from_function(dataset_fn), 10)
    weights = [np.asarray(v.numpy()) for v in model.trainable_variables]
    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    np.savez(OUTPUT + ".npz", *weights)
    result = {"replicas": strategy.num_replicas_in_sync, "task": task, "losses": losses}
elif MODE == "jax_data_parallel":
    import jax

    strategy = get_strategy("mirrored")
    x, y, w = BertPretrainer.split_features_labels(batches)
    # Compiled, as JAX users train. Eagerly, each op is its own two-device program, and XLA's CPU runtime can
    # start op B on one device while op A still waits for its all-reduce partner on the other: with the few
    # threads of a 2-core machine that deadlocks (seen in 1 run of 2-4; a rendezvous abort after 40 s).
    model = build(strategy, 6, jit_compile=True)
    history = model.fit(x, y, sample_weight=w, batch_size=GLOBAL_BATCH, epochs=3,
                        steps_per_epoch=2, verbose=0).history
    kernel = model.backbone.token_embedding.embeddings.value
    result = {
        "replicas": strategy.num_replicas_in_sync,
        "devices": len(jax.devices()),
        "losses": history["loss"],
        "distribution": type(keras.distribution.distribution()).__name__,
        "embedding_sharding_devices": len(kernel.sharding.device_set),
    }
elif MODE == "torch_processes":
    # One of CLUSTER_NUM_PROCESSES processes of a `--strategy multiworker` PyTorch job (torch.distributed, gloo).
    import torch.distributed as dist

    steps = 6
    strategy, index, local, x, y, w, take = join_cluster_and_take_rows(steps)
    model = build(strategy, steps, seed=1 + index)  # different starting weights: the broadcast must align them
    from keras_bert_impl.training import torch_processes

    torch_processes.broadcast_from_first_process(model.weights)
    history = model.fit(take(x), take(y), sample_weight=take(w), batch_size=local, epochs=1, shuffle=False,
                        verbose=0).history
    weights = [np.asarray(v.numpy()) for v in model.trainable_variables]
    np.savez(OUTPUT + ".npz", *weights)
    result = {"processes": dist.get_world_size(), "process": dist.get_rank(), "backend": dist.get_backend(),
              "replicas": strategy.num_replicas_in_sync, "loss": history["loss"]}
    if index == 0:
        # The reference: this process alone, no all-reduce partner, the same 6 global batches of 8.
        dist.destroy_process_group()
        single = build(get_strategy("cpu"), steps)
        n = steps * GLOBAL_BATCH
        single.fit({k: v[:n] for k, v in x.items()}, {k: v[:n] for k, v in y.items()},
                   sample_weight={k: v[:n] for k, v in w.items()}, batch_size=GLOBAL_BATCH, epochs=1,
                   shuffle=False, verbose=0)
        np.savez(OUTPUT + ".single.npz", *[np.asarray(v.numpy()) for v in single.trainable_variables])
elif MODE == "jax_processes":
    # One of CLUSTER_NUM_PROCESSES processes of a `--strategy multiworker` JAX job (jax.distributed over gloo).
    import time

    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    steps = 6
    strategy, index, local, x, y, w, take = join_cluster_and_take_rows(steps)
    model = build(strategy, steps, jit_compile=True)
    start = time.perf_counter()
    history = model.fit(take(x), take(y), sample_weight=take(w), batch_size=local, epochs=1, shuffle=False,
                        verbose=0).history
    seconds = time.perf_counter() - start
    weights = [np.asarray(v.value) for v in model.trainable_variables]
    np.savez(OUTPUT + ".npz", *weights)
    kernel = model.backbone.token_embedding.embeddings.value
    result = {"processes": jax.process_count(), "process": jax.process_index(), "devices": jax.device_count(),
              "local_devices": jax.local_device_count(), "replicas": strategy.num_replicas_in_sync,
              "embedding_sharding_devices": len(kernel.sharding.device_set), "loss": history["loss"],
              "fit_seconds": seconds}
    if index == 0:
        # The reference: this process alone, one device, no distribution, the same 6 global batches of 8.
        keras.distribution.set_distribution(None)
        single = build(get_strategy("cpu"), steps, jit_compile=True)
        n = steps * GLOBAL_BATCH
        single.fit({k: v[:n] for k, v in x.items()}, {k: v[:n] for k, v in y.items()},
                   sample_weight={k: v[:n] for k, v in w.items()}, batch_size=GLOBAL_BATCH, epochs=1,
                   shuffle=False, verbose=0)
        np.savez(OUTPUT + ".single.npz", *[np.asarray(v.value) for v in single.trainable_variables])
elif MODE in ("jax_pretrain", "torch_pretrain"):
    # One of 2 JAX or PyTorch processes running the pretraining recipe's `run_pretraining` with --strategy
    # multiworker: the process's shard of the held-out text (one pass), then 4 steps straight, then 2 steps + a
    # resume to 4.
    from keras_bert_impl.data.corpus import bundled_corpus
    from keras_bert_impl.data.pretraining import pretraining_dataset
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    count, index = int(os.environ["CLUSTER_NUM_PROCESSES"]), int(os.environ["CLUSTER_PROCESS_ID"])
    cluster = dict(coordinator_address=os.environ["CLUSTER_COORDINATOR"], num_processes=count, process_id=index)
    if MODE == "jax_pretrain":
        import jax

        from keras_bert_impl.training import jax_processes as processes

        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        processes.initialize_jax_processes(**cluster)
    else:
        from keras_bert_impl.training import torch_processes as processes

        processes.initialize_torch_processes(**cluster)
    paths = bundled_corpus()
    shard = pretraining_dataset(paths["valid"], BertTokenizer(paths["vocab"]), sequence_length=64,
                                max_predictions_per_seq=10, batch_size=1, nsp=False, shuffle=False, repeat=False,
                                short_seq_prob=0.0, seed=5, input_context=processes.input_context())
    examples = []
    for batch in shard.as_numpy_iterator():
        tokens = batch["token_ids"].copy()
        for r, w in zip(*np.nonzero(batch["mask_weights"])):
            tokens[r, batch["mask_positions"][r, w]] = batch["mask_ids"][r, w]
        examples.append(tokens[0, 1:batch["padding_mask"][0].sum() - 1].tolist())
    model_dirs = os.environ["PRETRAIN_DIRS"]
    common = dict(strategy="multiworker", train_files=[paths["train"]], vocab=paths["vocab"], global_batch_size=8,
                  sequence_length=32, max_predictions_per_seq=5, warmup_steps=1, checkpoint_every=2,
                  log_every=1000, verbose=0, dropout=0.1, **cluster)
    straight = run_pretraining(PretrainingConfig(model_dir=os.path.join(model_dirs, "straight"), num_steps=4, **common))
    first = run_pretraining(PretrainingConfig(model_dir=os.path.join(model_dirs, "resumed"), num_steps=2, **common))
    resumed = run_pretraining(PretrainingConfig(model_dir=os.path.join(model_dirs, "resumed"), num_steps=4, **common))
    for name, run in (("straight", straight), ("resumed", resumed)):
        np.savez(f"{OUTPUT}.{name}.npz", *[keras.ops.convert_to_numpy(v.value)
                                          for v in run["model"].trainable_variables])
    result = {"process": processes.process_index(), "processes": processes.process_count(),
              "replicas": straight["replicas"],
              "shard_examples": examples, "resumed_from_step": resumed["resumed_from_step"],
              "straight_loss": straight["history"]["loss"], "first_loss": first["history"]["loss"],
              "resumed_loss": resumed["history"]["loss"]}
    if MODE == "torch_pretrain":  # the masks unseeded dropout draws now (from torch's global generator)
        result["dropout_mask"] = (keras.ops.convert_to_numpy(
            keras.layers.Dropout(0.5)(keras.ops.ones((64,)), training=True)) > 0).tolist()
elif MODE == "finetune_processes":
    # One of 2 JAX or PyTorch processes (KERAS_BACKEND) running `finetune` with --strategy multiworker: a
    # classifier of sentence pairs (does the second sentence follow the first?) on real text, 2 epochs of 5 global
    # batches of 8, the dev accuracy after each epoch from `model.predict`; process 0 then runs one process alone.
    import shutil
    import tempfile

    import tensorflow as tf

    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.training.finetuning import finetune

    from keras_bert_impl.training.strategy import predicting_everywhere

    # The strategy first: TensorFlow's collectives must be set up before its first operation.
    if keras.backend.backend() == "tensorflow":  # a MultiWorkerMirroredStrategy worker (TF_CONFIG)
        strategy = get_strategy("multiworker")
        index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    else:
        count, index = int(os.environ["CLUSTER_NUM_PROCESSES"]), int(os.environ["CLUSTER_PROCESS_ID"])
        strategy = get_strategy("multiworker", coordinator_address=os.environ["CLUSTER_COORDINATOR"],
                                num_processes=count, process_id=index)
    def classifier(strategy):
        keras.utils.set_random_seed(3)
        with strategy.scope():
            backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
                                    intermediate_dim=32, max_sequence_length=32, dropout=0.0)
            return BertClassifier(backbone, num_classes=2, dropout=0.0)

    features = {k: batches[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    labels = batches["next_sentence_labels"].reshape(-1)
    train = tf.data.Dataset.from_tensor_slices(({k: v[:40] for k, v in features.items()}, labels[:40])).batch(8)
    dev = {k: v[40:] for k, v in features.items()}

    def accuracy(model):
        return {"accuracy": float((model.predict(dev, batch_size=16, verbose=0).argmax(-1) == labels[40:]).mean())}

    class ExitAfterEpoch(keras.callbacks.Callback):
        """A hard stop of the process (no cleanup) once epoch `FINETUNE_EXIT_AFTER_EPOCH` and its checkpoint are done."""

        def on_epoch_end(self, epoch, logs=None):
            if epoch + 1 == int(os.environ["FINETUNE_EXIT_AFTER_EPOCH"]):
                os._exit(3)

    class EpochsRun(keras.callbacks.Callback):
        """The epochs this launch trains (a resumed run skips the finished ones)."""

        epochs = []

        def on_epoch_begin(self, epoch, logs=None):
            self.epochs.append(epoch)

    def fine_tune(strategy, model_dir, callbacks=()):
        model = classifier(strategy)
        # The last epoch's weights (not the best epoch's), so that every step is compared.
        result = finetune(model, train, epochs=2, learning_rate=1e-3, eval_fn=accuracy, model_dir=model_dir,
                          strategy=strategy, verbose=0, tensorboard=False, restore_best_weights=False,
                          callbacks=list(callbacks))
        return model, result

    model_dir = os.environ["FINETUNE_DIR"]
    model, result = fine_tune(strategy, model_dir,
                              [EpochsRun()] + ([ExitAfterEpoch()] if os.environ.get("FINETUNE_EXIT_AFTER_EPOCH") else []))
    np.savez(OUTPUT + ".npz", *[keras.ops.convert_to_numpy(v.value) for v in model.trainable_variables])
    with predicting_everywhere(strategy):
        np.save(OUTPUT + ".dev.npy", model.predict(dev, batch_size=16, verbose=0))
    out = {"process": index, "epochs_run": EpochsRun.epochs, "history": result.history, "best_epoch": result.best_epoch,
           "best_weights_path": result.best_weights_path, "train_steps": result.train_steps,
           "optimizer_steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations))}
    if index == 0:
        # The reference: this process alone, one device, the same 5 global batches of 8.
        if keras.backend.backend() == "jax":
            keras.distribution.set_distribution(None)
        elif keras.backend.backend() == "torch":
            import torch.distributed as dist

            dist.destroy_process_group()
        alone = tempfile.mkdtemp()
        single, single_result = fine_tune(get_strategy("cpu"), alone)
        shutil.rmtree(alone)
        np.savez(OUTPUT + ".single.npz", *[keras.ops.convert_to_numpy(v.value) for v in single.trainable_variables])
        np.save(OUTPUT + ".single.dev.npy", single.predict(dev, batch_size=16, verbose=0))
        out["single_history"] = single_result.history
    result = out
elif MODE == "raw_fit_processes":
    # `fit` on raw strings in a job of 2 processes: refused in one line (each would train on all the data).
    from keras_bert_impl.models.classifier import BertClassifier

    strategy = get_strategy("multiworker", coordinator_address=os.environ["CLUSTER_COORDINATOR"],
                            num_processes=int(os.environ["CLUSTER_NUM_PROCESSES"]),
                            process_id=int(os.environ["CLUSTER_PROCESS_ID"]))
    with strategy.scope():
        model = BertClassifier.from_preset(os.environ["MINILM_PRESET_DIR"], num_classes=2, sequence_length=16)
    try:
        model.fit(["a fine film", "a dull film"], [1, 0], batch_size=2, verbose=0)
        result = {"error": None}
    except Exception as error:  # noqa: BLE001 - the test reads its type and message
        result = {"error": type(error).__name__, "message": str(error)}
else:
    raise SystemExit(f"unknown mode {MODE}")

with open(OUTPUT, "w") as f:
    json.dump(result, f)
