"""The settings of a pretraining run: `PretrainingConfig` (the flags of `recipes/pretrain.py`), the defaults of
`--warmup_steps` and `--checkpoint_every` that follow from `--num_steps`, and the `BertBackbone` arguments that
`--config` names (`backbone_config`).
"""

import dataclasses
import json
import os

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.unknown_arguments import check_arguments

PRESET_ALIASES = {
    "tiny": "bert_tiny_en_uncased",
    "mini": "bert_mini_en_uncased",
    "small": "bert_small_en_uncased",
    "medium": "bert_medium_en_uncased",
    "base": "bert_base_en_uncased",
    "large": "bert_large_en_uncased",
}

@dataclasses.dataclass
class PretrainingConfig:
    """Every setting of a pretraining run (the flags of `recipes/pretrain.py`).

    Defaults pretrain the tiny config on the corpus bundled with the package
    in about 5 minutes on 2 CPU cores (277 s on one, from a fresh clone), to a held-out MLM accuracy of
    0.27-0.31 over seeds 0-4 (session 24; the unigram floor is 0.06): sequence length 64,
    10 masked positions, batch 128, 1,000 steps, peak learning rate 3e-3
    after 100 warm-up steps, AdamW with beta_2 0.98, no dropout, attention QKV kernels drawn at stddev
    sqrt(1.28 / hidden_dim), the position table at sines and cosines, the other weights from a plain normal of
    stddev 0.02. docs/pretraining.md gives the measurement
    behind each choice; a long run (BERT-base) sets its own. `config` is a size (`tiny|mini|small|medium|base|large`), a preset name
    or a JSON file of `BertBackbone` arguments; `vocabulary_size` always comes
    from `vocab`.
    """

    strategy: str = "auto"
    tpu: str = None
    coordinator_address: str = None  # --strategy multiworker on JAX or PyTorch: host:port of process 0 (else the env)
    num_processes: int = None
    process_id: int = None
    config: str = "tiny"
    train_files: list = None
    validation_files: list = None
    vocab: str = None
    lowercase: bool = None  # None: --init_checkpoint's casing, else True (uncased)
    sequence_length: int = 64
    max_predictions_per_seq: int = 10
    global_batch_size: int = 128
    num_steps: int = 1000
    warmup_steps: int = None  # None: `default_warmup_steps(num_steps)`, 100 for the 1,000 steps (a resume: the run's)
    learning_rate: float = 3e-3
    optimizer: str = "adamw"
    adam_beta2: float = 0.98  # BERT's 0.999 averages over the whole of a short run; RoBERTa and Cramming use 0.98
    weight_decay: float = 0.01
    mixed_precision: str = "auto"  # bf16 on a TPU or a bf16 GPU, else float32
    model_dir: str = "bert_pretraining"
    checkpoint_every: int = None  # None: `default_checkpoint_every(num_steps)`, 500 for the 1,000 steps (a resume: the run's)
    keep_checkpoints: int = 3
    log_every: int = 20
    validation_steps: int = 20
    seed: int = 0
    whole_word_masking: bool = False
    nsp: bool = True
    init_checkpoint: str = None
    steps_per_execution: object = "auto"  # 20 on a GPU/TPU (dividing checkpoint_every and log_every), 1 on a CPU
    jit_compile: object = "auto"
    profile_steps: str = None
    gradient_accumulation_steps: int = None
    dropout: float = 0.0
    attention_init_stddev: float = None  # from scratch only; None: sqrt(1.28 / hidden_dim); 0.02: BERT's
    weight_init: str = "normal"  # from scratch only: transformers' plain normal; "truncated_normal": BERT's (weight_init.py)
    position_init: str = "sinusoidal"  # from scratch only: sine/cosine starting values (position_init.py); "random": BERT's
    vocabulary_padding_multiple: int = None  # MLM projection on the vocabulary padded to a multiple (e.g. 128)
    attention_padding: str = "auto"  # "lengths" (cuDNN's fused attention) on a JAX GPU in bf16 without attention dropout
    recompute_activation: str = "on"  # JAX: the backward recomputes the feed-forward bias + GELU ("off": stores it)
    layer_norm_backward: str = "explicit"  # JAX: the LayerNorms' hand-written backward ("autodiff": JAX's)
    deterministic: bool = False
    verbose: int = 1

    def resolved(self):
        """Returns a copy with the bundled corpus filled in where no data was named."""
        config = dataclasses.replace(self)
        if config.init_checkpoint and (not config.vocab or config.lowercase is None):
            # Its own vocabulary and casing (a preset name, a Hub id or a directory): a real BERT goes on learning
            # on the bundled corpus or --train_files as it was trained. (Was the bundled corpus's vocab: "has
            # vocabulary_size=30522 but --vocab .../corpus/vocab.txt has 4291 tokens".)
            from keras_bert_impl.checkpoints.loading import resolve_tokenizer_assets

            try:
                assets = resolve_tokenizer_assets(config.init_checkpoint)
            except ValueError as error:  # (the library's own words name `from_preset`: the flag first)
                raise ValueError(f"--init_checkpoint: {error}") from None
            config.vocab = config.vocab or assets["vocabulary"]
            config.lowercase = assets["lowercase"] if config.lowercase is None else config.lowercase
        if config.lowercase is None:
            config.lowercase = True
        if not config.train_files:
            from keras_bert_impl.data.corpus import bundled_corpus

            corpus = bundled_corpus()
            config.train_files = [corpus["train"]]
            config.validation_files = config.validation_files or [corpus["valid"]]
            config.vocab = config.vocab or corpus["vocab"]
        if isinstance(config.train_files, str):
            config.train_files = [config.train_files]
        if isinstance(config.validation_files, str):
            config.validation_files = [config.validation_files]
        # No --vocab with --train_files stays None: `pretraining_run` refuses it once the files are checked
        # (`check_vocab`), so that a missing or bad training file is what the first line names.
        if config.warmup_steps is None:
            config.warmup_steps = default_warmup_steps(config.num_steps)
        if config.checkpoint_every is None:
            config.checkpoint_every = default_checkpoint_every(config.num_steps)
        return config


