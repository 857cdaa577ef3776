"""BertTextEmbedder: sentence embeddings (mean or [CLS] pooling, normalised) and their similarity."""

import keras
import numpy as np

from keras_bert_impl.layers.sequence_pooling import SequencePooling
from keras_bert_impl.models.head_building import backbone_inputs, freeze_unused_pooler
from keras_bert_impl.models.task import Task
from keras_bert_impl.models.user_inputs import numpy_text_as_lists


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertTextEmbedder(Task):
    """One vector per text from a `BertBackbone`: mean pooling over the real tokens (or [CLS]), L2-normalised.

    `from_preset` on a sentence-transformers checkpoint such as
    all-MiniLM-L6-v2 embeds as sentence-transformers does: its pooling,
    normalisation and the length it cuts texts to (`max_seq_length`, 256 for
    all-MiniLM-L6-v2) are the defaults (`checkpoints/sentence_transformers.py`),
    so the vectors are sentence-transformers' own. `encode` takes raw strings
    (through the preprocessor) or feature dicts; `similarity` gives the cosine
    similarity of two sets of texts or embeddings.

    Args:
        backbone: a `BertBackbone`.
        pooling: `"mean"` (sentence-transformers) or `"cls"`.
        normalize: L2-normalise the embeddings.
        preprocessor: a `BertClassifierPreprocessor` (one segment) or None.

    Example:
    >>> embedder = BertTextEmbedder.from_preset("all_minilm_l6_v2_en")
    >>> embedder.preprocessor.sequence_length, embedder.pooling  # sentence_bert_config.json, 1_Pooling/config.json
    (256, 'mean')
    >>> vectors = embedder.encode(["A man is eating food.", "A man eats a meal.", "The sky is blue."])
    >>> vectors.shape
    (3, 384)
    >>> scores = embedder.similarity(vectors[:1], vectors[1:])
    >>> bool(scores[0, 0] > scores[0, 1])
    True
    """

    def __init__(self, backbone, pooling="mean", normalize=True, preprocessor=None, compile_defaults=False, **kwargs):
        if pooling == "mean":
            freeze_unused_pooler(backbone)
        # === Layers ===
        self.pooling_layer = SequencePooling(pooling, normalize=normalize, name="pooling")

        # === Functional Model ===
        inputs = backbone_inputs()
        sequence_output = backbone(inputs)["sequence_output"]
        outputs = self.pooling_layer(sequence_output, padding_mask=inputs["padding_mask"])

        # === Config ===
        self.pooling = pooling
        self.normalize = normalize
        super().__init__(
            inputs=inputs,
            outputs=outputs,
            backbone=backbone,
            preprocessor=preprocessor,
            compile_defaults=compile_defaults,
            **kwargs,
        )

    serving_text_inputs = {"serve": ("text",)}

    @classmethod
    def from_preset(cls, preset, load_weights=True, preprocessor="auto", dtype=None, **kwargs):
        """`Task.from_preset`, with a sentence-transformers checkpoint's own `sequence_length` (its
        `max_seq_length`), `pooling` and `normalize` as the defaults of the arguments not given
        (`checkpoints.sentence_transformers.embedding_settings`)."""
        from keras_bert_impl.checkpoints.loading import preset_embedding_settings

        settings = preset_embedding_settings(preset, choose_pooling="pooling" not in kwargs)
        if not (isinstance(preprocessor, str) and preprocessor == "auto"):
            settings.pop("sequence_length", None)  # (the preprocessor given is the user's, with its own length)
        return super().from_preset(preset, load_weights=load_weights, preprocessor=preprocessor, dtype=dtype,
                                   **{**settings, **kwargs})
    default_loss_averages_sample_weights = True

    def head_config(self):
        return {"pooling": self.pooling, "normalize": self.normalize}

    def hugging_face_embedding(self):
        """How this embedder embeds, written beside its transformers files by `save_huggingface`: before, the
        directory held no sentence-transformers files, and read back it cut texts at 128 tokens, not 256 (a
        410-token text at cosine 0.75 to the embedder's own vector)."""
        length = getattr(self.preprocessor, "sequence_length", None) or self.backbone.max_sequence_length
        return {"sequence_length": length, "pooling": self.pooling, "normalize": self.normalize}

    def serving_outputs(self, outputs):
        return {"embeddings": outputs}

    @classmethod
    def preprocessor_class(cls):
        from keras_bert_impl.text.classifier_preprocessor import BertClassifierPreprocessor

        return BertClassifierPreprocessor

    def default_loss(self):
        """Cosine similarity to the target vectors (its negative: -1 for a perfect match), averaged over the sample
        weights, so that the weight-0 filler rows of a raw-text batch count for nothing."""
        return keras.losses.CosineSimilarity(reduction="mean_with_sample_weight")

    def _raw_dataset(self, x, y=None, sample_weight=None, **kwargs):
        if y is not None:
            check_target_vectors(y, self.backbone.hidden_dim)
        return super()._raw_dataset(x, y, sample_weight, **kwargs)

    def encode(self, texts, batch_size=32, convert_to_numpy=True, convert_to_tensor=False, normalize_embeddings=False,
               show_progress_bar=None):
        """Embeddings of raw strings or a feature dict: float32 NumPy `(n, hidden)`, or `(hidden,)` for one string.

        As sentence-transformers' `encode`: a single string (or a 0-d NumPy
        array of one) gives one vector (a list of one string gives
        `(1, hidden)`); `convert_to_numpy=True` (the default) is the NumPy
        array; `convert_to_tensor=True` gives the same values as a tensor of
        the Keras backend (a `torch.Tensor` on PyTorch, as sentence-transformers
        gives). `convert_to_numpy=False` alone, sentence-transformers' list of
        one tensor per text, is refused in one line. `normalize_embeddings=True`
        scales each vector to length 1 (the default model already gives such
        vectors: `normalize=True`); `show_progress_bar=True` shows Keras's
        progress bar.
        """
        if not convert_to_numpy and not convert_to_tensor:
            raise ValueError("encode(convert_to_numpy=False) asks for sentence-transformers' list of one tensor per "
                             "text, which BertTextEmbedder does not give: leave convert_to_numpy=True (a NumPy array) "
                             "or pass convert_to_tensor=True (one tensor of the Keras backend).")
        texts = numpy_text_as_lists(texts)  # a 0-d array: its one string
        single = isinstance(texts, str)
        verbose = "auto" if show_progress_bar else 0
        embeddings = np.asarray(self.predict([texts] if single else texts, batch_size=batch_size, verbose=verbose),
                                "float32")
        if normalize_embeddings:
            embeddings = embeddings / np.maximum(np.linalg.norm(embeddings, axis=-1, keepdims=True), 1e-12)
        if single:
            embeddings = embeddings[0]
        return keras.ops.convert_to_tensor(embeddings) if convert_to_tensor else embeddings

    encode_documents = encode
    encode_queries = encode

    def get_sentence_embedding_dimension(self):
        """The length of each embedding (sentence-transformers' name): the backbone's `hidden_dim`."""
        return self.backbone.hidden_dim

    def similarity(self, a, b):
        """Cosine similarity matrix `(len(a), len(b))` of two sets of texts, embeddings or embedding tensors.

        A single text or a single vector counts as one row, as in sentence-transformers' `util.cos_sim`.
        """
        a, b = self._embeddings(a), self._embeddings(b)
        a = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
        b = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
        return a @ b.T

    def _embeddings(self, values):
        """Texts, a NumPy array or a backend tensor -> a 2-D NumPy array of embeddings."""
        if isinstance(values, np.ndarray):
            embeddings = values
        elif keras.ops.is_tensor(values):
            embeddings = keras.ops.convert_to_numpy(values)
        else:
            embeddings = self.encode(values)
        return np.atleast_2d(embeddings)


