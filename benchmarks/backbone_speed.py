"""Backbone speed: forward and training-step sequences/s, this package vs keras-hub (same backend)
and Hugging Face transformers (torch eager), measured in one run. Prints one JSON line.

Training step = encoder + masked-LM head over `--predictions` gathered positions (tied to the token
embedding) + NSP head, AdamW, dropout 0.1, as the issue defines it. Also measures this machine's fp32
matmul ceiling in the same run and reports model FLOP/s as a fraction of it.

    KERAS_BACKEND=tensorflow python benchmarks/backbone_speed.py --configs tiny,small,base
    KERAS_BACKEND=jax python benchmarks/backbone_speed.py --peers keras_hub
    KERAS_BACKEND=jax python benchmarks/backbone_speed.py --configs base --batch_size 64 \
        --torch_device cuda --mixed_precision bf16          # on a GPU: same device for all three
    KERAS_BACKEND=jax python benchmarks/backbone_speed.py --configs base,large --peers "" \
        --batch_sizes 64,128,256,512 --steps_per_execution 20 --mixed_precision bf16 --peak_tflops 989

`--mixed_precision bf16` runs Keras models under the `mixed_bfloat16` policy
and the torch reference under `torch.autocast(dtype=torch.bfloat16)`.

Issue 18's ablation flags:
- `--batch_sizes 64,128,256,512`: one entry per config and batch size (`base_b256`), the same run.
- `--steps_per_execution K` (K > 1): our training step is timed through `model.fit` over `--steps` x K
  batches with `steps_per_execution=K` (the host dispatches once per K steps and reads the loss once per
  K, as `recipes/pretrain.py --steps_per_execution` runs), not one `train_on_batch` call per step;
  keras-hub's model goes through the same loop, Hugging Face keeps its eager torch loop.
- `--dropout`, `--attention_dropout`: override our config's 0.1 (MosaicBERT drops attention dropout); the
  peers keep the published config.
- `--peak_tflops 989` (the H100 SXM's dense bf16 figure): MFU against the spec, next to MFU against the
  matmul peak this run measures. FLOPs are counted honestly: the MLM head on the gathered positions only,
  attention scores and context included, x3 for a training step.
- `--attention_padding lengths`: our attention gets the padding as one length per row
  (`jax.nn.dot_product_attention(key_value_seq_lengths=...)`, cuDNN's fused attention on a GPU in bf16)
  instead of a (batch, 1, q, k) mask; with `--attention_dropout 0`, since training with attention dropout
  materialises the probabilities.
- `--vocabulary_padding_multiple 128`: our MLM projection runs on the vocabulary zero-padded to a multiple
  of 128 (30,522 -> 30,592 columns), the padding logits sliced off (`MaskedLMHead`); the peers unchanged.
- `--qkv_projection split`: our query, key and value from three matmuls on the `qkv` kernel's column
  blocks instead of one matmul whose output is sliced (`TransformerEncoder(qkv_projection=...)`): on the
  H100 the slice copies 151 MB of activations a layer at batch 256 (session 21's profile).
- `--dropout_rng philox`: dropout's random bits from XLA's `rng-bit-generator` (Philox on a GPU) rather
  than Keras's threefry (`use_philox_dropout`), for our model and keras-hub's alike. `--dropout_rng threefry16`:
  16 threefry bits an element instead of 32 (`use_threefry16_dropout`).
- `XLA_FLAGS` (Triton GEMM, command buffers, the latency-hiding scheduler) is read from the environment
  and recorded in the JSON line.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_bert_impl import BertBackbone  # noqa: E402
from keras_bert_impl.layers import MaskedLMHead, NextSentenceHead  # noqa: E402
from keras_bert_impl.presets import backbone_presets  # noqa: E402

from keras_bert_impl.training.pretraining_config import PRESET_ALIASES  # noqa: E402 (no TensorFlow)

CONFIGS = PRESET_ALIASES  # the sizes `recipes/pretrain.py --config` names, and their presets


def model_flops_per_sequence(config, sequence_length, predictions, training):
    """Matmul FLOPs of one sequence (multiply-add = 2), forward; x3 for a training step."""
    h, i, n, v = config["hidden_dim"], config["intermediate_dim"], config["num_layers"], config["vocabulary_size"]
    per_layer = 2 * sequence_length * (4 * h * h + 2 * h * i) + 2 * 2 * sequence_length * sequence_length * h
    flops = n * per_layer + 2 * h * h  # pooler
    if training:
        flops += predictions * (2 * h * h + 2 * h * v) + 2 * h * 2
        flops *= 3
    return flops


def measure_matmul_peak(size=2048, repeats=10, dtype="float32"):
    """GFLOP/s of a square matmul, best of `repeats`: NumPy's BLAS (fp32, CPU) and the Keras backend in `dtype`."""
    a = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)
    best = {}
    a @ a
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - start)
    best["numpy"] = 2 * size**3 / min(times) / 1e9
    x = keras.ops.convert_to_tensor(a, dtype=dtype)

    def product():  # only a scalar comes back: on a GPU, copying the product to the host would dominate
        return keras.ops.convert_to_numpy(keras.ops.sum(keras.ops.matmul(x, x)))

    product()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        product()
        times.append(time.perf_counter() - start)
    best[f"{keras.backend.backend()}_{dtype}"] = 2 * size**3 / min(times) / 1e9
    return best


