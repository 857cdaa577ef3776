"""Pretrain BERT (MLM + NSP) on raw text: CPU, GPUs, several workers or a TPU.

With no arguments: the tiny config on the corpus bundled with the package,
1,000 steps of batch 128 (about 5 minutes on 2 CPU cores). Restarting the same
command resumes from the newest checkpoint in --model_dir (--num_steps, --learning_rate and
--warmup_steps may change on resume). Every flag and input file is checked before any work; an
error is one line `error: ...` and exit status 2 (--debug shows the traceback).

    python recipes/pretrain.py
    python recipes/pretrain.py --strategy tpu --tpu my-tpu --config base \\
        --train_files 'gs://bucket/shards/*.txt' --vocab gs://bucket/vocab.txt \\
        --global_batch_size 256 --num_steps 900000 --optimizer lamb \\
        --mixed_precision bf16 --steps_per_execution 200 --model_dir gs://bucket/run
    KERAS_BACKEND=torch torchrun --nproc_per_node 8 recipes/pretrain.py --strategy multiworker ...
"""

import argparse
import os
import sys

from command_line import (
    OneLineParser, add_run_arguments, exit_on_user_error, one_line_warnings,
)
from interruption import one_line_on_ctrl_c
from native_logs import quiet_native_logs

if __name__ == "__main__":
    quiet_native_logs()  # TensorFlow's start-up log lines off stderr (--debug: all of them)
    one_line_on_ctrl_c()  # before the imports below (Keras, TensorFlow: seconds): Ctrl-C then is one line too

import keras

from keras_bert_impl.layers.layer_norm_backward import LAYER_NORM_BACKWARDS
from keras_bert_impl.training.attention_padding import ATTENTION_PADDING_CHOICES
from keras_bert_impl.training.compilation_cache import enable_compilation_cache
from keras_bert_impl.training.jax_processes import initialize_jax_processes
from keras_bert_impl.training.pretraining_checks import RECOMPUTE_ACTIVATION_CHOICES, check_flags
from keras_bert_impl.training.pretraining_errors import NaNLossError
from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining
from keras_bert_impl.training.steps_per_execution import parse_steps_per_execution
from keras_bert_impl.training.triton_gemm import apply_triton_gemm


