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

    def encode(self, texts, batch_size=32):
        """Embeddings `(n, hidden)` (float32 NumPy) of raw strings or a feature dict."""
        if isinstance(texts, str):
            texts = [texts]
        return np.asarray(self.predict(texts, batch_size=batch_size, verbose=0), "float32")

    encode_documents = encode
    encode_queries = encode

    def similarity(self, a, b):
        """Cosine similarity matrix `(len(a), len(b))` of two lists of texts or two embedding arrays."""
        a = self.encode(a) if not isinstance(a, np.ndarray) else a
        b = self.encode(b) if not isinstance(b, np.ndarray) else b
        a = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
        b = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
        return a @ b.T
