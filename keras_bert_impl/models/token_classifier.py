"""BertTokenClassifier: a label per token over BERT's sequence output (CoNLL-2003 NER)."""

import keras
import numpy as np

from keras_bert_impl.models.backbone import bert_kernel_initializer
from keras_bert_impl.models.entity_f1 import EntityF1
from keras_bert_impl.models.head_building import backbone_inputs, check_dropout, class_count, freeze_unused_pooler
from keras_bert_impl.models.prediction_dicts import EntityDict
from keras_bert_impl.models.probabilities import softmax
from keras_bert_impl.models.task import LABEL_ATTRIBUTES, Task
from keras_bert_impl.raw_text import not_text_error

IGNORE_LABEL = -1


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertTokenClassifier(Task):
    """Token classification (tagging) head on a `BertBackbone`: dropout and a dense layer per token.

    Following the BERT paper (section 4.3), a word's label sits on its first
    WordPiece; every other position (later pieces, [CLS], [SEP], padding,
    document context) carries label -1, which the default loss
    (`SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)`,
    averaged over the labelled positions only) and the default metric
    (`MaskedTokenAccuracy`) skip.

    Inputs are the backbone's dict `{"token_ids", "segment_ids",
    "padding_mask"}`; the output is logits `(batch, sequence_length,
    num_classes)`. The pooler is unused, so its weights are frozen (no
    "gradients do not exist" warning). Backend-agnostic (no TensorFlow import).

    `BertTokenClassifier.from_preset(preset, label_names=[...])` adds a
    `BertTokenClassifierPreprocessor`; then `fit` takes word lists (or
    sentences) with per-word tag names, and `predict_entities(texts)` returns
    the entities of raw text with character offsets.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int, number of tags (e.g. 9 for CoNLL-2003 IOB2);
            optional when `label_names` is given.
        dropout: float, dropout on the sequence output before the dense layer.
        preprocessor: a `BertTokenClassifierPreprocessor` or None.
        label_names: the tags in id order (e.g. `["O", "B-PER", "I-PER", ...]`),
            saved with the model; needed by `predict_entities` and to `fit`
            on tag names.
        compile_defaults: compile now with the default loss and metric (AdamW
            optimizer at 5e-5); call `compile` again to change them.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl import BertBackbone, BertTokenClassifier
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
    >>> model = BertTokenClassifier(backbone, num_classes=9)
    >>> inputs = {"token_ids": np.ones((2, 8), "int32"), "segment_ids": np.zeros((2, 8), "int32"),
    ...           "padding_mask": np.ones((2, 8), "int32")}
    >>> tuple(model.predict(inputs, verbose=0).shape)
    (2, 8, 9)
    >>> labels = np.full((2, 8), -1); labels[:, 1] = 3
    >>> loss = model.evaluate(inputs, labels, verbose=0, return_dict=True)["loss"]
    >>> bool(loss > 0)
    True

    From a preset, on words and raw text:
    >>> tagger = BertTokenClassifier.from_preset("all_minilm_l6_v2_en", label_names=["O", "B-LOC", "I-LOC"])
    >>> history = tagger.fit([["I", "love", "New", "York"]], [["O", "O", "B-LOC", "I-LOC"]], verbose=0)
    >>> entities = tagger.predict_entities("I love New York.")  # a list of dicts
    >>> all(set(e) == {"text", "type", "start", "end", "score"} for e in entities)
    True
    """

    hugging_face_attributes = {**Task.hugging_face_attributes, **LABEL_ATTRIBUTES}

    def __init__(
        self,
        backbone,
        num_classes=None,
        dropout=0.1,
        preprocessor=None,
        label_names=None,
        compile_defaults=True,
        **kwargs,
    ):
        self.check_arguments(kwargs)
        num_classes, label_names = class_count(num_classes, label_names, " (or give `label_names`)")
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"`label_names` must list {num_classes} tags, got {len(label_names)}: {label_names!r}.")
        dropout = check_dropout(dropout)

        # === Layers ===
        freeze_unused_pooler(backbone)
        self.output_dropout = keras.layers.Dropout(dropout, dtype=backbone.dtype_policy, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=bert_kernel_initializer(),
            dtype=backbone.dtype_policy,
            name="logits",
        )

        # === Functional Model ===
        inputs = backbone_inputs()
        x = backbone(inputs)["sequence_output"]
        x = self.output_dropout(x)
        logits = self.output_dense(x)
        # Logits in float32 so that the loss is stable under mixed precision.
        logits = keras.layers.Activation("linear", dtype="float32", name="float32_logits")(logits)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = label_names
        super().__init__(
            inputs=inputs,
            outputs=logits,
            backbone=backbone,
            preprocessor=preprocessor,
            compile_defaults=compile_defaults,
            **kwargs,
        )

    hugging_face_architectures = ("BertForTokenClassification",)
    hugging_face_head_prefix = "classifier"
    raw_labels = ("tags", "sentences, tags")
    raw_text_columns = (("tokens",),)

    def hugging_face_head_dense(self):
        return self.output_dense

    @classmethod
    def head_arguments_from_checkpoint(cls, head, kwargs):
        if "label_names" in kwargs or kwargs.get("num_classes", len(head["labels"])) != len(head["labels"]):
            return kwargs
        return {**kwargs, "label_names": head["labels"]}

    def takes_checkpoint_head(self, head):
        return self.num_classes == len(head["labels"])

    def head_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout, "label_names": self.label_names}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "num_labels" in config:  # files saved before the argument was renamed
            config["num_classes"] = config.pop("num_labels")
        return super().from_config(config)

    def serving_outputs(self, outputs):
        return {"logits": outputs}  # per WordPiece; the first piece of each word is the word's

    # `export`'s `serve(text)`: `predict_entities` in the graph (words, their tags, the entities).
    serving_text_graph = "entities"

    @property
    def serving_text_inputs(self):
        """`serve(text)` where the tags have names (`predict_entities` needs them); else packed features only."""
        return {"serve": ("text",)} if self.label_names is not None else {}

    @classmethod
    def preprocessor_class(cls):
        from keras_bert_impl.text.token_classifier_preprocessor import BertTokenClassifierPreprocessor

        return BertTokenClassifierPreprocessor

    def _check_raw_labels(self, x, y, method):
        """Sentences that carry their tags (`tasks.tagging.read_conll`'s `ConllSentence`, `.words` and `.tags`)
        given as `x` alone: one line showing the two lists to give."""
        if y is None and isinstance(x, (list, tuple)) and x and hasattr(x[0], "words") and hasattr(x[0], "tags"):
            raise ValueError(f"`x` holds sentences with their tags ({type(x[0]).__name__}, as read_conll gives): "
                             f"give {method}([s.words for s in sentences], [s.tags for s in sentences]).")
        super()._check_raw_labels(x, y, method)

    def default_loss(self):
        """Cross-entropy from logits, ignoring label -1, averaged over the labelled tokens."""
        return token_classification_loss()

    def loss_weight(self, x, y, sample_weight):
        """The batch's labelled tokens (label != -1), what the default loss averages over."""
        return keras.ops.sum(keras.ops.cast(keras.ops.not_equal(y, IGNORE_LABEL), "float32"))

    def default_metrics(self):
        """`accuracy`, the accuracy over the tagged tokens (named as a `BertClassifier`'s is: `history["accuracy"]`)."""
        return [MaskedTokenAccuracy()]

    def metric_for_name(self, name):
        """`"accuracy"` (or `"acc"`, `"sparse_categorical_accuracy"`) is the accuracy over the tagged tokens,
        `MaskedTokenAccuracy` (Keras's would count [CLS], [SEP], later WordPieces and padding, label -1, as wrong);
        `"f1"` (or `"entity_f1"`, `"seqeval"`) is conlleval's entity F1, `EntityF1`."""
        if name in ("accuracy", "acc", "sparse_categorical_accuracy"):
            return MaskedTokenAccuracy(name=name)
        if name in ("f1", "entity_f1", "seqeval"):
            if self.label_names is None:
                raise ValueError(
                    f"metrics=[{name!r}] is the F1 over entities, which the tags' names define (B-PER, I-PER, ...): "
                    "build the tagger with label_names=[...]."
                )
            return EntityF1(self.label_names, name=name)
        return None

    def _skips_filler_rows(self, metric):
        """The tagger's own metrics, by name or object, skip label -1, which every position of a filler row has: its
        batches keep one step shape per bucket with them (a short last batch recompiles the step on JAX: 37 s
        instead of 3.3 s for a second `fit` of 16 CoNLL sentences, `compile(metrics=["accuracy", "f1"])`)."""
        if isinstance(metric, str):
            metric = self.metric_for_name(metric)
        return isinstance(metric, (MaskedTokenAccuracy, EntityF1))

    def check_loss(self, loss):
        """A sparse cross-entropy must read logits and skip label -1 (TensorFlow stops on the label in the step;
        JAX and PyTorch would train on it)."""
        if loss == "sparse_categorical_crossentropy" or (
            isinstance(loss, keras.losses.SparseCategoricalCrossentropy)
            and (loss.ignore_class != IGNORE_LABEL or not loss.from_logits)
        ):
            raise ValueError(
                "BertTokenClassifier gives logits, and its labels are -1 at the positions it does not tag ([CLS], "
                "[SEP], later WordPieces, padding): use keras.losses.SparseCategoricalCrossentropy(from_logits=True, "
                "ignore_class=-1), or loss='auto'."
            )

    # === Raw text ===

    def _raw_dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, seed=None, **options):
        if y is not None:
            y = [self._tag_ids(tags, index) for index, tags in enumerate(y)]
        return super()._raw_dataset(x, y, sample_weight, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                    **options)

    def _tag_ids(self, tags, index):
        if isinstance(tags, (str, bytes)) or np.ndim(tags) == 0:
            raise ValueError(
                f"Example {index}: its tags must be a list (one per word), got {tags!r}: `y` is one list of tags per "
                "sentence, as `x` is one list of words per sentence (one sentence: x=[words], y=[tags])."
            )
        ids = []
        for tag in tags:
            if isinstance(tag, (int, np.integer)) and not isinstance(tag, bool):
                if not 0 <= tag < self.num_classes:
                    raise ValueError(
                        f"Example {index}: tag {int(tag)} is not a tag of this {self.num_classes}-tag model "
                        f"(ids 0..{self.num_classes - 1})."
                    )
                ids.append(int(tag))
                continue
            if self.label_names is None:
                raise ValueError("Tags given by name need `label_names` (build with label_names=[...]).")
            try:
                ids.append(self.label_names.index(str(tag)))
            except ValueError:
                raise ValueError(
                    f"Example {index}: tag {tag!r} is not one of the model's label_names {self.label_names}."
                ) from None
        return ids

    def _check_feature_labels(self, y, method):
        """Per-token tag ids given with features: each a tag (0..num_classes - 1) or -1 (no label there); one line
        naming the first row outside (JAX trained on them silently)."""
        if not hasattr(y, "__len__"):
            return
        ids = np.asarray(y)
        if ids.size == 0 or ids.dtype.kind not in "iu":
            return
        outside = (ids < IGNORE_LABEL) | (ids >= self.num_classes)
        if outside.any():
            row = int(np.argwhere(outside)[0][0])
            raise ValueError(f"Row {row}: tag id {int(ids[outside][0])} is not a tag of this {self.num_classes}-tag "
                             f"tagger (ids 0..{self.num_classes - 1}, or {IGNORE_LABEL} where nothing is labelled); "
                             f"{int(outside.sum())} id(s) in all are outside.")

    def predict_tags(self, x, batch_size=32, aggregation_strategy="first"):
        """A tag per word: for each sentence, the list of its words' tags (`label_names`), in word order.

        For pre-tokenised text (CoNLL's words, your own word lists): `x` is what `fit` takes, a list of word lists
        (one sentence: `[words]`), or sentences as strings, split into words as CoNLL-2003 is tokenised
        (`split_words`). Each word takes the tag of its first WordPiece, as the tagger is trained (Hugging Face's
        `aggregation_strategy="none"` on words), or of all its pieces with `aggregation_strategy="average"` or
        `"max"` (as in `predict_entities`); long sentences span several rows, every word is tagged; a word
        with no WordPieces (a control or zero-width character) is tagged "O".

        Returns:
            A list of tags for a string; a list of such lists for a list.

        Example:
        >>> tagger.predict_tags([["EU", "rejects", "German", "call"]])  # doctest: +SKIP
        [['B-ORG', 'O', 'B-MISC', 'O']]
        """
        _check_aggregation(aggregation_strategy, "predict_tags")
        single = isinstance(x, str)
        word_lists = self.preprocessor.as_word_lists(self._checked_input(x, "predict_tags"))
        tags = [tags for tags, _ in self._tagged_words(word_lists, batch_size, aggregation_strategy)]
        return tags[0] if single else tags

    def predict_entities(self, texts, batch_size=32, aggregation_strategy="first"):
        """Named entities of raw text: for each text, a list of `{"text", "type", "start", "end", "score"}`.

        Each text is split into words as CoNLL-2003 is tokenised
        (`keras_bert_impl.text.token_classifier_preprocessor.split_words`),
        each word is tagged at its first WordPiece (long texts span several
        rows), and tags are chunked into entities by conlleval's rules (IOB1,
        IOB2 or IOBES). `start`/`end` are character offsets into the original
        string (`end` exclusive; `text == texts[i][start:end]`), exact for any
        Unicode; `score` is the mean probability of the entity's word tags.
        Words you split yourself: `predict_tags(word_lists)`, a tag per word.

        Args:
            texts: a string or a list of strings.
            batch_size: int.
            aggregation_strategy: how a word of several WordPieces gets its tag, with Hugging Face's names
                (its `pipeline("ner", aggregation_strategy=...)` gives the same entities on the same weights):
                `"first"` (default), the tag of its first piece, as the tagger is trained; `"average"`, the most
                probable tag of its pieces' mean probabilities; `"max"`, the tag of its most confident piece.
                The pipeline's `"simple"` and `"none"` tag pieces, not words: refused in one line.

        Returns:
            A list of entities for a string; a list of such lists for a list.
        """
        from keras_bert_impl.metrics.conll import extract_entities

        _check_aggregation(aggregation_strategy, "predict_entities")
        texts = self._checked_input(texts, "predict_entities")
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        for index, text in enumerate(texts):
            if isinstance(text, (list, tuple)) and all(isinstance(word, str) for word in text):
                raise ValueError(f"predict_entities reads raw text (a string or a list of strings), and text {index} "
                                 "is a list of words: give the sentence as one string, e.g. ' '.join(words), or "
                                 "call predict_tags(word_lists) for a tag per word.")
            if not isinstance(text, str):  # the raw-text message of the preprocessors
                raise not_text_error(index, text)
        spans = [self.preprocessor.split_words(text) for text in texts]
        results = []
        word_lists = [[word for word, _, _ in words] for words in spans]
        for text, words, (tags, scores) in zip(texts, spans, self._tagged_words(word_lists, batch_size,
                                                                                aggregation_strategy)):
            entities = []
            for entity_type, first, last in extract_entities(tags):
                start, end = words[first][1], words[last - 1][2]
                entities.append(EntityDict(
                    text=text[start:end],
                    type=entity_type,
                    start=start,
                    end=end,
                    score=float(np.mean(scores[first:last])),
                ))
            results.append(entities)
        return results[0] if single else results

    def _checked_input(self, x, method):
        """`x` (sentences or word lists, as `fit` takes them; a Series or dataset column as a list), after the checks
        both helpers share: a preprocessor, `label_names`, and at least one example."""
        self._check_preprocessor()
        if self.label_names is None:
            raise ValueError(f"{method} needs the model's `label_names` (the tags in id order).")
        x = self._read_tables(x)[0]  # a Series or dataset column: a list
        if not isinstance(x, str) and len(x) == 0:  # (was a Keras-internal UnboundLocalError)
            raise ValueError("No examples: the list of sentences is empty.")
        return x

    def _tagged_words(self, word_lists, batch_size, aggregation_strategy="first"):
        """For each word list, `(tags, scores)`: each word's tag and its probability, from its first WordPiece
        (`"first"`), its pieces' mean probabilities (`"average"`) or its most confident piece (`"max"`)."""
        if not any(word_lists):  # empty sentences only: nothing to run the model on
            return [([], []) for _ in word_lists]
        features, placements = self.preprocessor.word_windows(word_lists)
        logits = np.asarray(self.predict(features, batch_size=batch_size, verbose=0), "float32")
        probabilities = softmax(logits)
        piece_ends = _piece_ends(placements, np.asarray(features["padding_mask"]).sum(-1))
        tagged = []
        for placement in placements:
            tags, scores = [], []
            for where in placement:
                if where is None:  # a word with no WordPieces
                    tags.append("O")
                    scores.append(1.0)
                    continue
                row, position = where
                pieces = probabilities[row, position : piece_ends[where]]  # (the word's pieces, in its row)
                if aggregation_strategy == "average":
                    word = pieces.mean(0)
                elif aggregation_strategy == "max":
                    word = pieces[int(pieces.max(-1).argmax())]
                else:
                    word = pieces[0]
                label = int(word.argmax())
                tags.append(self.label_names[label])
                scores.append(float(word[label]))
            tagged.append((tags, scores))
        return tagged