def parse_args(argv=None):
    d = PretrainingConfig()
    # A bad flag value is one line, `error: argument --learning_rate: invalid float value: 'abc' (see --help)`.
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # --strategy, its cluster flags, --mixed_precision, --seed, --compilation_cache, --triton_gemm, --model_dir and
    # --debug: as every recipe has them
    add_run_arguments(p, seed=d.seed, model_dir_default=d.model_dir,
                      model_dir_help=f"checkpoints, TensorBoard logs, the export; the same command resumes the run in "
                                     f"it (default {d.model_dir})")
    p.add_argument("--tpu", default=None, help="TPU name or grpc:// address (default: local TPU VM)")
    p.add_argument("--config", "--preset", dest="config", default=d.config,
                   help="tiny|mini|small|medium|base|large, a preset name (its architecture: training starts from "
                        "scratch; --init_checkpoint starts from a preset's weights), or a JSON file of BertBackbone args")
    p.add_argument("--train_files", nargs="+", default=None, help="text files or globs (default: bundled corpus)")
    p.add_argument("--validation_files", nargs="+", default=None,
                   help="held-out text files or globs, evaluated after every checkpoint (default: the bundled "
                        "corpus's held-out text without --train_files, else none)")
    p.add_argument("--vocab", default=None,
                   help="WordPiece vocab.txt, UTF-8, one token a line: the default is --init_checkpoint's own, else "
                        "the bundled corpus vocab without --train_files (needed with --train_files from scratch)")
    p.add_argument("--lowercase", default=None, action=argparse.BooleanOptionalAction,
                   help="lowercase the text before WordPiece (default: --init_checkpoint's casing, else on)")
    p.add_argument("--sequence_length", "--seq_length", "--max_seq_length", dest="sequence_length", type=int,
                   default=d.sequence_length, help="the packed length of every example")
    p.add_argument("--max_predictions_per_seq", type=int, default=d.max_predictions_per_seq)
    p.add_argument("--global_batch_size", type=int, default=d.global_batch_size)
    p.add_argument("--num_steps", type=int, default=d.num_steps)
    p.add_argument("--warmup_steps", type=int, default=d.warmup_steps,
                   help="steps of linear warm-up to the peak --learning_rate (default: min(100, --num_steps // 10): "
                        "100 for the default 1,000 steps, 0 for a run of under 10; a resumed run keeps the "
                        "warm-up it was started with). An explicit value must be in [0, --num_steps]")
    p.add_argument("--learning_rate", type=float, default=d.learning_rate)
    p.add_argument("--optimizer", default=d.optimizer, choices=["adamw", "lamb"])
    p.add_argument("--adam_beta2", type=float, default=d.adam_beta2,
                   help="the second-moment decay of AdamW/LAMB (default 0.98, as RoBERTa and Cramming: steadier "
                        "short runs; BERT used 0.999). See docs/pretraining.md")
    p.add_argument("--weight_decay", type=float, default=d.weight_decay)
    p.add_argument("--gradient_accumulation_steps", type=int, default=None)
    p.add_argument("--checkpoint_every", type=int, default=d.checkpoint_every,
                   help="steps between checkpoints, each followed by the held-out evaluation; --num_steps must be a "
                        "multiple (default: the largest divisor of --num_steps up to 500: 500 for the default 1,000 "
                        "steps, --num_steps itself for a run of up to 500; a resumed run keeps the one it was "
                        "started with)")
    p.add_argument("--keep_checkpoints", type=int, default=d.keep_checkpoints)
    p.add_argument("--log_every", type=int, default=d.log_every,
                   help=f"steps between TensorBoard's training scalars, and the run's first step (default "
                        f"{d.log_every})")
    p.add_argument("--validation_steps", type=int, default=d.validation_steps,
                   help=f"held-out batches evaluated after every checkpoint, the same ones each time (default "
                        f"{d.validation_steps})")
    p.add_argument("--whole_word_masking", action="store_true")
    p.add_argument("--nsp", default=True, action=argparse.BooleanOptionalAction)
    p.add_argument("--init_checkpoint", default=None, help="preset name or directory to continue from")
    p.add_argument("--dropout", type=float, default=d.dropout,
                   help="dropout while pretraining (default 0: off, best for short runs; BERT used 0.1). "
                        "The exported backbone records the architecture's own dropout for fine-tuning")
    p.add_argument("--attention_init_stddev", type=float, default=None,
                   help="stddev of the attention's query, key and value kernels when pretraining from scratch (default: "
                        "sqrt(1.28 / hidden_dim), 0.1 for tiny, so a narrow model's attention does not start "
                        "uniform; 0.02 is BERT's). See docs/pretraining.md")
    p.add_argument("--weight_init", default=d.weight_init,
                   help="distribution of the other kernels and embeddings when pretraining from scratch: normal "
                        "(default: a plain normal of stddev 0.02, as Hugging Face transformers; it fine-tuned better "
                        "after the 30-minute pretraining, docs/pretraining.md) or truncated_normal (stddev 0.02 cut at "
                        "2 sigma, as google-research/bert and Keras)")
    p.add_argument("--position_init", default=d.position_init,
                   help="starting values of the (learned) position embeddings when pretraining from scratch: "
                        "sinusoidal (default: Vaswani et al.'s sines and cosines at stddev 0.02, so attention can "
                        "reach neighbouring tokens from the start; the main job leaves its plateau sooner, "
                        "docs/pretraining.md) or random (BERT's draw, as --weight_init says)")
    p.add_argument("--vocabulary_padding_multiple", type=int, default=None,
                   help="run the MLM projection on the vocabulary zero-padded to a multiple of this (e.g. 128: "
                        "30,522 -> 30,592 columns, a shape GPUs tile evenly); outputs and weights unchanged")
    p.add_argument("--attention_padding", default=d.attention_padding, choices=ATTENTION_PADDING_CHOICES,
                   help="how the attention gets the padding: auto (default: one length per row, cuDNN's fused "
                        "attention, on a JAX GPU in bf16/fp16 without attention dropout; a mask elsewhere), mask, "
                        "or lengths. The numbers are the same; the export does not record it")
    p.add_argument("--recompute_activation", default=d.recompute_activation, choices=RECOMPUTE_ACTIVATION_CHOICES,
                   help="JAX: the backward pass recomputes each block's feed-forward bias + GELU instead of storing "
                        "an intermediate as large as the activation (on, default: 4.8 GB less memory traffic a "
                        "BERT-base step at batch 256 on an H100); the same numbers either way")
    p.add_argument("--layer_norm_backward", default=d.layer_norm_backward, choices=LAYER_NORM_BACKWARDS,
                   help="JAX: the LayerNorms' gradient from a hand-written backward pass (explicit, default: 5.9 GB "
                        "less memory traffic a BERT-base step) or from autodiff (pair it with "
                        "XLA_FLAGS=--xla_gpu_enable_cudnn_layer_norm=true); the same numbers either way")
    p.add_argument("--steps_per_execution", type=parse_steps_per_execution, default=d.steps_per_execution,
                   help="training steps per host call: auto (default: 20 on a GPU or TPU, dividing --checkpoint_every "
                        "and --log_every; 1 on a CPU) or a number. 20 ran 21%% faster than 1 on "
                        "an H100 (docs/benchmarks.md)")
    p.add_argument("--jit_compile", default="auto", type=lambda v: {"true": True, "false": False}.get(v.lower(), v),
                   help="XLA for the training step: true, false, or auto (default: XLA on TensorFlow with one "
                        "replica and on JAX, off on PyTorch, Keras's choice with several tf.distribute replicas)")
    p.add_argument("--profile_steps", default=None, help="'START,END' steps to trace with the TF profiler")
    p.add_argument("--deterministic", action="store_true", help="TF op determinism (exact resume on CPU)")
    p.add_argument("--verbose", type=int, default=None,
                   help="Keras's progress output: 1 (a bar updated every step; the default on a terminal), 2 (one "
                        "line per checkpoint epoch; the default when the output goes to a file or a pipe, where "
                        "the bar's updates would fill the log: 400 KB for the main job) or 0")
    args = vars(p.parse_args(argv))
    debug = args.pop("debug")
    if args["verbose"] is None:
        args["verbose"] = 1 if sys.stdout.isatty() else 2
    process_settings = {name: args.pop(name) for name in ("compilation_cache", "triton_gemm")}
    return PretrainingConfig(**args), debug, process_settings