def check_target_vectors(y, dim):
    """Refuses, in one line, labels that are not one target vector per text (`fit` on raw text trains each text's
    embedding toward its vector): texts (sentence-transformers' pairs) or scores stopped inside tf.data ("Cast int32
    to string is not supported") or inside the loss, in a message of each backend's own.

    Example:
    >>> check_target_vectors(np.zeros((2, 4)), 4)
    >>> check_target_vectors(["a man", "a person"], 4)
    Traceback (most recent call last):
    ...
    ValueError: BertTextEmbedder's `y` is one target vector per text, an array of shape (n, 4) (the loss is the \
cosine similarity to it); got text ('a man'). It does not train on sentence pairs with scores (sentence-transformers' \
CosineSimilarityLoss): for a score per pair, fit a BertClassifier(num_classes=1) on (texts_a, texts_b).
    """
    try:
        values = np.asarray(y, dtype="float32")
        got = f"shape {values.shape}"
    except (TypeError, ValueError):
        values = None
        first = next(iter(np.ravel(np.asarray(y, dtype=object))), None)
        got = f"text ({first!r})" if isinstance(first, (str, bytes)) else f"{type(y).__name__} {str(y)[:40]}"
    if values is None or values.ndim != 2 or values.shape[1] != dim:
        raise ValueError(
            f"BertTextEmbedder's `y` is one target vector per text, an array of shape (n, {dim}) (the loss is the "
            f"cosine similarity to it); got {got}. It does not train on sentence pairs with scores "
            "(sentence-transformers' CosineSimilarityLoss): for a score per pair, fit a BertClassifier(num_classes=1) "
            "on (texts_a, texts_b)."
        )
