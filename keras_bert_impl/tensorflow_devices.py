"""TensorFlow kept off the GPUs under the JAX and PyTorch backends: `keep_tensorflow_off_the_gpus()`.

Under JAX or PyTorch, TensorFlow only reads, tokenizes and batches text (tensorflow-text, tf.data), on the CPU. Left
alone on a GPU machine where it finds CUDA (the `nvidia-*` wheels that `jax[cuda12]` or `torch` install are enough),
it takes a CUDA context on every GPU at its first op and reserves most of the memory the model's backend has not
taken yet, and it may place the eager ops of tokenization on the GPU, copying through it. JAX's documentation asks
a tf.data input pipeline to hide the GPUs from TensorFlow for this reason; keras-hub leaves it to the user.

Every module of the package that imports TensorFlow for text (`text/tokenizer.py`, `text/normalization.py`,
`text/masking.py`, `batching/tf_batches.py`, `data/text_documents.py`, `data/sentence_pairs.py`; the others import
one of these) calls it right after `import tensorflow`, before TensorFlow runs anything. Under the TensorFlow
backend it does nothing: TensorFlow is the model's backend there. If TensorFlow has run ops already (the user's own
code), its devices are fixed and are left as they are.

Example:
>>> keep_tensorflow_off_the_gpus()  # (idempotent: the package's modules call it as they are imported)
"""

import keras

_done = False


def keep_tensorflow_off_the_gpus():
    """Hides the GPUs from TensorFlow unless Keras's backend is TensorFlow; once per process."""
    global _done
    if _done:
        return
    _done = True
    if keras.backend.backend() == "tensorflow":
        return
    import tensorflow as tf

    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:  # "Visible devices cannot be modified after being initialized": TensorFlow ran already
        pass