def replace_jax_dropout(flag, keep_mask):
    """Replaces Keras's JAX dropout, for this process, by one whose mask comes from
    `keep_mask(key, shape, rate) -> (bool mask, keep rate)`, `key` being the seed generator's 2-word threefry key;
    the rest is Keras's dropout: kept values scaled by 1 / keep rate, the identity at rate 0 and outside
    training, zeros at rate 1. `flag` names the command-line choice in the error on other backends."""
    if keras.backend.backend() != "jax":
        raise SystemExit(f"error: --dropout_rng {flag}: JAX only (KERAS_BACKEND={keras.backend.backend()})")
    import jax
    import jax.numpy as jnp
    from keras.src.backend.jax import random as jax_random

    def dropout(inputs, rate, noise_shape=None, seed=None):
        if rate == 1.0:
            return jnp.zeros_like(inputs)
        if rate == 0.0:
            return inputs
        key = jnp.asarray(jax_random.jax_draw_seed(seed), dtype="uint32").reshape(-1)[:2]
        mask, keep = keep_mask(key, jax_random._get_concrete_noise_shape(inputs, noise_shape), rate)
        return jax.lax.select(jnp.broadcast_to(mask, inputs.shape), inputs / keep, jnp.zeros_like(inputs))

    jax_random.dropout = dropout


def use_philox_dropout():
    """Dropout's random bits from XLA's `rng-bit-generator` (Philox on a GPU) instead of JAX's threefry (issue 18,
    item 3), for this process: a measurement, not a model option.

    Keras's JAX dropout draws `jax.random.bernoulli` from its seed generator's 2-word threefry key; threefry is
    a counter-mode hash that XLA computes in the fusion that uses the mask (20 rounds of adds, rotates and xors
    per 64 random bits). `jax_default_prng_impl=unsafe_rbg` cannot be set instead: Keras's raw 2-word seeds
    are not keys of that implementation (`hlo_fusions.py --prng_impl` says so in one line). This wraps the same
    seed, widened to the 4 words `unsafe_rbg` keys hold, so each call still gets its own stream, and leaves
    Keras's dropout otherwise as it is: keep with probability 1 - rate, scale by 1 / (1 - rate).
    """
    def keep_mask(key, shape, rate):
        import jax
        import jax.numpy as jnp

        wide = jax.random.wrap_key_data(jnp.concatenate([key, key ^ jnp.uint32(0x9E3779B9)]), impl="unsafe_rbg")
        return jax.random.bernoulli(wide, p=1.0 - rate, shape=shape), 1.0 - rate

    replace_jax_dropout("philox", keep_mask)


