"""Raw text's one error: an item of a list of texts that is not a string, named by its index, with what to pass.

Every task reads raw text (a string or a list of them); the preprocessors
(TensorFlow, `text/`) and the models' own pipelines (`models/`, no
TensorFlow: `predict_entities`) refuse an item that is not a string in the
same words. It sits in the bottom room so that both may import it.
"""

import numpy as np


def not_text_error(index, item):
    """The one error for an item of raw text that is not a string (`None`, a number, a dict).

    >>> str(not_text_error(3, None))
    'Raw text: item 3 is NoneType None, expected a string.'
    >>> str(not_text_error(0, {"text": "a fine film", "label": 1}))  # doctest: +NORMALIZE_WHITESPACE
    "Raw text: item 0 is dict {'text': 'a fine film', 'label': 1}, expected a string (rows as dicts: pass their
    texts, [row['text'] for row in rows], or a table's column, df['text'])."
    >>> str(not_text_error(0, {"text": "a man", "text_pair": "a woman"}))  # doctest: +NORMALIZE_WHITESPACE
    "Raw text: item 0 is dict {'text': 'a man', 'text_pair': 'a woman'}, expected a string (pairs as dicts: pass
    the two lists, ([row['text'] for row in rows], [row['text_pair'] for row in rows]))."
    """
    shown = repr(item) if len(repr(item)) <= 60 else repr(item)[:57] + "..."
    hint = ""
    if isinstance(item, dict) and "text_pair" in item:  # (Hugging Face's pipeline's pair)
        hint = (" (pairs as dicts: pass the two lists, ([row['text'] for row in rows], [row['text_pair'] for row "
                "in rows]))")
    elif isinstance(item, dict):
        hint = (" (rows as dicts: pass their texts, [row['text'] for row in rows], or a table's column, "
                "df['text'])")
    elif isinstance(item, (list, tuple, np.ndarray)) and len(item) == 1 and isinstance(item[0], (str, bytes)):
        hint = " (a column of shape (n, 1), such as df[['text']].values: pass its texts, x[:, 0] or df['text'])"
    return ValueError(f"Raw text: item {index} is {type(item).__name__} {shown}, expected a string{hint}.")