_WORD_AGGREGATIONS = ("first", "average", "max")


def _check_aggregation(aggregation_strategy, method):
    """Refuses, in one line, an `aggregation_strategy` that is not one of Hugging Face's word-level ones."""
    if aggregation_strategy in _WORD_AGGREGATIONS:
        return
    hint = ""
    if aggregation_strategy in ("simple", "none"):
        hint = (f"; the pipeline's {aggregation_strategy!r} tags every WordPiece on its own, which a tagger trained on "
                "each word's first piece (as this one, and transformers' run_ner.py) does not learn: 'first' is "
                "the closest")
    raise ValueError(f"{method} takes aggregation_strategy 'first', 'average' or 'max' (Hugging Face's names for "
                     f"how a word of several WordPieces is tagged), got {aggregation_strategy!r}{hint}.")


def _piece_ends(placements, row_lengths):
    """Where each word's WordPieces end in its row, keyed by `(row, position)` of its first piece: at the next
    word's first piece, or at the row's [SEP] (`word_windows` rows hold only the words they tag)."""
    firsts = {}
    for placement in placements:
        for where in placement:
            if where is not None:
                firsts.setdefault(where[0], []).append(where[1])
    ends = {}
    for row, positions in firsts.items():
        positions.sort()
        for position, following in zip(positions, positions[1:] + [int(row_lengths[row]) - 1]):
            ends[(row, position)] = following
    return ends


