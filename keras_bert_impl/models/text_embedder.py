"""BertTextEmbedder: sentence embeddings (mean or [CLS] pooling, normalised) and their similarity."""

import keras
import numpy as np

from keras_bert_impl.layers.sequence_pooling import SequencePooling
from keras_bert_impl.models.task import Task, backbone_inputs, freeze_unused_pooler


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertTextEmbedder(Task):
    """One vector per text from a `BertBackbone`: mean pooling over the real tokens (or [CLS]), L2-normalised.

    With the default mean pooling and normalisation, a sentence-transformers
    checkpoint such as all-MiniLM-L6-v2 gives the same embeddings as
    sentence-transformers does. `encode` takes raw strings (through the
    preprocessor) or feature dicts; `similarity` gives the cosine similarity
    of two sets of texts or embeddings.

    Args:
        backbone: a `BertBackbone`.
        pooling: `"mean"` (sentence-transformers) or `"cls"`.
        normalize: L2-normalise the embeddings.
        preprocessor: a `BertClassifierPreprocessor` (one segment) or None.

    Example:
    >>> embedder = BertTextEmbedder.from_preset("all_minilm_l6_v2_en")
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

    def head_config(self):
        return {"pooling": self.pooling, "normalize": self.normalize}

    def serving_outputs(self, outputs):
        return {"embeddings": outputs}

    @classmethod
    def preprocessor_class(cls):
        from keras_bert_impl.text.classifier_preprocessor import BertClassifierPreprocessor

        return BertClassifierPreprocessor

    def default_loss(self):
        return keras.losses.CosineSimilarity()

    def encode(self, texts, batch_size=32, convert_to_numpy=True, convert_to_tensor=False):
        """Embeddings of raw strings or a feature dict: float32 NumPy `(n, hidden)`, or `(hidden,)` for one string.

        As sentence-transformers' `encode`: a single string gives one vector
        (a list of one string gives `(1, hidden)`); `convert_to_numpy=True`
        (the default) is the NumPy array; `convert_to_tensor=True` gives the
        same values as a tensor of the Keras backend (a `torch.Tensor` on
        PyTorch, as sentence-transformers gives). `convert_to_numpy=False`
        alone, sentence-transformers' list of one tensor per text, is refused
        in one line.
        """
        if not convert_to_numpy and not convert_to_tensor:
            raise ValueError("encode(convert_to_numpy=False) asks for sentence-transformers' list of one tensor per "
                             "text, which BertTextEmbedder does not give: leave convert_to_numpy=True (a NumPy array) "
                             "or pass convert_to_tensor=True (one tensor of the Keras backend).")
        single = isinstance(texts, str)
        embeddings = np.asarray(self.predict([texts] if single else texts, batch_size=batch_size, verbose=0), "float32")
        if single:
            embeddings = embeddings[0]
        return keras.ops.convert_to_tensor(embeddings) if convert_to_tensor else embeddings

    encode_documents = encode
    encode_queries = encode

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