def use_threefry16_dropout():
    """Dropout's random bits as 16-bit words from Keras's own threefry key, for this process: a measurement, not a
    model option (session 22).

    Keras's JAX dropout draws `jax.random.bernoulli`, a float32 uniform; under JAX's default
    `jax_threefry_partitionable` each element costs one threefry-2x32 evaluation (20 rounds for 64 bits, of
    which 32 are kept), and threefry is the compute-bound part of the dropout kernels (2.1 ms of session 21's
    57.5 ms H100 step against 1.3 ms of memory traffic). Here `jax.extend.random.threefry_2x32` hashes a
    counter of `ceil(n / 2)` 32-bit words, one evaluation per two words, and each word gives two 16-bit draws:
    a quarter of the evaluations. An element is kept when its 16 bits are at least `round(rate * 65536)`, so the
    keep rate is `1 - round(rate * 65536) / 65536` (0.899994 for 0.1) and the kept values are scaled by its
    inverse: the expectation is unchanged.
    """
    def keep_mask(key, shape, rate):
        import jax
        import jax.numpy as jnp
        from jax.extend.random import threefry_2x32

        threshold = int(round(rate * 65536))
        count = math.prod(shape)
        words = threefry_2x32(key, jax.lax.iota(jnp.uint32, (count + 1) // 2))
        bits = jax.lax.bitcast_convert_type(words, jnp.uint16).reshape(-1)[:count].reshape(shape)
        return bits >= jnp.uint16(threshold), 1.0 - threshold / 65536

    replace_jax_dropout("threefry16", keep_mask)


DROPOUT_BITS = {"philox": use_philox_dropout, "threefry16": use_threefry16_dropout}


def make_batch(batch_size, sequence_length, predictions, vocabulary_size, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(sequence_length // 2, sequence_length + 1, size=batch_size)
    padding_mask = (np.arange(sequence_length)[None, :] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(1000, vocabulary_size, size=(batch_size, sequence_length)).astype("int32") * padding_mask
    segment_ids = ((np.arange(sequence_length)[None, :] >= lengths[:, None] // 2) & (padding_mask > 0)).astype("int32")
    mask_positions = np.sort(
        np.stack([rng.choice(np.arange(1, l - 1), size=predictions, replace=False) for l in lengths]), axis=1
    ).astype("int32")
    x = {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
        "mask_positions": mask_positions,
    }
    y = {
        "mlm": rng.integers(1000, vocabulary_size, size=(batch_size, predictions)).astype("int32"),
        "nsp": rng.integers(0, 2, size=(batch_size,)).astype("int32"),
    }
    return x, y


def build_ours(config, vocabulary_padding_multiple=None, float8=False):
    """Our pretraining step's model (backbone, MLM head on gathered positions, NSP head); `float8=True` quantizes
    the encoder's matmuls with `quantize_encoder_float8`."""
    backbone = BertBackbone(**config)
    inputs = dict(backbone.input)
    inputs["mask_positions"] = keras.Input(shape=(None,), dtype="int32", name="mask_positions")
    out = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    mlm = MaskedLMHead(token_embedding=backbone.token_embedding, activation=config["activation"],
                       vocabulary_padding_multiple=vocabulary_padding_multiple, name="mlm")(
        out["sequence_output"], mask_positions=inputs["mask_positions"]
    )
    nsp = NextSentenceHead(name="nsp")(out["pooled_output"])
    model = keras.Model(inputs, {"mlm": mlm, "nsp": nsp})
    if float8:
        quantize_encoder_float8(model)
    return model


def quantize_encoder_float8(model):
    """Keras's float8 training (`Dense.quantize("float8")`: delayed scaling, e4m3 forward and e5m2 gradients) for
    the four matmuls of every encoder block of `model`; returns how many Dense layers it quantized.

    Only the encoder blocks: their 48 matmuls are 93% of a BERT-base step's FLOPs at seq 128, and the MLM / NSP heads and the
    embeddings stay as they are. XLA rewrites the quantize-dequantize pairs around each dot into one cuBLASLt FP8
    matmul (`__cublas$lt$matmul$f8`) on an H100, where FP8 doubles the dense peak. Counted without a GPU
    (`hlo_traffic.py --target h100 --float8 on`): the rewrite happens when XLA does not choose a Triton GEMM for the
    dot (`--xla_gpu_enable_triton_gemm=false`).

    Example:
    >>> import keras
    >>> from keras_bert_impl import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
    ...                         max_sequence_length=16)
    >>> quantize_encoder_float8(backbone)
    8
    """
    from keras_bert_impl.layers import TransformerEncoder

    quantized = 0
    for layer in model._flatten_layers():
        if isinstance(layer, TransformerEncoder):
            for dense in (layer.qkv_dense, layer.attention_output_dense, layer.intermediate_dense, layer.output_dense):
                dense.quantize("float8")
                quantized += 1
    return quantized


def build_keras_hub(config):
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config["vocabulary_size"],
        num_layers=config["num_layers"],
        num_heads=config["num_heads"],
        hidden_dim=config["hidden_dim"],
        intermediate_dim=config["intermediate_dim"],
        dropout=config["dropout"],
        max_sequence_length=config["max_sequence_length"],
        num_segments=config["num_segments"],
    )
    inputs = dict(backbone.input)
    inputs["mask_positions"] = keras.Input(shape=(None,), dtype="int32", name="mask_positions")
    out = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    mlm = keras_hub.layers.MaskedLMHead(
        token_embedding=backbone.token_embedding,
        intermediate_activation=lambda x: keras.activations.gelu(x, approximate=True),
        name="mlm",
    )(out["sequence_output"], mask_positions=inputs["mask_positions"])
    nsp = keras.layers.Dense(2, name="nsp")(out["pooled_output"])
    return keras.Model(inputs, {"mlm": mlm, "nsp": nsp})


def argmax_outputs(model):
    """The same network returning argmax ids, as inference uses it.

    Timing `predict_on_batch` on the logits themselves would, on a GPU, time
    the device-to-host copy of batch x predictions x 30,522 floats.
    """
    return keras.Model(model.input, {k: keras.ops.argmax(v, axis=-1) for k, v in model.output.items()})


def time_keras(model, x, y, steps, jit_compile, steps_per_execution=1, forward=True):
    """(forward, training) sequences/s, medians over `steps`; with `steps_per_execution` > 1 the training
    figure times `model.fit` over `steps * steps_per_execution` batches instead of `train_on_batch` calls.
    `forward=False` skips the inference model (its compilation too) and returns None for it."""
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01),
        loss={
            "mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        },
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    batch = len(y["nsp"])
    inference = argmax_outputs(model) if forward else None
    if inference is not None:
        inference.compile(jit_compile=jit_compile)
    for _ in range(2):  # compile + warm up
        if inference is not None:
            inference.predict_on_batch(x)
        model.train_on_batch(x, y)
    forward_times, train = [], []
    for _ in range(steps):
        if inference is not None:
            start = time.perf_counter()
            inference.predict_on_batch(x)
            forward_times.append(time.perf_counter() - start)
        if steps_per_execution == 1:
            start = time.perf_counter()
            model.train_on_batch(x, y)
            train.append(time.perf_counter() - start)
    forward_seq_s = batch / statistics.median(forward_times) if forward_times else None
    if steps_per_execution > 1:
        return forward_seq_s, time_fit(model, x, y, steps * steps_per_execution)
    return forward_seq_s, batch / statistics.median(train)


def time_fit(model, x, y, batches):
    """Training sequences/s of `model.fit` over `batches` copies of the batch (after one warm-up fit that
    compiles): the recipes' loop, where `steps_per_execution` batches go to the device per host call."""
    batch = len(y["nsp"])

    def repeated(tree, count):
        return {k: np.concatenate([v] * count) for k, v in tree.items()}

    warmup = 2 * model.steps_per_execution
    model.fit(repeated(x, warmup), repeated(y, warmup), batch_size=batch, epochs=1, shuffle=False, verbose=0)
    xs, ys = repeated(x, batches), repeated(y, batches)
    start = time.perf_counter()
    model.fit(xs, ys, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    return batches * batch / (time.perf_counter() - start)


def time_huggingface(config, x, y, steps, device="cpu", mixed_precision=None):
    import contextlib

    import torch
    import transformers

    device = torch.device(device)

    def autocast():
        if mixed_precision == "bf16":
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    hf_config = transformers.BertConfig(
        vocab_size=config["vocabulary_size"],
        hidden_size=config["hidden_dim"],
        num_hidden_layers=config["num_layers"],
        num_attention_heads=config["num_heads"],
        intermediate_size=config["intermediate_dim"],
        max_position_embeddings=config["max_sequence_length"],
        type_vocab_size=config["num_segments"],
        hidden_act="gelu_pytorch_tanh",
    )
    model = transformers.BertForPreTraining(hf_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    ids = torch.tensor(x["token_ids"], dtype=torch.long, device=device)
    segments = torch.tensor(x["segment_ids"], dtype=torch.long, device=device)
    mask = torch.tensor(x["padding_mask"], dtype=torch.long, device=device)
    positions = torch.tensor(x["mask_positions"], dtype=torch.long, device=device)
    mlm_labels = torch.full_like(ids, -100)
    mlm_labels.scatter_(1, positions, torch.tensor(y["mlm"], dtype=torch.long, device=device))
    nsp_labels = torch.tensor(y["nsp"], dtype=torch.long, device=device)
    batch = ids.shape[0]

    def forward():
        model.eval()
        with torch.no_grad(), autocast():
            out = model(input_ids=ids, token_type_ids=segments, attention_mask=mask)
            out.prediction_logits.argmax(-1).cpu(), out.seq_relationship_logits.argmax(-1).cpu()

    def train():
        model.train()
        with autocast():
            out = model(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=mlm_labels,
                        next_sentence_label=nsp_labels)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        sync()

    for _ in range(2):
        forward()
        train()
    f, t = [], []
    for _ in range(steps):
        start = time.perf_counter()
        forward()
        f.append(time.perf_counter() - start)
        start = time.perf_counter()
        train()
        t.append(time.perf_counter() - start)
    # Note: HF scores all positions in the MLM head (no gather); that is its design.
    return batch / statistics.median(f), batch / statistics.median(t)


def _rounded(value):
    return None if value is None else round(value, 2)


def _ratio(ours, peer):
    return None if ours is None or peer is None else round(ours / peer, 2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="tiny,small,base", help=f"comma list of {', '.join(CONFIGS)}")
    parser.add_argument("--peers", default="keras_hub,huggingface", help="comma list of keras_hub, huggingface, or empty")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--batch_sizes", default=None,
                        help="comma list: a sweep, one entry per config and batch size (replaces --batch_size)")
    parser.add_argument("--steps_per_execution", type=int, default=1,
                        help="> 1: time our training step through model.fit with this steps_per_execution")
    parser.add_argument("--dropout", type=float, default=None, help="our dropout (default: the config's 0.1)")
    parser.add_argument("--attention_dropout", type=float, default=None,
                        help="our attention-probability dropout (default: --dropout, else the config's)")
    parser.add_argument("--peak_tflops", type=float, default=None,
                        help="the accelerator's spec peak in the compute dtype (H100 SXM dense bf16: 989), for MFU")
    parser.add_argument("--sequence_length", "--seq_length", "--max_seq_length", dest="sequence_length", type=int,
                        default=128, help="packed length (aliases: --seq_length, --max_seq_length)")
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per measurement (median)")
    parser.add_argument("--train_only", action="store_true",
                        help="time the training step only (no inference model, one compilation less per entry)")
    parser.add_argument("--jit_compile", default="true", choices=["true", "false", "auto"])
    parser.add_argument("--torch_device", default="cpu", help="device of the Hugging Face reference (cpu, cuda)")
    parser.add_argument("--mixed_precision", default=None, choices=["bf16"], help="bf16 for every implementation")
    parser.add_argument("--attention_padding", choices=("mask", "lengths"), default="mask",
                        help="our attention's padding: a (batch, 1, q, k) mask, or one length per row, the form "
                             "cuDNN's fused attention takes (JAX, GPU, bf16; with --attention_dropout 0 in training)")
    parser.add_argument("--vocabulary_padding_multiple", type=int, default=None,
                        help="pad our MLM projection's vocabulary to a multiple of this (e.g. 128)")
    parser.add_argument("--qkv_projection", choices=("fused", "split"), default="fused",
                        help="our query/key/value: one matmul sliced (fused, default) or three matmuls (split)")
    parser.add_argument("--recompute_activation", choices=("on", "off"), default="on",
                        help="on (default): our backward pass recomputes the feed-forward bias + GELU (JAX); off: "
                             "autodiff stores GELU's intermediate (TransformerEncoder(recompute_activation=...))")
    parser.add_argument("--layer_norm_backward", choices=("explicit", "autodiff"), default="explicit",
                        help="our LayerNorms' backward pass on JAX: hand-written (default) or autodiff's, the one "
                             "to pair with XLA's cuDNN LayerNorm flag (BertBackbone(layer_norm_backward=...))")
    parser.add_argument("--dropout_rng", choices=("threefry", "philox", "threefry16"), default="threefry",
                        help="dropout's random bits (JAX): threefry (Keras's, default), philox (XLA's "
                             "rng-bit-generator; use_philox_dropout) or threefry16 (16 threefry bits an element; "
                             "use_threefry16_dropout), for every Keras model of the run")
    parser.add_argument("--float8", choices=("on", "off"), default="off",
                        help="on: our encoder's matmuls in FP8 through Keras's float8 training "
                             "(quantize_encoder_float8); pair with XLA_FLAGS=--xla_gpu_enable_triton_gemm=false")
    args = parser.parse_args(argv)
    if args.vocabulary_padding_multiple is not None and args.vocabulary_padding_multiple < 1:
        parser.error(f"--vocabulary_padding_multiple must be >= 1, got {args.vocabulary_padding_multiple}")
    try:
        batch_sizes = [int(b) for b in (args.batch_sizes or str(args.batch_size)).split(",") if b]
    except ValueError:
        parser.error(f"--batch_sizes: expected integers separated by commas, got {args.batch_sizes!r}")
    unknown = [c for c in args.configs.split(",") if c not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    if not batch_sizes or min(batch_sizes) < 1 or args.steps_per_execution < 1 or args.steps < 1:
        parser.error("--batch_sizes, --steps and --steps_per_execution must be >= 1")
    if args.mixed_precision == "bf16":
        keras.config.set_dtype_policy("mixed_bfloat16")
    if args.dropout_rng in DROPOUT_BITS:
        DROPOUT_BITS[args.dropout_rng]()
    jit = {"true": True, "false": False, "auto": "auto"}[args.jit_compile]
    peers = [p for p in args.peers.split(",") if p]
    unknown_peers = sorted(set(peers) - {"keras_hub", "huggingface"})
    if unknown_peers:
        parser.error(f"--peers: unknown {', '.join(unknown_peers)}; choose from keras_hub, huggingface")
    for peer, modules in (("keras_hub", ("keras_hub",)), ("huggingface", ("torch", "transformers"))):
        if peer in peers:  # before any measurement: a missing peer is one line, not a traceback minutes later
            for module in modules:
                try:
                    __import__(module)
                except ImportError as error:
                    parser.error(f"--peers {peer}: cannot import {module} ({error}); install it or leave the peer out")
    backend = keras.backend.backend()

    on_gpu = any("gpu" in str(d).lower() or "cuda" in str(d).lower() for d in keras.distribution.list_devices())
    result = {
        "benchmark": "backbone_speed",
        "backend": backend,
        "jit_compile": args.jit_compile,
        "batch_size": args.batch_size if len(batch_sizes) == 1 else None,
        "batch_sizes": batch_sizes,
        "steps_per_execution": args.steps_per_execution,
        "train_only": args.train_only,
        "dropout": args.dropout,
        "attention_dropout": args.attention_dropout,
        "attention_padding": args.attention_padding,
        "vocabulary_padding_multiple": args.vocabulary_padding_multiple,
        "dropout_bits": args.dropout_rng,
        "qkv_projection": args.qkv_projection,
        "recompute_activation": args.recompute_activation,
        "layer_norm_backward": args.layer_norm_backward,
        "float8": args.float8,
        "peak_tflops": args.peak_tflops,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "sequence_length": args.sequence_length,
        "predictions": args.predictions,
        "machine": f"{platform.machine()} {os.cpu_count()} cpu",
        "keras_devices": [str(d) for d in keras.distribution.list_devices()],
        "torch_device": args.torch_device,
        "mixed_precision": args.mixed_precision,
        "matmul_peak_gflops": {k: round(v, 1) for k, v in measure_matmul_peak(
            size=8192 if on_gpu else 2048, dtype=keras.config.dtype_policy().compute_dtype).items()},
        "configs": {},
    }
    peak = max(result["matmul_peak_gflops"].values()) * 1e9
    for name, batch_size in [(c, b) for c in args.configs.split(",") for b in batch_sizes]:
        # keras-hub's BertBackbone always uses the tanh GELU: use the same in ours for a like-for-like step.
        preset_config = dict(backbone_presets[CONFIGS[name]]["config"], activation="gelu_approximate")
        config = dict(preset_config)
        if args.dropout is not None:
            config["dropout"] = args.dropout
        if args.attention_dropout is not None:
            config["attention_dropout"] = args.attention_dropout
        config["attention_padding"] = args.attention_padding
        config["qkv_projection"] = args.qkv_projection
        config["recompute_activation"] = args.recompute_activation == "on"
        config["layer_norm_backward"] = args.layer_norm_backward
        x, y = make_batch(batch_size, args.sequence_length, args.predictions, config["vocabulary_size"])
        entry = {}
        keras.utils.set_random_seed(0)
        ours = build_ours(config, args.vocabulary_padding_multiple, float8=args.float8 == "on")
        fwd, train = time_keras(ours, x, y, args.steps, jit, args.steps_per_execution, forward=not args.train_only)
        entry["ours"] = {"forward_seq_s": _rounded(fwd), "train_seq_s": round(train, 2)}
        train_flops = model_flops_per_sequence(config, args.sequence_length, args.predictions, True)
        fwd_flops = model_flops_per_sequence(config, args.sequence_length, args.predictions, False)
        entry["ours"]["train_tflops"] = round(train * train_flops / 1e12, 4)
        entry["ours"]["train_fraction_of_peak"] = round(train * train_flops / peak, 3)
        if fwd is not None:
            entry["ours"]["forward_fraction_of_peak"] = round(fwd * fwd_flops / peak, 3)
        if args.peak_tflops:
            entry["ours"]["train_fraction_of_spec"] = round(train * train_flops / (args.peak_tflops * 1e12), 3)
        config = preset_config  # the peers run the config as published
        if "keras_hub" in peers:
            keras.utils.set_random_seed(0)
            f, t = time_keras(build_keras_hub(config), x, y, args.steps, jit, args.steps_per_execution,
                              forward=not args.train_only)
            entry["keras_hub"] = {"forward_seq_s": _rounded(f), "train_seq_s": round(t, 2)}
            entry["ratio_vs_keras_hub"] = {"forward": _ratio(fwd, f), "train": round(train / t, 2)}
        if "huggingface" in peers:
            f, t = time_huggingface(config, x, y, args.steps, args.torch_device, args.mixed_precision)
            entry["huggingface_torch_eager"] = {"forward_seq_s": round(f, 2), "train_seq_s": round(t, 2)}
            entry["ratio_vs_huggingface"] = {"forward": _ratio(fwd, f), "train": round(train / t, 2)}
        key = name if len(batch_sizes) == 1 else f"{name}_b{batch_size}"
        result["configs"][key] = entry
        print(f"[{key}] {json.dumps(entry)}", file=sys.stderr, flush=True)  # progress; the JSON line comes last
        keras.backend.clear_session()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
