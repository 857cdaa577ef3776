"""BertPretrainer: the backbone with BERT's masked-LM and next-sentence heads."""

import os
import warnings

import keras
import numpy as np

from keras_bert_impl.layers.masked_lm_head import MaskedLMHead
from keras_bert_impl.layers.next_sentence_head import NextSentenceHead
from keras_bert_impl.models import quantization
from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.head_building import BACKBONE_INPUTS, freeze_unused_pooler, use_pooler
from keras_bert_impl.models.probabilities import softmax
from keras_bert_impl.checkpoints.own_preset import TASK_CONFIG_FILE, TASK_WEIGHTS_FILE
from keras_bert_impl.models.task import Task
from keras_bert_impl.models.task_saving import copy_variables, read_task_config


def _pooler_for(backbone, nsp):
    """The pooler trains with next-sentence prediction, which reads it, and is frozen without it (masked LM alone
    never reads it: every step warned "Gradients do not exist for variables ['pooled_dense/kernel', ...]", and
    transformers' `BertForMaskedLM` has no pooler at all)."""
    (use_pooler if nsp else freeze_unused_pooler)(backbone)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPretrainer(Task):
    """BERT pretraining model: masked LM + next sentence prediction (Devlin et al., 2018).

    A functional model over a `BertBackbone`: a `MaskedLMHead` scores the
    vocabulary at `mask_positions` with its output projection tied to the
    backbone's token embedding, and a `NextSentenceHead` classifies the pooled
    [CLS] output (0 = IsNext, 1 = NotNext). Both heads return float32 logits,
    also under mixed precision. Backend-agnostic (TensorFlow, JAX, PyTorch).

    Inputs: dict `token_ids, segment_ids, padding_mask` (batch, sequence_length)
    and `mask_positions` (batch, max_predictions_per_seq).
    Outputs: dict `{"mlm": (batch, max_predictions, vocabulary_size),
    "nsp": (batch, 2)}` (no `"nsp"` when `nsp=False`).

    Continued pretraining on your own text (keras-hub's `BertMaskedLM`
    habit): `BertPretrainer.from_preset(preset, nsp=False)` builds a
    `BertPretrainerPreprocessor`, and `fit(texts)` / `evaluate(texts)` then
    train and score masked LM on raw strings, masked anew every epoch.

    Training: `compile()` with no arguments sets the paper's losses (sparse
    cross-entropy on both heads; the MLM term is averaged over the real masked
    positions through `sample_weight`) and the metrics `mlm_accuracy`,
    `nsp_accuracy`; `fit` then logs `loss, mlm_loss, nsp_loss, mlm_accuracy,
    nsp_accuracy`. Map the pretraining pipeline's dicts to `(x, y,
    sample_weight)` with
    `keras_bert_impl.training.pretraining_inputs.split_features_labels`
    (tf.data), or `BertPretrainer.split_features_labels` (NumPy batches).

    Args:
        backbone: a `BertBackbone`.
        nsp: bool. Include the next-sentence head and loss (False gives a
            RoBERTa-style MLM-only model).
        vocabulary_padding_multiple: None, or an int such as 128: the MLM
            projection runs on the vocabulary zero-padded to a multiple of it
            (an even matmul shape for GPUs); outputs and weights are unchanged
            (`MaskedLMHead`).
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl import BertBackbone, BertPretrainer
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32,
    ...                         max_sequence_length=16)
    >>> model = BertPretrainer(backbone)
    >>> model.compile()
    >>> x = {"token_ids": np.ones((2, 8), "int32"),
    ...      "segment_ids": np.zeros((2, 8), "int32"),
    ...      "padding_mask": np.ones((2, 8), "int32"),
    ...      "mask_positions": np.array([[1, 2], [3, 0]], "int32")}
    >>> out = model(x)
    >>> tuple(out["mlm"].shape), tuple(out["nsp"].shape)
    ((2, 2, 100), (2, 2))
    >>> BertPretrainer.from_preset("all_minilm_l6_v2_en").backbone.num_layers
    6
    """

    head_shape_arguments = ("nsp",)

    def __init__(self, backbone, nsp=True, preprocessor=None, compile_defaults=False,
                 vocabulary_padding_multiple=None, **kwargs):
        if not isinstance(backbone, BertBackbone):
            raise TypeError(f"`backbone` must be a BertBackbone, got {type(backbone).__name__}.")
        _pooler_for(backbone, nsp)
        # === Layers ===
        self.masked_lm_head = MaskedLMHead(
            token_embedding=backbone.token_embedding,
            activation=backbone.activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            vocabulary_padding_multiple=vocabulary_padding_multiple,
            dtype=backbone.dtype_policy,
            name="mlm_head",
        )
        self.next_sentence_head = (
            NextSentenceHead(dtype=backbone.dtype_policy, name="nsp_head") if nsp else None
        )

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in BACKBONE_INPUTS
        }
        inputs["mask_positions"] = keras.Input(shape=(None,), dtype="int32", name="mask_positions")
        encoded = backbone({name: inputs[name] for name in BACKBONE_INPUTS})
        outputs = {
            "mlm": self.masked_lm_head(
                encoded["sequence_output"], mask_positions=inputs["mask_positions"]
            )
        }
        if nsp:
            outputs["nsp"] = self.next_sentence_head(encoded["pooled_output"])

        # === Config ===
        self.nsp = nsp
        self.vocabulary_padding_multiple = vocabulary_padding_multiple
        super().__init__(
            inputs=inputs,
            outputs=outputs,
            backbone=backbone,
            preprocessor=preprocessor,
            compile_defaults=compile_defaults,
            **kwargs,
        )

    raw_labels = None  # masked LM learns from the text alone

    def head_config(self):
        return {"nsp": self.nsp, "vocabulary_padding_multiple": self.vocabulary_padding_multiple}

    def quantize(self, mode=None, *args, filters=None, **kwargs):
        """`Task.quantize`, leaving the token embedding float: the masked-LM head multiplies by its matrix as the
        output projection (tied weights), which Keras's quantized `Embedding` does not provide."""
        tied = self.backbone.token_embedding

        def chosen(layer):
            return layer is not tied and quantization.matches_filters(layer, filters)

        return super().quantize(mode, *args, filters=chosen, **kwargs)

    @classmethod
    def from_preset(cls, preset, load_weights=True, preprocessor="auto", dtype=None, **kwargs):
        """`Task.from_preset`, and the checkpoint's own pretraining heads where it has them.

        A Hugging Face `BertForPreTraining` / `BertForMaskedLM` or an original
        Google checkpoint holds BERT's trained masked-LM transform and output
        bias (`cls.predictions`) and next-sentence classifier
        (`cls.seq_relationship`): they load too, so continued pretraining
        starts where the checkpoint's pretraining ended; so do the heads of a
        `recipes/pretrain.py` export or a `save_to_preset` directory (its
        masked-LM head also when `nsp` differs). Checkpoints without them
        (sentence-transformers, a bare `BertModel`) leave the heads new.
        `heads_loaded` lists what loaded.
        """
        model = super().from_preset(preset, load_weights=load_weights, preprocessor=preprocessor, dtype=dtype, **kwargs)
        model.heads_loaded = []
        if not load_weights:
            return model
        own_preset = isinstance(preset, (str, os.PathLike)) and os.path.isfile(
            os.path.join(os.fspath(preset), TASK_CONFIG_FILE))
        if not own_preset:
            from keras_bert_impl.checkpoints.loading import load_pretraining_heads

            _, model.heads_loaded = load_pretraining_heads(
                preset, model.masked_lm_head, model.next_sentence_head if model.nsp else None)
            return model
        saved = read_task_config(preset, cls)
        if saved is None:  # another task's preset: its backbone alone
            return model
        saved_nsp = saved["config"].get("nsp", True)
        if saved_nsp != model.nsp:
            # A pretraining export (MLM + NSP) read as MLM only, or the other way: its masked-LM head still loads.
            twin = cls(model.backbone, nsp=saved_nsp, vocabulary_padding_multiple=model.vocabulary_padding_multiple)
            saved_quantized = saved.get("quantized_layers") or {}
            quantization.quantize_layers(twin, saved_quantized)
            quantization.quantize_layers(model, {path: name for path, name in saved_quantized.items()
                                                 if path.startswith(model.masked_lm_head.name + "/")})
            twin.load_weights(os.path.join(os.fspath(preset), TASK_WEIGHTS_FILE))
            copy_variables(twin.masked_lm_head, model.masked_lm_head)
            _pooler_for(model.backbone, model.nsp)  # (the twin set the shared pooler for its own head)
        model.heads_loaded = ["masked LM", "next sentence"] if saved_nsp and model.nsp else ["masked LM"]
        return model

    def hugging_face_head(self):
        """`save_huggingface` writes a `BertForPreTraining` (`BertForMaskedLM` with `nsp=False`): transformers'
        fill-mask pipeline on it gives `fill_mask`'s predictions."""
        return {"architecture": "BertForPreTraining" if self.nsp else "BertForMaskedLM",
                "masked_lm_head": self.masked_lm_head, "next_sentence_head": self.next_sentence_head}

    @classmethod
    def preprocessor_class(cls):
        from keras_bert_impl.text.pretrainer_preprocessor import BertPretrainerPreprocessor

        return BertPretrainerPreprocessor

    def _raw_validation(self, validation_data, batch_size):
        """Held-out texts as `fit(texts)` takes them, without labels: `validation_data=texts`, or `(texts,)` (Keras's
        form of inputs alone); a `(texts, labels)` tuple is refused as `fit` refuses labels."""
        if isinstance(validation_data, tuple) and len(validation_data) == 1:
            validation_data = validation_data[0]
        texts = self._read_tables(validation_data)[0] if not isinstance(validation_data, tuple) else None
        if texts is not None and self.preprocessor is not None and self.preprocessor.is_raw_text(texts):
            try:
                return self._raw_dataset(texts, batch_size=batch_size)
            except ValueError as error:  # say which data it is
                raise ValueError(f"`validation_data`: {error}") from None
        return super()._raw_validation(validation_data, batch_size)

    def _raw_dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, seed=None, **options):
        if self.nsp:
            raise ValueError(
                "BertPretrainer(nsp=True) trains next-sentence prediction, which needs sentence pairs cut from "
                "documents, not a list of texts: build it with BertPretrainer.from_preset(preset, nsp=False) for "
                "masked-LM training on raw strings (continued pretraining, as RoBERTa and keras-hub's BertMaskedLM), "
                "or run recipes/pretrain.py --train_files ... for MLM + NSP on document files"
            )
        return super()._raw_dataset(x, y, sample_weight, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                    **options)

    def compile(self, optimizer="auto", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """Compiles with BERT's losses and metrics unless given others.

        Args:
            optimizer: a Keras optimizer or name; `"auto"`: AdamW(5e-5), as
                every task (continued pretraining of a preset; 5e-4 with LoRA,
                `Task.compile`); for the paper's
                set-up from scratch pass `keras_bert_impl.training.create_optimizer(...)`.
            loss, metrics, weighted_metrics: None for the defaults (sparse
                cross-entropy from logits on `mlm` and `nsp`; accuracy on both,
                weighted by `sample_weight` so that padding slots of the MLM
                predictions do not count).
            **kwargs: `keras.Model.compile` arguments (`jit_compile`,
                `steps_per_execution`, ...).
        """
        heads = ("mlm", "nsp") if self.nsp else ("mlm",)
        self._compiled_with_defaults = loss is None and metrics is None and weighted_metrics is None
        if loss is None:
            loss = {
                head: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                for head in heads
            }
        if weighted_metrics is None and metrics is None:
            if self.nsp:
                # Keras prefixes each metric with its output: mlm_accuracy, nsp_accuracy.
                weighted_metrics = {
                    head: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
                    for head in heads
                }
            else:
                # With a single output Keras adds no prefix and no per-output loss.
                weighted_metrics = {
                    "mlm": [
                        keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy"),
                        keras.metrics.SparseCategoricalCrossentropy(from_logits=True, name="mlm_loss"),
                    ]
                }
        super().compile(
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    def _takes_filler_rows(self):
        # The default losses and metrics weigh every masked slot, and the filler rows' weigh 0.
        return getattr(self, "_compiled_with_defaults", True)

    def compile_from_config(self, config):
        """Re-compiles a loaded `.keras` model (optimizer, losses, metrics, options)."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    # === Pipelines ===

    def fill_mask(self, texts, top_k=5, batch_size=32, targets=None):
        """The likeliest pieces for each `[MASK]` in raw text: Hugging Face's fill-mask pipeline, on every backend.

        Args:
            texts: a string or a list of strings, each with one or more
                `[MASK]` written where a piece is missing (in capitals).
            top_k: int >= 1, the predictions per `[MASK]`.
            batch_size: int, texts per forward pass.
            targets: a string or a list of them (the pipeline's `targets`): only these pieces are ranked (at most
                `top_k` of them), with their probabilities over the whole vocabulary. A target that is not a piece
                of the vocabulary is scored as its first piece (`"Paris"` as `paris` in an uncased vocabulary),
                with a warning, as the pipeline does.

        Returns:
            Per `[MASK]`, a list of `top_k` dicts, likeliest first:
            `{"score": probability, "token": id, "token_str": piece,
            "sequence": the text with this [MASK] filled}` (`sequence` keeps
            the text's own casing and spacing; other masks stay `[MASK]`).
            As Hugging Face nests them: a text with one `[MASK]` gives that
            list, one with several a list per `[MASK]`, and a list of texts a
            list of those.

        Example:
        >>> pretrainer = BertPretrainer.from_preset("bert_base_en_uncased", nsp=False)  # doctest: +SKIP
        >>> pretrainer.fill_mask("Paris is the [MASK] of France.", top_k=1)  # doctest: +SKIP
        [{'score': ..., 'token': ..., 'token_str': ..., 'sequence': 'Paris is the ... of France.'}]
        """
        self._check_preprocessor()
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= self.backbone.vocabulary_size:
            raise ValueError(f"`top_k` must be an int in [1, {self.backbone.vocabulary_size}], got {top_k!r}.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        texts = self._read_tables(texts)[0]  # a Series or dataset column: a list
        one_text = isinstance(texts, (str, bytes))
        texts = [texts] if one_text else list(texts)
        rows = self.preprocessor.encode_masked_texts(texts)
        longest = self.backbone.max_sequence_length
        for index, row in enumerate(rows):
            if len(row) > longest:
                raise ValueError(
                    f"Text {index} is {len(row)} pieces with [CLS] and [SEP], more than the backbone's "
                    f"{longest} positions: shorten it."
                )
        tokenizer = self.preprocessor.tokenizer
        marker = tokenizer.id_to_token(tokenizer.mask_token_id)
        candidates = None if targets is None else _target_ids(targets, tokenizer)
        if candidates is not None:
            top_k = min(top_k, len(candidates))
        results = []
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            probabilities, positions = self._masked_probabilities(batch, tokenizer)
            for offset in range(len(batch)):
                text = texts[start + offset]
                text = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
                per_mask = []
                for slot in range(len(positions[offset])):
                    scores = probabilities[offset, slot]
                    if candidates is None:
                        best = np.argsort(-scores, kind="stable")[:top_k]
                    else:
                        best = candidates[np.argsort(-scores[candidates], kind="stable")[:top_k]]
                    per_mask.append([
                        {"score": float(scores[i]), "token": int(i), "token_str": tokenizer.id_to_token(int(i)),
                         "sequence": _filled(text, slot, tokenizer.id_to_token(int(i)), marker)}
                        for i in best
                    ])
                results.append(per_mask[0] if len(per_mask) == 1 else per_mask)
        return results[0] if one_text else results

    def _masked_probabilities(self, rows, tokenizer):
        """A batch of id lists -> softmax probabilities `(rows, masks, vocabulary)` at each row's masks, and the
        mask positions of each row."""
        width = max(len(row) for row in rows)
        positions = [[i for i, token in enumerate(row) if token == tokenizer.mask_token_id] for row in rows]
        token_ids = np.full((len(rows), width), tokenizer.pad_token_id, "int32")
        mask_positions = np.zeros((len(rows), max(map(len, positions))), "int32")
        for index, row in enumerate(rows):
            token_ids[index, : len(row)] = row
            mask_positions[index, : len(positions[index])] = positions[index]
        x = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
             "padding_mask": (np.arange(width) < np.array([[len(row)] for row in rows])).astype("int32"),
             "mask_positions": mask_positions}
        return softmax(keras.ops.convert_to_numpy(self(x, training=False)["mlm"])), positions

    @staticmethod
    def split_features_labels(features, nsp=True):
        """Maps a pipeline dict (numpy or tensors) to `(x, y, sample_weight)`.

        See `keras_bert_impl.training.pretraining_inputs.split_features_labels`
        for the tf.data version and the weighting; this one is backend-free
        and meant for numpy batches.
        """
        import numpy as np

        weights = np.asarray(features["mask_weights"], "float32")
        total = max(float(weights.sum()), 1.0)
        x = {name: features[name] for name in (*BACKBONE_INPUTS, "mask_positions")}
        y = {"mlm": features["mask_ids"]}
        sample_weight = {"mlm": weights * (weights.size / total)}
        if nsp:
            labels = np.asarray(features["next_sentence_labels"])
            y["nsp"] = labels
            sample_weight["nsp"] = np.ones(labels.shape, "float32")
        return x, y, sample_weight


def _target_ids(targets, tokenizer):
    """`fill_mask`'s `targets` -> the sorted ids of their pieces: a piece of the vocabulary is itself, any other
    text its first piece (warned, as Hugging Face's fill-mask pipeline does), a text with none is left out."""
    if isinstance(targets, str):
        targets = [targets]
    if not isinstance(targets, (list, tuple)) or not targets:
        raise ValueError(f"`targets` must be a string or a non-empty list of strings, got {targets!r}.")
    vocabulary = {token: index for index, token in enumerate(tokenizer.get_vocabulary())}
    ids = []
    for index, target in enumerate(targets):
        if not isinstance(target, str):
            raise ValueError(f"`targets`: item {index} is {type(target).__name__} {target!r}, expected a string.")
        if target in vocabulary:
            ids.append(vocabulary[target])
            continue
        pieces = tokenizer([target]).to_list()[0]
        if not pieces:
            warnings.warn(f"fill_mask: target {target!r} has no piece in the vocabulary: it is left out.",
                          stacklevel=3)
            continue
        warnings.warn(f"fill_mask: target {target!r} is not a piece of the vocabulary: it is scored as its first "
                      f"piece, {tokenizer.id_to_token(pieces[0])!r} (as Hugging Face's fill-mask pipeline does).",
                      stacklevel=3)
        ids.append(pieces[0])
    if not ids:
        raise ValueError(f"`targets` {list(targets)!r}: none has a piece in the vocabulary.")
    return np.array(sorted(set(ids)))


class BertMaskedLM:
    """keras-hub's name for a masked-LM-only BERT: builds a `BertPretrainer` with `nsp=False`.

    Code written for `keras_hub.models.BertMaskedLM` runs with the import
    changed: `BertMaskedLM.from_preset(preset)` and `BertMaskedLM(backbone,
    preprocessor)` give a `BertPretrainer(nsp=False)` (the model is saved
    and loaded under that one name), whose `fit(texts)` masks raw strings
    on the fly. `nsp=True` may still be passed.

    Example:
    >>> model = BertMaskedLM.from_preset("all_minilm_l6_v2_en", sequence_length=32)
    >>> type(model).__name__, model.nsp, model.preprocessor.sequence_length
    ('BertPretrainer', False, 32)
    """

    presets = BertPretrainer.presets

    def __new__(cls, backbone, preprocessor=None, **kwargs):
        kwargs.setdefault("nsp", False)
        return BertPretrainer(backbone, preprocessor=preprocessor, **kwargs)

    @classmethod
    def from_preset(cls, preset, load_weights=True, preprocessor="auto", dtype=None, **kwargs):
        """`BertPretrainer.from_preset(preset, nsp=False, ...)`."""
        kwargs.setdefault("nsp", False)
        return BertPretrainer.from_preset(preset, load_weights=load_weights, preprocessor=preprocessor, dtype=dtype,
                                          **kwargs)


def _filled(text, slot, piece, marker):
    """`text` with its `slot`-th `marker` replaced by `piece` (a `##` continuation glued to the text before it).

    >>> _filled("She went home[MASK] at [MASK].", 0, "early", "[MASK]")
    'She went home early at [MASK].'
    >>> _filled("un [MASK]", 0, "##able", "[MASK]")
    'unable'
    """
    before, after = "", text
    for _ in range(slot + 1):
        head, _, after = after.partition(marker)
        before += head + marker
    before = before[: -len(marker)]
    if piece.startswith("##"):
        return before.rstrip() + piece[2:] + after
    # A whole piece is a word of its own: keep it apart from letters or digits written against the marker.
    if before[-1:].isalnum() and piece[:1].isalnum():
        piece = " " + piece
    if after[:1].isalnum() and piece[-1:].isalnum():
        piece += " "
    return before + piece + after