def token_classification_loss():
    """Cross-entropy on logits that ignores label -1 and averages over the labelled tokens.

    Example:
    >>> import numpy as np
    >>> loss = token_classification_loss()
    >>> logits = np.zeros((1, 3, 2), "float32")
    >>> round(float(loss(np.array([[-1, 0, 1]]), logits)), 4)  # log(2) over the 2 labelled tokens
    0.6931
    """
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MaskedTokenAccuracy(keras.metrics.Mean):
    """Accuracy of the argmax over the positions whose label is not -1.

    Args:
        name: metric name.
        ignore_class: the label value to skip.

    Example:
    >>> import numpy as np
    >>> m = MaskedTokenAccuracy()
    >>> logits = np.array([[[1., 0.], [0., 1.], [0., 1.]]])
    >>> m.update_state(np.array([[0, 0, -1]]), logits)
    >>> float(m.result())
    0.5
    """

    def __init__(self, name="accuracy", ignore_class=IGNORE_LABEL, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.ignore_class = ignore_class

    def update_state(self, y_true, y_pred, sample_weight=None):
        from keras import ops

        y_true = ops.cast(y_true, "int32")
        if len(y_true.shape) == len(y_pred.shape):
            y_true = ops.squeeze(y_true, axis=-1)
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        valid = ops.cast(ops.not_equal(y_true, self.ignore_class), "float32")
        if sample_weight is not None:
            valid = valid * ops.cast(sample_weight, "float32")
        correct = ops.cast(ops.equal(predicted, y_true), "float32")
        return super().update_state(correct, sample_weight=valid)

    def get_config(self):
        return {**super().get_config(), "ignore_class": self.ignore_class}
