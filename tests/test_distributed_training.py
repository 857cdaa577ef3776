"""Real multi-device and multi-worker training: MirroredStrategy, MultiWorkerMirroredStrategy, JAX DataParallel,
several JAX processes and several PyTorch processes."""

import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "distributed_training_script.py")


def _env(data_slices, minilm_dir, **extra):
    env = dict(os.environ)
    env.update(
        KERAS_BERT_IMPL_SHARED_DATA=str(data_slices),
        MINILM_TOKENIZER_JSON=str(minilm_dir / "tokenizer.json"),
        KERAS_BACKEND="tensorflow",
        TF_CPP_MIN_LOG_LEVEL="2",
        CUDA_VISIBLE_DEVICES="",
    )
    env.update(extra)
    return env


# XLA's CPU collectives abort a process whose all-reduce partner thread has not arrived within 40 s. Eager
# (uncompiled) steps over two devices deadlocked that way in 1 run of 2-4 (each op is its own two-device
# program, and the few threads of a 2-core machine can run different ops on the two devices); the JAX run is
# therefore compiled, which ran 6 of 6. A starved thread on a busy machine is still retried once: a crash of
# the runtime, not a wrong result (a wrong result is never retried).
_XLA_RENDEZVOUS_TIMEOUT = "Termination timeout for `all reduce"


