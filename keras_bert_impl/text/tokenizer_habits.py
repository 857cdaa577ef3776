"""What a Hugging Face `transformers` tokenizer habit is called on `BertTokenizer`: one line for each name it lacks.

`BertTokenizer` follows keras-hub's tokenizer: calling it gives each text's
WordPiece ids (no [CLS], [SEP] or padding), `detokenize` joins ids back into
text, `id_to_token` / `token_to_id` / `vocabulary_size()` read the vocabulary.
A `transformers` user reaches for `decode`, `convert_ids_to_tokens`,
`vocab_size` or `tokenizer(texts, padding=True, return_tensors="np")`; each
gets the one line that names ours (the names through `HuggingFaceNames`, the
call's arguments through `call_arguments_error`) (before: Python's bare `AttributeError`, or
`call() got an unexpected keyword argument 'padding'`).
"""

# A transformers tokenizer's name -> what to use on BertTokenizer instead.
HUGGING_FACE_TOKENIZER_NAMES = {
    "decode": "detokenize(ids)",
    "batch_decode": "detokenize(ids)",
    "convert_tokens_to_string": "detokenize(ids)",
    "convert_ids_to_tokens": "id_to_token(id), or get_vocabulary() for all of them (the tokens in id order)",
    "convert_tokens_to_ids": "token_to_id(token)",
    "vocab_size": "vocabulary_size()",
    "vocab": "get_vocabulary() (the tokens in id order)",
    "get_vocab": "get_vocabulary() (the tokens in id order)",
    "do_lower_case": "lowercase",
    "model_max_length": "the preprocessor's sequence_length (model.preprocessor.sequence_length)",
    "encode": "tokenizer(texts) (ids without [CLS] and [SEP]), or the preprocessor for packed features",
    "encode_plus": "the preprocessor, model.preprocessor(texts), for packed features",
    "batch_encode_plus": "the preprocessor, model.preprocessor(texts), for packed features",
    "save_pretrained": "model.save_huggingface(directory), which writes vocab.txt and tokenizer_config.json",
}

_PACKED = ("the model's padded features (token_ids, segment_ids, padding_mask) are its preprocessor's: "
           "model.preprocessor(texts), or BertClassifierPreprocessor(tokenizer, sequence_length=128)(texts) "
           "(a pair: (texts_a, texts_b))")


def call_arguments_error(class_name, pairs, arguments):
    """The `TypeError` for a tokenizer called as Hugging Face's is: a second text, or `padding=`, `truncation=`,
    `max_length=`, `return_tensors=` and the like.

    Example:
    >>> str(call_arguments_error("BertTokenizer", (), {"padding": True}))  # doctest: +NORMALIZE_WHITESPACE
    "BertTokenizer(texts) gives each text's WordPiece ids, without [CLS], [SEP] or padding (keras-hub's tokenizer),
    and takes no padding=: the model's padded features (token_ids, segment_ids, padding_mask) are its
    preprocessor's: model.preprocessor(texts), or BertClassifierPreprocessor(tokenizer, sequence_length=128)(texts)
    (a pair: (texts_a, texts_b))."
    """
    given = [f"{name}=" for name in arguments]
    if pairs:
        given.insert(0, "second text")
    return TypeError(f"{class_name}(texts) gives each text's WordPiece ids, without [CLS], [SEP] or padding "
                     f"(keras-hub's tokenizer), and takes no {', '.join(given)}: {_PACKED}.")