def main(argv=None):
    config, debug, process_settings = parse_args(argv)

    def job():
        import warnings

        python_form = warnings.formatwarning
        if not debug:
            one_line_warnings()  # `warning: <message>` (a raw Gutenberg book in --train_files), as the other recipes
        try:
            return run_job()
        finally:
            warnings.formatwarning = python_form  # (the job's own: a caller in the same process keeps its form)

    def run_job():
        # XLA reads XLA_FLAGS when JAX first starts a device: before jax.distributed and the cache's device query.
        apply_triton_gemm(process_settings["triton_gemm"])
        if config.strategy == "multiworker" and keras.backend.backend() == "jax":
            # jax.distributed.initialize must precede every JAX call, the compilation cache's device query included;
            # the flags are checked first, so that a bad one fails at once instead of after the others have joined.
            check_flags(config.resolved(), default_checkpoint_every=config.checkpoint_every is None)
            initialize_jax_processes(config.coordinator_address, config.num_processes, config.process_id)
        directory = enable_compilation_cache(process_settings["compilation_cache"])  # before anything compiles
        if directory:
            print(f"XLA compilation cache: {directory} (--compilation_cache none turns it off)", file=sys.stderr)
        return run_pretraining(config)

    # A bad flag, a bad or missing file, a model_dir that cannot be used, a non-finite loss, a full disk, a lost
    # process: one line, no traceback (--debug shows it), and main returns the exit status 2.
    try:
        result = exit_on_user_error(job, debug=debug, user_errors=(OSError, ValueError, RuntimeError, NaNLossError),
                                    checkpoints=os.path.join(config.model_dir, "checkpoints"))
    except SystemExit as leaving:  # in one process; a process of a multiworker job has left at once already
        return leaving.code
    validation, floor = result["validation"], result.get("unigram_floor")
    if validation:
        accuracy = validation.get("mlm_accuracy", float("nan"))
        print("Held-out MLM accuracy: {:.4f}  (mlm_loss {:.4f}{})".format(
            accuracy, validation.get("mlm_loss", float("nan")),
            f", NSP accuracy {validation['nsp_accuracy']:.4f}" if "nsp_accuracy" in validation else ""))
    # The held-out accuracy after each checkpoint of the run (those written before a resume too): it should rise.
    curve = result.get("held_out_curve") or []
    if len(curve) > 1:
        print("Held-out MLM accuracy at each checkpoint: "
              + " | ".join(f"step {step}: {value:.4f}" for step, value in curve))
    if validation and floor:
        print(f"Unigram floor:        {floor['accuracy']:.4f}  (always guessing {floor['token']!r}; "
              f"the model scores {accuracy / floor['accuracy']:.1f}x that on the same "
              f"{floor['masked_positions']} held-out masked positions)")
    if result.get("masked_word_guesses"):
        # (without held-out files, the probe sentences are the training files')
        source = "Held-out" if validation else "Training-text"
        print(f"{source} masked words (the word: the model's 3 guesses), the TensorBoard text tab has them all:")
        for sentence in result["masked_word_guesses"][:2]:
            print("  " + " | ".join(f"{truth}: {', '.join(piece for piece, _ in guesses)}"
                                    for truth, guesses in sentence["guesses"][:6]))
    if result["sequences_per_second"]:
        xla = {True: "XLA on", False: "XLA off"}.get(result.get("jit_compile"), "XLA: Keras's choice")
        attention = ", fused attention on lengths" if result.get("attention_padding") == "lengths" else ""
        if (result.get("steps_per_execution") or 1) > 1:
            attention += f", {result['steps_per_execution']} steps per host call"
        print(f"Training speed: {result['sequences_per_second']:.1f} sequences/s ({xla}, "
              f"{result.get('mixed_precision') or 'float32'}{attention})")
    if not result.get("is_chief", True):  # a non-chief worker / JAX process > 0 writes no export
        print(f"Worker done; the chief writes the checkpoints and the export under {config.model_dir}")
        return 0
    from shlex import quote  # (the commands below are pasted into a shell: a path with spaces stays one argument)

    print(f"TensorBoard logs: {result['logs_dir']}   (tensorboard --logdir {quote(result['logs_dir'])})")
    print(f"Exported backbone: {result['export_dir']}   (--init_checkpoint for fine-tuning; with the trained heads, "
          "BertPretrainer.from_preset(it).fill_mask(\"... [MASK] ...\"))")
    finetune = os.path.join(os.path.dirname(os.path.abspath(__file__)), "finetune_glue.py")
    if not os.path.relpath(finetune).startswith(".."):  # recipes/finetune_glue.py from the checkout, else the full path
        finetune = os.path.relpath(finetune)
    small = result["model"].backbone.hidden_dim <= 256  # tiny, mini: BERT's 2e-5 leaves them at chance on SST-2
    print(f"Fine-tune it: python {quote(finetune)} --task sst2 --data_dir GLUE_DIR --init_checkpoint "
          f"{quote(result['export_dir'])} " + ("--learning_rate 3e-4 " if small else "")
          + f"--model_dir {quote(os.path.join(config.model_dir, 'sst2'))}"
          + ("   (a model this small needs 3e-4: BERT's default 2e-5 leaves it at chance; docs/pretraining.md)"
             if small else ""))
    table = os.path.join(os.path.dirname(finetune), "finetune_classifier.py")
    print(f"Or on a table of your own: python {quote(table)} --train_file train.csv --validation_file dev.csv "
          f"--text_column text --label_column label --init_checkpoint {quote(result['export_dir'])} "
          + ("--learning_rate 3e-4 " if small else "")
          + f"--model_dir {quote(os.path.join(config.model_dir, 'classifier'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