def _run(mode, tmp_path, env, timeout=300, retries=0):
    out = tmp_path / f"{mode}.json"
    for attempt in range(retries + 1):
        proc = subprocess.run([sys.executable, SCRIPT, mode, str(out)], env=env, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode == 0 or _XLA_RENDEZVOUS_TIMEOUT not in proc.stderr:
            break
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_mirrored_two_logical_cpus_matches_one_device(tmp_path, data_slices, minilm_dir):
    """`MirroredStrategy` over 2 logical CPUs: the losses of one device; and each replica draws dropout masks of its
    own (Keras 3 gave every replica the same ones: `training/replica_dropout.py`), replica 0 those of one device."""
    result = _run("mirrored", tmp_path, _env(data_slices, minilm_dir))
    assert result["replicas"] == 2
    np.testing.assert_allclose(result["mirrored"], result["single"], atol=1e-5, rtol=0)
    assert len(result["single"]) == 5 and np.all(np.isfinite(result["single"]))
    first, second = result["replica_masks"]
    assert first != second and first == result["one_device_mask"]
    assert 16 < sum(second) < 48  # a rate of 0.5 over 64 values


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_multiworker_two_processes_hold_equal_weights(tmp_path, data_slices, minilm_dir):
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
        env = _env(data_slices, minilm_dir, TF_CONFIG=tf_config)
        out = tmp_path / f"worker{index}.json"
        procs.append((out, subprocess.Popen([sys.executable, SCRIPT, "multiworker", str(out)], env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    results = []
    for out, proc in procs:
        try:
            _, stderr = proc.communicate(timeout=400)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, stderr[-3000:]
        results.append((json.loads(out.read_text()), np.load(str(out) + ".npz")))
    (r0, w0), (r1, w1) = results
    assert r0["replicas"] == r1["replicas"] == 2
    assert len(r0["losses"]) == 10 and all(np.isfinite(r0["losses"]))
    assert len(w0.files) == len(w1.files) > 0
    for name in w0.files:
        np.testing.assert_array_equal(w0[name], w1[name])


def test_jax_data_parallel_over_two_host_devices_trains(tmp_path, data_slices, minilm_dir):
    pytest.importorskip("jax")
    env = _env(data_slices, minilm_dir, KERAS_BACKEND="jax",
               XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    result = _run("jax_data_parallel", tmp_path, env, timeout=600, retries=1)
    assert result["replicas"] == 2 and result["devices"] == 2
    assert result["distribution"] == "DataParallel"
    assert result["embedding_sharding_devices"] == 2  # weights replicated on both devices
    assert all(np.isfinite(result["losses"])) and result["losses"][-1] < result["losses"][0]


def test_pretrain_recipe_refuses_eager_steps_over_several_jax_devices(tmp_path, minilm_dir):
    pytest.importorskip("jax")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    corpus = os.path.join(repo, "keras_bert_impl", "assets", "corpus")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2",
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    proc = subprocess.run(
        [sys.executable, os.path.join(repo, "recipes", "pretrain.py"), "--strategy", "mirrored",
         "--jit_compile", "false", "--vocab", str(minilm_dir / "vocab.txt"),
         "--train_files", os.path.join(corpus, "train.txt"), "--global_batch_size", "4",
         "--num_steps", "2", "--warmup_steps", "1", "--checkpoint_every", "2", "--model_dir", str(tmp_path / "run")],
        env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "--jit_compile false with 2 JAX devices" in proc.stderr, proc.stderr[-2000:]
    assert not os.path.exists(tmp_path / "run" / "run_config.json")


def _run_processes(mode, tmp_path, env, count=2, timeout=240, extra_args=()):
    """Starts `count` processes of one JAX or PyTorch job; returns their output paths once all succeeded."""
    coordinator = f"127.0.0.1:{_free_ports(1)[0]}"
    procs = []
    for index in range(count):
        out = tmp_path / f"{mode}{index}.json"
        process_env = dict(env, CLUSTER_COORDINATOR=coordinator, CLUSTER_NUM_PROCESSES=str(count),
                           CLUSTER_PROCESS_ID=str(index))
        procs.append((out, subprocess.Popen([sys.executable, SCRIPT, mode, str(out), *extra_args],
                                            env=process_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            text=True)))
    return _all_succeeded(procs, timeout)


def _all_succeeded(procs, timeout):
    """Waits for every `(output path, process)`; returns the paths once all exited 0 (kills the rest on failure)."""
    finished = []
    try:
        for out, proc in procs:
            _, stderr = proc.communicate(timeout=timeout)
            finished.append((out, proc.returncode, stderr))
    finally:
        for _, proc in procs:  # one process failing leaves the other waiting for its collectives: end it
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for out, returncode, stderr in finished:
        assert returncode == 0, stderr[-3000:]
    return [out for out, _, _ in finished]


@pytest.mark.slow
def test_jax_two_processes_end_with_equal_weights_equal_to_one_process(tmp_path, data_slices, minilm_dir):
    """`--strategy multiworker` on JAX: 2 processes x 1 CPU device (jax.distributed, gloo all-reduce).

    Each process feeds its 4 rows of every global batch of 8; after 6 compiled steps both hold the
    same weights, equal (<= 1e-5) to one process training one device on the whole global batches.
    """
    pytest.importorskip("jax")
    env = _env(data_slices, minilm_dir, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)  # one CPU device a process
    outs = _run_processes("jax_processes", tmp_path, env)
    results = [json.loads(out.read_text()) for out in outs]
    weights = [np.load(str(out) + ".npz") for out in outs]
    single = np.load(str(outs[0]) + ".single.npz")
    for index, result in enumerate(results):
        assert result["process"] == index and result["processes"] == 2
        assert result["devices"] == 2 and result["local_devices"] == 1 and result["replicas"] == 2
        assert result["embedding_sharding_devices"] == 2  # the weights live on both processes' devices
    assert results[0]["loss"] == results[1]["loss"] and np.isfinite(results[0]["loss"]).all()
    assert len(weights[0].files) == len(weights[1].files) == len(single.files) > 20
    for name in weights[0].files:
        np.testing.assert_array_equal(weights[0][name], weights[1][name])
        np.testing.assert_allclose(weights[0][name], single[name], atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_two_processes_shard_the_data_and_resume_the_pretraining_run_exactly(backend, tmp_path, data_slices,
                                                                             minilm_dir):
    """`run_pretraining(strategy="multiworker")` on 2 JAX or 2 PyTorch processes (the recipe's path).

    Each process reads a disjoint shard of the held-out text (`{jax,torch}_processes.input_context()`, the TF
    `InputContext` sharding) and the two shards cover it once; process 0 alone writes the checkpoints
    and a run of 2 steps resumed to 4 ends with the weights of 4 steps straight, in both processes, with
    dropout on. PyTorch's processes draw dropout masks of their own (they drew the same ones, seeded alike), and
    the checkpoint holds each process's generator, so the resumed masks are the uninterrupted run's.
    """
    pytest.importorskip(backend)
    from test_pretraining_data import TokenIndex, document_tokens

    from keras_bert_impl.data.corpus import bundled_corpus
    from keras_bert_impl.text.tokenizer import BertTokenizer

    env = _env(data_slices, minilm_dir, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", PRETRAIN_DIRS=str(tmp_path))
    env.pop("XLA_FLAGS", None)
    outs = _run_processes(f"{backend}_pretrain", tmp_path, env, timeout=400)
    results = [json.loads(out.read_text()) for out in outs]

    paths = bundled_corpus()
    documents = document_tokens(paths["valid"], BertTokenizer(paths["vocab"], lowercase=True))
    index = TokenIndex(documents)
    shards = []
    for result in results:
        found, tokens = set(), 0
        for example in result["shard_examples"]:
            tokens += len(example)
            if len(example) >= 30:
                hits = {d for d, _ in index.find(np.asarray(example, np.int32))}
                assert len(hits) == 1
                found |= hits
        shards.append((found, tokens))
    (docs0, tokens0), (docs1, tokens1) = shards
    assert docs0 and docs1 and not docs0 & docs1
    assert docs0 | docs1 == set(range(len(documents)))
    assert tokens0 + tokens1 == sum(len(d) for d in documents)  # every token once per epoch

    assert [r["process"] for r in results] == [0, 1] and all(r["replicas"] == 2 for r in results)
    assert results[0]["resumed_from_step"] == results[1]["resumed_from_step"] == 2
    assert sorted(os.listdir(tmp_path / "resumed" / "checkpoints")) == ["ckpt-000000002", "ckpt-000000004"]
    assert os.path.isdir(tmp_path / "straight" / "logs" / "non_chief_workers")  # process 1 writes only its logs
    if backend == "jax":  # one global loss; PyTorch's processes each report the loss of their own rows
        assert results[0]["straight_loss"] == results[1]["straight_loss"]
    else:  # each process's own dropout stream
        assert results[0]["dropout_mask"] != results[1]["dropout_mask"]
    np.testing.assert_allclose(results[0]["first_loss"] + results[0]["resumed_loss"], results[0]["straight_loss"],
                               atol=1e-5, rtol=0)
    weights = {(p, name): np.load(f"{out}.{name}.npz") for p, out in enumerate(outs) for name in ("straight", "resumed")}
    for key in weights[0, "straight"].files:
        for other in ((1, "straight"), (0, "resumed"), (1, "resumed")):
            np.testing.assert_allclose(weights[other][key], weights[0, "straight"][key], atol=1e-6, rtol=0)


@pytest.mark.slow
def test_tf_multiworker_pretrain_recipe_has_one_writer(tmp_path, minilm_dir):
    """`recipes/pretrain.py --strategy multiworker` on 2 TensorFlow workers (TF_CONFIG, one shared model_dir).

    Keras calls callbacks outside `strategy.scope()`, where every worker used to look like the chief, so both
    wrote checkpoints, TensorBoard logs and the export into the same directory. Now worker 0 writes them and
    worker 1 only its own logs under logs/non_chief_workers, and says so instead of naming an export.
    """
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    corpus = os.path.join(repo, "keras_bert_impl", "assets", "corpus")
    config = tmp_path / "micro_bert.json"
    config.write_text(json.dumps({"num_layers": 1, "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32,
                                  "max_sequence_length": 64}))
    model_dir = tmp_path / "run"
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
        env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                   TF_CONFIG=tf_config)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(repo, "recipes", "pretrain.py"), "--strategy", "multiworker",
             "--config", str(config), "--vocab", str(minilm_dir / "vocab.txt"),
             "--train_files", os.path.join(corpus, "train.txt"), "--validation_files", os.path.join(corpus, "valid.txt"),
             "--sequence_length", "32", "--max_predictions_per_seq", "5", "--global_batch_size", "4",
             "--num_steps", "4", "--warmup_steps", "1", "--checkpoint_every", "2", "--validation_steps", "1",
             "--log_every", "1", "--verbose", "0", "--model_dir", str(model_dir)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=400))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for proc, (stdout, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stderr[-3000:]
    assert "Exported backbone:" in outputs[0][0] and "Held-out MLM accuracy" in outputs[0][0]
    assert "Exported backbone:" not in outputs[1][0] and "the chief writes" in outputs[1][0], outputs[1][0]
    assert sorted(os.listdir(model_dir / "checkpoints")) == ["ckpt-000000002", "ckpt-000000004"]
    assert os.path.exists(model_dir / "export" / "config.json")
    assert os.path.isdir(model_dir / "logs" / "non_chief_workers")  # worker 1's own logs, apart from the chief's


def test_torch_two_processes_end_with_equal_weights_equal_to_one_process(tmp_path, data_slices, minilm_dir):
    """`--strategy multiworker` on PyTorch: 2 processes (torch.distributed over gloo, the optimizer's all-reduce).

    The two start from different weights (seeds 1 and 2) and process 0's are broadcast; each feeds its 4 rows of
    every global batch of 8. After 6 steps both hold the same weights, equal (<= 1e-5) to one process training on
    the whole global batches from seed 1.
    """
    pytest.importorskip("torch")
    env = _env(data_slices, minilm_dir, KERAS_BACKEND="torch")
    outs = _run_processes("torch_processes", tmp_path, env)
    results = [json.loads(out.read_text()) for out in outs]
    weights = [np.load(str(out) + ".npz") for out in outs]
    single = np.load(str(outs[0]) + ".single.npz")
    for index, result in enumerate(results):
        assert result["process"] == index and result["processes"] == 2 == result["replicas"]
        assert result["backend"] == "gloo"
    assert results[0]["loss"] != results[1]["loss"]  # each process's loss is the mean over its own rows
    assert len(weights[0].files) == len(weights[1].files) == len(single.files) > 20
    for name in weights[0].files:
        np.testing.assert_allclose(weights[0][name], weights[1][name], atol=1e-6, rtol=0)
        np.testing.assert_allclose(weights[0][name], single[name], atol=1e-5, rtol=0)


def _recipe_processes(backend, model_dir, num_steps, port, log_dir):
    """Starts `recipes/pretrain.py --strategy multiworker` as 2 processes of one job (the cluster flags)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    env.pop("XLA_FLAGS", None)
    procs = []
    for index in range(2):
        log = open(log_dir / f"{backend}_{num_steps}_{index}.log", "w+")
        procs.append((subprocess.Popen(
            [sys.executable, os.path.join(repo, "recipes", "pretrain.py"), "--strategy", "multiworker",
             "--coordinator_address", f"127.0.0.1:{port}", "--num_processes", "2", "--process_id", str(index),
             "--global_batch_size", "16", "--num_steps", str(num_steps), "--warmup_steps", "2",
             "--checkpoint_every", "5", "--log_every", "5", "--validation_steps", "1", "--verbose", "0",
             "--model_dir", str(model_dir)],
            env=env, stdout=log, stderr=subprocess.STDOUT, text=True), log))
    return procs


def _finish(procs, timeout):
    try:
        codes = [proc.wait(timeout=timeout) for proc, _ in procs]
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    logs = []
    for _, log in procs:
        log.seek(0)
        logs.append(log.read())
        log.close()
    return codes, logs


@pytest.mark.slow
@pytest.mark.parametrize("backend, runtime", [("jax", "JAX"), ("torch", "PyTorch")])
def test_a_killed_process_stops_the_others_in_one_line_and_the_restart_resumes(backend, runtime, tmp_path):
    """`recipes/pretrain.py --strategy multiworker`, 2 processes; process 1 is killed (SIGKILL) after step 10.

    Process 0 leaves within seconds with one line that names the checkpoint to resume from (not a traceback,
    not a hang in the all-reduce, not JAX's abort at exit), and the same command on both processes resumes
    there and finishes the run.
    """
    pytest.importorskip(backend)
    model_dir = tmp_path / "run"
    procs = _recipe_processes(backend, model_dir, 200, _free_ports(1)[0], tmp_path)
    try:
        deadline = time.time() + 300
        while not (model_dir / "checkpoints" / "ckpt-000000010").is_dir():
            assert time.time() < deadline and procs[0][0].poll() is None, "the run did not reach step 10"
            time.sleep(0.5)
        procs[1][0].kill()
    finally:
        codes, logs = _finish(procs, timeout=120)
    assert codes[0] == 2, logs[0][-3000:]
    last = logs[0].strip().splitlines()[-1]
    assert re.fullmatch(
        rf"error: --strategy multiworker on {runtime}: process 0 of 2 lost the others during training \(.*"
        rf"(Connection reset by peer|Connection closed by peer).*\); restart the same command on every process: the "
        rf"run resumes from {re.escape(str(model_dir))}/checkpoints/ckpt-0000000[0-9]0", last), last
    resumed_from = int(last[-9:])

    codes, logs = _finish(_recipe_processes(backend, model_dir, resumed_from + 5, _free_ports(1)[0], tmp_path),
                          timeout=300)
    assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert f"Resumed from {model_dir}/checkpoints/ckpt-{resumed_from:09d} at step {resumed_from}." in logs[0]
    assert (model_dir / "checkpoints" / f"ckpt-{resumed_from + 5:09d}").is_dir()
    assert "Exported backbone:" in logs[0] and "the chief writes" in logs[1]


def _tensorflow_workers(mode, tmp_path, env, timeout=240):
    """Starts 2 MultiWorkerMirroredStrategy workers (TF_CONFIG) of `mode`; returns their output paths."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    procs = []
    for index in range(2):
        out = tmp_path / f"{mode}{index}.json"
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        procs.append((out, subprocess.Popen([sys.executable, SCRIPT, mode, str(out)],
                                            env=dict(env, TF_CONFIG=json.dumps(config)), stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)))
    return _all_succeeded(procs, timeout)


def _killed_after_first_epoch(backend, tmp_path, env):
    """Runs the 2-process `finetune_processes` job until both processes exit hard right after epoch 1."""
    env = dict(env, FINETUNE_EXIT_AFTER_EPOCH="1")
    if backend == "tensorflow":
        workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
        configs = [{"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}} for i in range(2)]
        envs = [dict(env, TF_CONFIG=json.dumps(config)) for config in configs]
    else:
        coordinator = f"127.0.0.1:{_free_ports(1)[0]}"
        envs = [dict(env, CLUSTER_COORDINATOR=coordinator, CLUSTER_NUM_PROCESSES="2", CLUSTER_PROCESS_ID=str(i))
                for i in range(2)]
    procs = [subprocess.Popen([sys.executable, SCRIPT, "finetune_processes", str(tmp_path / f"killed{i}.json")],
                              env=envs[i], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        outputs = [proc.communicate(timeout=240) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert [proc.returncode for proc in procs] == [3, 3], outputs[0][1][-3000:] + outputs[1][1][-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_two_processes_fine_tune_like_one_process_with_one_writer_also_after_a_kill(backend, tmp_path, data_slices,
                                                                                   minilm_dir):
    """`finetune` with `--strategy multiworker`: 2 TensorFlow workers, JAX or PyTorch processes, a pair classifier.

    Each feeds its 4 rows of every global batch of 8 and scores the whole dev set after each epoch. Both processes
    are first killed (a hard exit, no cleanup) right after epoch 1; the same job started again resumes from process
    0's checkpoint in the shared model_dir. Both then end with the last epoch's weights (<= 1e-5), the dev logits,
    the losses, the optimizer steps and the dev accuracies of one process trained alone and uninterrupted on the
    same global batches, and only process 0 wrote `best.weights.h5` into the shared model_dir, whose checkpoints
    are gone once the run is finished, as is process 1's private folder of its own best weights (the killed run's
    stays: nothing runs at a hard exit).
    """
    pytest.importorskip(backend)
    model_dir, temporary = tmp_path / "finetuned", tmp_path / "tmp"
    temporary.mkdir()
    env = _env(data_slices, minilm_dir, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", FINETUNE_DIR=str(model_dir),
               TMPDIR=str(temporary))
    _killed_after_first_epoch(backend, tmp_path, env)
    assert sorted(os.listdir(model_dir / "checkpoints")) == ["ckpt-000000001"]  # process 0's, once
    private_folders = sorted(temporary.glob("keras_bert_impl_process*"))
    assert [folder.name[:len("keras_bert_impl_process1_")] for folder in private_folders] == [
        "keras_bert_impl_process1_"]  # the killed run's
    if backend == "tensorflow":
        outs = _tensorflow_workers("finetune_processes", tmp_path, env)
    else:
        outs = _run_processes("finetune_processes", tmp_path, env)
    results = [json.loads(out.read_text()) for out in outs]
    assert results[0]["epochs_run"] == results[1]["epochs_run"] == [1]  # epoch 1 was not trained again
    weights = [np.load(str(out) + ".npz") for out in outs]
    single = np.load(str(outs[0]) + ".single.npz")
    assert results[0]["train_steps"] == results[1]["train_steps"] == 5
    # 2 epochs of 5 steps: no extra step at an epoch's end (TensorFlow workers once ran an empty one, which moved the
    # learning-rate schedule by a step).
    assert results[0]["optimizer_steps"] == results[1]["optimizer_steps"] == 10
    assert results[0]["history"]["accuracy"] == results[1]["history"]["accuracy"]  # the same dev scores
    np.testing.assert_allclose(results[0]["history"]["accuracy"], results[0]["single_history"]["accuracy"])
    # JAX's progress shows the global batch's loss, PyTorch's each process's own rows': their mean is the global one.
    # Epoch 1's values come from process 0's checkpoint: the same on both (on PyTorch, process 0's own rows' loss).
    losses, single_losses = [r["history"]["loss"] for r in results], results[0]["single_history"]["loss"]
    assert losses[0][0] == losses[1][0]
    if backend == "torch":  # each process's loss is the mean over its own 4 rows of each batch
        assert losses[0][1] != losses[1][1]
    else:
        np.testing.assert_allclose(losses[0][0], single_losses[0], atol=1e-5)
    np.testing.assert_allclose(np.mean([loss[1:] for loss in losses], axis=0), single_losses[1:], atol=1e-5)
    single_logits = np.load(str(outs[0]) + ".single.dev.npy")
    for out in outs:
        np.testing.assert_allclose(np.load(str(out) + ".dev.npy"), single_logits, atol=1e-5, rtol=0)
    assert len(weights[0].files) == len(single.files) > 10
    for name in weights[0].files:
        np.testing.assert_allclose(weights[0][name], weights[1][name], atol=1e-6, rtol=0)
        np.testing.assert_allclose(weights[0][name], single[name], atol=1e-5, rtol=0)
    assert results[0]["best_weights_path"] == str(model_dir / "best.weights.h5")
    assert results[1]["best_weights_path"] is None  # process 0 alone writes files
    assert sorted(temporary.glob("keras_bert_impl_process*")) == private_folders  # the finished run's is gone
    assert sorted(os.listdir(model_dir)) == [".run.lock", "best.weights.h5"]  # the finished run removed its checkpoints
    assert results[0]["history"]["accuracy"][:1] == results[0]["single_history"]["accuracy"][:1]  # epoch 1, resumed


def _recipe_on_two_processes(recipe, args, backend, tmp_path, timeout=400):
    """Runs `recipes/<recipe> <args> --strategy multiworker` as 2 processes (TF_CONFIG on TensorFlow, the cluster
    flags on JAX and PyTorch); returns each one's result, the JSON of the last line of its stdout, once both exit 0.

    (Not the last line of a log merging stderr: the runtimes log there also after the result, e.g. a TensorFlow
    worker whose chief has already exited logs the failed heartbeat.)
    """
    codes, logs = _finish(_start_recipe_processes(recipe, args, backend, tmp_path), timeout=timeout)
    assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    return [json.loads((tmp_path / f"{index}.out").read_text().strip().splitlines()[-1]) for index in range(2)]


def _start_recipe_processes(recipe, args, backend, tmp_path):
    """Starts the 2 processes of `_recipe_on_two_processes`; returns `[(process, stderr log)]` (stdout: `<i>.out`)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    ports = _free_ports(2)
    procs = []
    for index in range(2):
        stdout, log = open(tmp_path / f"{index}.out", "w+"), open(tmp_path / f"{index}.log", "w+")
        if backend == "tensorflow":
            cluster = []
            workers = [f"127.0.0.1:{port}" for port in ports]
            env = dict(env, TF_CONFIG=json.dumps({"cluster": {"worker": workers},
                                                  "task": {"type": "worker", "index": index}}))
        else:
            cluster = ["--coordinator_address", f"127.0.0.1:{ports[0]}", "--num_processes", "2", "--process_id",
                       str(index)]
        procs.append((subprocess.Popen(
            [sys.executable, os.path.join(repo, "recipes", recipe), *map(str, args), "--strategy", "multiworker",
             *cluster], env=env, stdout=stdout, stderr=log, text=True), log))
    return procs


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_glue_recipe_fine_tunes_across_two_processes_with_one_writer(backend, tmp_path, shared_data):
    """`recipes/finetune_glue.py --strategy multiworker`, 2 processes, the real RTE files' first 40 examples of each
    split.

    Both print the same dev accuracy; process 0 alone writes the model_dir (results, best weights, model, logs,
    the submission file), and process 1's private folder is gone when it exits.
    """
    pytest.importorskip(backend)
    from test_finetune_glue_recipe import _slice_task

    data_dir = _slice_task(shared_data / "glue", tmp_path, "RTE", 41)
    model_dir = tmp_path / "rte"
    lines = _recipe_on_two_processes(
        "finetune_glue.py", ["--task", "rte", "--data_dir", data_dir, "--model_dir", model_dir, "--max_train_samples", 24,
                             "--batch_size", 8, "--sequence_length", 32, "--epochs", 1], backend, tmp_path)
    assert lines[0]["accuracy"] == lines[1]["accuracy"] and lines[0]["best_epoch"] == 1
    assert lines[0]["submission_files"] == [str(model_dir / "submission" / "RTE.tsv")]
    private = os.path.dirname(os.path.dirname(lines[1]["submission_files"][0]))
    assert not private.startswith(str(model_dir)) and not os.path.exists(private)
    assert sorted(os.listdir(model_dir)) == [".run.lock", "best.weights.h5", "dev_results.json", "logs", "model.keras",
                                            "submission"]
    results = json.loads((model_dir / "dev_results.json").read_text())
    assert results["best"]["accuracy"] == lines[0]["accuracy"] and results["config"]["strategy"] == "multiworker"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_classifier_recipe_fine_tunes_your_table_across_two_processes_with_one_writer(backend, tmp_path,
                                                                                      shared_data):
    """`recipes/finetune_classifier.py --strategy multiworker` (your own CSV, raw strings), 2 processes, on CSV files
    of the real SST-2 rows: both print the same dev scores, and process 0 alone writes the model_dir."""
    pytest.importorskip(backend)
    from test_finetune_classifier_recipe import _glue_rows, _write_csv

    glue = shared_data / "glue" / "SST-2"
    train = _write_csv(tmp_path / "train.csv", _glue_rows(glue / "train.tsv", 40))
    dev = _write_csv(tmp_path / "dev.csv", _glue_rows(glue / "dev.tsv", 24))
    model_dir = tmp_path / "sst2"
    lines = _recipe_on_two_processes(
        "finetune_classifier.py", ["--train_file", train, "--validation_file", dev, "--test_file", dev,
                                   "--text_column", "text", "--label_column", "label", "--output_dir", model_dir,
                                   "--batch_size", 8, "--sequence_length", 32, "--epochs", 1], backend, tmp_path)
    assert lines[0] == lines[1] and set(lines[0]) == {"accuracy", "macro_f1", "test_predictions"}
    assert lines[0]["test_predictions"] == str(model_dir / "test_predictions.tsv")  # the job's file, process 0's
    if backend == "torch":  # each process's progress line shows its own rows' loss and accuracy: a real split
        progress = [(tmp_path / f"{index}.out").read_text().splitlines()[0] for index in range(2)]
        assert "loss: " in progress[0] and progress[0] != progress[1]
    assert sorted(os.listdir(model_dir)) == [".run.lock", "best.weights.h5", "dev_results.json", "logs", "model.keras",
                                             "test_predictions.tsv"]  # (best.weights.h5: the best epoch's)
    results = json.loads((model_dir / "dev_results.json").read_text())
    assert results["accuracy"] == lines[0]["accuracy"] and results["strategy"] == "multiworker"
    assert results["train_examples"] == 40 and results["validation_examples"] == results["test_examples"] == 24


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_fit_on_raw_strings_in_a_job_of_two_processes_is_refused_in_one_line(backend, tmp_path, data_slices,
                                                                             minilm_dir):
    """`BertClassifier.fit(texts, labels)` in each of 2 joined JAX or PyTorch processes would train every process on
    all the data (PyTorch: two different models): both refuse, naming `finetune` and the recipe.

    The script sets no seed before building the model: on JAX, joining the processes seeds them alike (an unseeded
    dropout generator used to differ between processes and failed JAX's equal-variables check).
    """
    pytest.importorskip(backend)
    env = _env(data_slices, minilm_dir, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", MINILM_PRESET_DIR=str(minilm_dir))
    runtime = {"jax": "JAX", "torch": "PyTorch"}[backend]
    for out in _run_processes("raw_fit_processes", tmp_path, env):
        result = json.loads(out.read_text())
        assert result["error"] == "RuntimeError" and "\n" not in result["message"]
        assert result["message"].startswith(f"BertClassifier.fit on raw strings trains one process, but this is one "
                                            f"of 2 {runtime} processes, each of which would train on all the data")
        assert "finetune(model, model.preprocessor.make_dataset(" in result["message"]
        assert "recipes/finetune_classifier.py --strategy multiworker" in result["message"]


@pytest.mark.slow
def test_a_glue_recipe_killed_on_two_processes_resumes_to_the_uninterrupted_scores(tmp_path, shared_data):
    """`recipes/finetune_glue.py --strategy multiworker` on 2 PyTorch processes (torchrun-style cluster flags), the
    first 24 RTE training examples, 3 epochs: process 1 killed (SIGKILL) once process 0 has written its first
    epoch's checkpoint; process 0 then stops with status 2 and one line naming that checkpoint. The same two commands
    again both resume from it ("Resuming from ...") and end with the history, best epoch and dev accuracy of the job
    that was never interrupted; no checkpoint is left behind."""
    pytest.importorskip("torch")
    from test_finetune_glue_recipe import _slice_task

    data_dir = _slice_task(shared_data / "glue", tmp_path, "RTE", 41)

    def flags(model_dir):
        return ["--task", "rte", "--data_dir", data_dir, "--model_dir", model_dir, "--max_train_samples", 24,
                "--batch_size", 8, "--sequence_length", 32, "--epochs", 3, "--seed", 1, "--no_predict_test"]

    (tmp_path / "straight").mkdir()
    straight = _recipe_on_two_processes("finetune_glue.py", flags(tmp_path / "rte_straight"), "torch",
                                        tmp_path / "straight")
    model_dir, checkpoints = tmp_path / "rte", tmp_path / "rte" / "checkpoints"
    (tmp_path / "killed").mkdir()
    procs = _start_recipe_processes("finetune_glue.py", flags(model_dir), "torch", tmp_path / "killed")
    try:
        deadline = time.time() + 300
        while not (checkpoints.is_dir() and any(p.name.startswith("ckpt-") for p in checkpoints.iterdir())):
            assert all(p.poll() is None for p, _ in procs) and time.time() < deadline, "no checkpoint was written"
            time.sleep(0.05)
        procs[1][0].kill()
        code = procs[0][0].wait(timeout=120)  # process 0 is left behind: it must stop by itself
    finally:
        _finish(procs, timeout=60)
    done = sorted(p.name for p in checkpoints.iterdir() if p.name.startswith("ckpt-"))
    assert done and done[-1] in ("ckpt-000000001", "ckpt-000000002")  # killed before the end
    log = (tmp_path / "killed" / "0.log").read_text()
    lines = [line for line in log.splitlines() if "lost the others" in line]
    assert code == 2 and len(lines) == 1, log[-3000:]
    assert re.fullmatch(r"error: --strategy multiworker on PyTorch: process 0 of 2 lost the others during training "
                        r"\([^)]*\); restart the same command on every process: the run resumes from "
                        + re.escape(str(checkpoints / done[-1])), lines[0]), lines[0]
    assert "Traceback" not in log, log[-3000:]

    (tmp_path / "resumed").mkdir()
    resumed = _recipe_on_two_processes("finetune_glue.py", flags(model_dir), "torch", tmp_path / "resumed")
    for index in range(2):
        log = (tmp_path / "resumed" / f"{index}.log").read_text()
        assert f"Resuming from {checkpoints / done[-1]}: {int(done[-1][5:])} epoch(s) done" in log, log[-3000:]
    results = json.load(open(model_dir / "dev_results.json"))
    expected = json.load(open(tmp_path / "rte_straight" / "dev_results.json"))
    for ours, reference in zip(resumed, straight):
        assert ours["accuracy"] == pytest.approx(reference["accuracy"]), (results["history"], expected["history"])
        assert ours["best_epoch"] == reference["best_epoch"]
    for key in ("accuracy", "loss"):
        np.testing.assert_allclose(results["history"][key], expected["history"][key], rtol=1e-4, err_msg=key)
    assert not checkpoints.exists()


def _on_two_jax_host_devices(source, tmp_path, minilm_dir):
    """Runs the script `source` (argument: the MiniLM directory) under JAX on two CPU host devices; returns the
    JSON it prints after "RESULT "."""
    pytest.importorskip("jax")
    script = tmp_path / "two_devices.py"
    script.write_text(source)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2",
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    proc = subprocess.run([sys.executable, str(script), str(minilm_dir)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RESULT ", 1)[1])


DATA_PARALLEL_PREDICTIONS = r'''
import json, sys
import keras, numpy as np
import keras_bert_impl as k
keras.distribution.set_distribution(keras.distribution.DataParallel())
keras.utils.set_random_seed(0)
backbone = k.BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                          max_sequence_length=64)
preprocessor = k.BertClassifierPreprocessor.from_preset(sys.argv[1], sequence_length=16)
classifier = k.BertClassifier(backbone, num_classes=2, preprocessor=preprocessor)
texts = ["I loved it", "dull", "a fine film"]
result = {"one": np.asarray(classifier.predict(texts[:1], verbose=0)).tolist(),
          "three": np.asarray(classifier.predict(texts, verbose=0)).tolist(),
          "features": np.asarray(classifier.predict({n: np.asarray(v) for n, v in preprocessor(texts).items()},
                                                    verbose=0)).tolist(),
          "label": classifier.predict_labels("I loved it"),
          "on_batch": np.asarray(classifier.predict_on_batch(texts[:1])).tolist(),
          "trained": classifier.train_on_batch(texts[:1], [1], return_dict=True)["loss"]}
errors = []
for call in (lambda: classifier.fit(texts, [1, 0, 1], batch_size=3, verbose=0),
             lambda: classifier.predict(texts, batch_size=1, verbose=0)):
    try:
        call()
    except ValueError as error:
        errors.append(str(error))
result["errors"] = errors
print("RESULT " + json.dumps(result))
'''


def test_jax_data_parallel_predicts_fewer_texts_than_devices_and_names_an_unsplittable_batch(tmp_path, minilm_dir):
    # From the JAX user's audit. Before: predicting on one text over two devices stopped in JAX's IndivisibleError
    # ("implies that array axis 0 is partitioned 2 times, but the dimension size is 1"), in predict_labels, encode,
    # predict_entities and answer alike; batch_size=3 over two devices, the same.
    result = _on_two_jax_host_devices(DATA_PARALLEL_PREDICTIONS, tmp_path, minilm_dir)
    np.testing.assert_allclose(result["one"], result["three"][:1], atol=1e-5)
    np.testing.assert_allclose(result["features"], result["three"], atol=1e-5)
    assert result["label"] in (0, 1)
    np.testing.assert_allclose(result["on_batch"], result["three"][:1], atol=1e-5)  # (train_on_batch: after it)
    assert np.isfinite(result["trained"])
    assert result["errors"] == [
        f"BertClassifier.{method}: batch_size={size} does not split among the 2 devices of the distribution in effect "
        "(DataParallel): give a multiple of 2." for method, size in (("fit", 3), ("predict", 1))]


MODEL_PARALLEL = r'''
import json, sys
import keras, numpy as np
import keras_bert_impl as k
texts = ["I loved it", "dull", "a fine film", "bad"]
def build():
    keras.utils.set_random_seed(0)
    backbone = k.BertBackbone(vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                              max_sequence_length=64)
    return k.BertClassifier(backbone, num_classes=2,
                            preprocessor=k.BertClassifierPreprocessor.from_preset(sys.argv[1], sequence_length=16))
single = build()
expected = single.predict(texts, verbose=0)
mesh = keras.distribution.DeviceMesh((1, 2), ["batch", "model"])
errors = []
try:
    k.BertBackbone.get_layout_map(keras.distribution.DeviceMesh((2,), ["data"]))
except ValueError as error:
    errors.append(str(error))
keras.distribution.set_distribution(
    keras.distribution.ModelParallel(layout_map=k.BertBackbone.get_layout_map(mesh), batch_dim_name="batch"))
model = build()
model.set_weights(single.get_weights())
split = sorted(v.path for v in model.weights if not v.value.sharding.is_fully_replicated)
difference = float(np.abs(model.predict(texts, verbose=0) - expected).max())
history = model.fit(texts, [1, 0, 1, 0], batch_size=4, verbose=0).history
print("RESULT " + json.dumps({"difference": difference, "split": split, "loss": history["loss"][0],
                              "errors": errors}))
'''


def test_jax_model_parallel_with_the_backbones_layout_map_predicts_as_one_device(tmp_path, minilm_dir):
    # BertBackbone.get_layout_map (keras-hub's name): the encoder's matrices split over a mesh's model axis, as
    # Megatron-LM splits them. Before, the JAX audit found no layout map to give ModelParallel.
    result = _on_two_jax_host_devices(MODEL_PARALLEL, tmp_path, minilm_dir)
    assert result["difference"] < 1e-5 and np.isfinite(result["loss"])
    layers = [f"transformer_layer_{i}/{name}" for i in range(2) for name in (
        "attention_output/kernel", "intermediate/bias", "intermediate/kernel", "output/kernel", "qkv/bias",
        "qkv/kernel")]
    assert result["split"] == sorted(["token_embedding/embeddings"] + layers)
    assert result["errors"] == [
        "get_layout_map: model_parallel_dim_name='model' is not an axis of the device mesh, whose axes are ['data']: "
        "name the mesh's axes, e.g. DeviceMesh((1, 2), ['batch', 'model'])."]