def default_warmup_steps(num_steps):
    """`--warmup_steps`'s default: min(100, num_steps // 10), so that a short trial run (`--num_steps 5`) starts
    without a flag to add, while the default run of 1,000 steps keeps its 100 (a resumed run keeps the warm-up it
    ran with: `pretraining_run`). A `num_steps` that is not an integer >= 1 is left to `check_flags`.

    >>> default_warmup_steps(1000), default_warmup_steps(300), default_warmup_steps(5), default_warmup_steps(900000)
    (100, 30, 0, 100)
    """
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
        return None
    return min(100, num_steps // 10)


def default_checkpoint_every(num_steps):
    """`--checkpoint_every`'s default: the largest divisor of `num_steps` up to 500, since training runs in epochs of
    `checkpoint_every` steps. The default run of 1,000 steps keeps its 500, a short trial run (`--num_steps 5`)
    checkpoints at its end, and a resumed run keeps the one it was started with (`pretraining_run`). Where that
    divisor would be under 50 and below `num_steps` (a prime `--num_steps 997`: a checkpoint and a held-out
    evaluation every step), 500, which `check_flags` refuses in one line that names both ways out. A `num_steps`
    that is not an integer >= 1 is left to `check_flags`.

    >>> [default_checkpoint_every(n) for n in (1000, 5, 50, 1200, 100000, 997)]
    [500, 5, 50, 400, 500, 500]
    """
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
        return None
    divisor = max(d for d in range(1, min(500, num_steps) + 1) if num_steps % d == 0)
    return divisor if divisor >= 50 or divisor == num_steps else 500


def backbone_config(config, vocabulary_size):
    """Backbone constructor arguments for `config.config` (size, preset name or JSON path)."""
    name = config.config
    if name.endswith(".json") or os.path.isfile(name):
        if not os.path.isfile(name):
            raise FileNotFoundError(f"--config {name!r}: no such JSON file.")
        with open(name) as f:
            try:
                arguments = json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(f"--config {name}, line {error.lineno}, column {error.colno}: not valid JSON "
                                 f"({error.msg})") from None
        if not isinstance(arguments, dict):
            raise ValueError(f"--config {name!r}: expected a JSON object of BertBackbone arguments.")
        try:  # before the run starts, with the file named (a Hugging Face config.json's keys are pointed to ours)
            check_arguments(BertBackbone, arguments)
        except TypeError as error:
            raise ValueError(f"--config {name!r}: {error}") from None
    else:
        from keras_bert_impl.presets import backbone_presets

        preset = PRESET_ALIASES.get(name, name)
        if preset not in backbone_presets:
            raise ValueError(
                f"--config {name!r}: expected one of {', '.join(PRESET_ALIASES)}, a preset name "
                f"or a JSON file of BertBackbone arguments."
            )
        arguments = dict(backbone_presets[preset]["config"])
    arguments["vocabulary_size"] = vocabulary_size
    if config.dropout is not None:
        arguments["dropout"] = config.dropout
    if config.sequence_length > arguments.get("max_sequence_length", 512):
        raise ValueError(
            f"--sequence_length={config.sequence_length} exceeds the model's max_sequence_length="
            f"{arguments.get('max_sequence_length', 512)}."
        )
    return arguments
