"""Tables as the tasks' raw inputs: pandas DataFrames and Series, Hugging Face `datasets` columns, read as the
lists the preprocessors take.

A user's data usually sits in a DataFrame (`pd.read_csv`) or a Hugging Face dataset (`load_dataset`). A Series or a
dataset's column (`ds["sentence"]`, a `datasets.Column` since datasets 4) is a list of texts (or labels); a DataFrame
of one column is that column, of two columns the pair of lists `(texts_a, texts_b)` (a classifier's sentence pairs,
span QA's `(questions, contexts)`). Neither pandas nor datasets is imported: each is recognised by what it has.
"""

import numpy as np

# Column names that hold labels, not text: refused in `x` (see `table_as_texts`).
LABEL_COLUMN_NAMES = {"label", "labels", "label_id", "label_ids", "target", "targets", "y", "class", "score"}


def is_table(value):
    """Whether `value` is a pandas DataFrame (or quacks like one).

    Example:
    >>> is_table(["a"]), is_table({"text": ["a"]})
    (False, False)
    """
    return all(hasattr(value, name) for name in ("columns", "iloc", "to_numpy")) and not isinstance(value, type)


def is_series(value):
    """Whether `value` is a pandas Series (or quacks like one).

    Example:
    >>> import numpy as np
    >>> is_series(np.array(["a"])), is_series(["a"])
    (False, False)
    """
    return (all(hasattr(value, name) for name in ("index", "iloc", "tolist")) and not is_table(value)
            and not isinstance(value, type))


def is_hugging_face_column(value):
    """Whether `value` is a column of a Hugging Face dataset (`ds["sentence"]`, a lazy `datasets.Column`).

    Example:
    >>> is_hugging_face_column(["a"])
    False
    """
    return type(value).__module__.startswith("datasets") and hasattr(value, "column_name") and hasattr(value, "__len__")


def is_hugging_face_dataset(value):
    """Whether `value` is a Hugging Face `datasets.Dataset` (or `DatasetDict`)."""
    return type(value).__module__.startswith("datasets") and hasattr(value, "column_names")


def table_as_texts(x, columns, model="this model", y=None):
    """A DataFrame given as `x` -> its column as a list (one column) or its two columns as a tuple of two lists; a
    Series or a Hugging Face dataset's column -> a list (of texts, or of word lists); a whole Hugging Face dataset,
    or a DataFrame of other columns -> a one-line error (which columns hold the text is the user's to say); anything
    else is returned as it is.

    Args:
        x: the `x` of `fit` / `evaluate` / `predict`.
        columns: the column sets the task reads, by example names, for the error (e.g. `[("text",), ("text_a",
            "text_b")]`).
        model: the task's name, for the error.
        y: the labels given beside `x`: a DataFrame whose column is `y` (by name) is refused, as is one with a
            column named as labels usually are (`label`, `labels`, `target`, ...): read as text, it would leak the
            labels into the input (a two-column DataFrame is a sentence pair).

    Raises:
        ValueError: a whole Hugging Face dataset; a DataFrame of another number of columns, holding the labels,
            or a column of numbers or booleans.

    Example:
    >>> import pandas as pd
    >>> table = pd.DataFrame({"question": ["Who?"], "context": ["Ann did."]})
    >>> table_as_texts(table, [("question", "context")]), table_as_texts(table[["question"]], [("text",)])
    ((['Who?'], ['Ann did.']), ['Who?'])
    >>> table_as_texts(table["context"], [("text",)])
    ['Ann did.']
    """
    if is_series(x):
        return x.tolist()
    if is_hugging_face_column(x):
        return list(x)
    if isinstance(x, tuple):  # (texts_a, texts_b) as two columns
        return tuple(list(part) if is_hugging_face_column(part) else part for part in x)
    if is_hugging_face_dataset(x):
        shown = " or ".join(f"x=ds[{names[0]!r}]" if len(names) == 1 else
                            f"x=({', '.join(f'ds[{name!r}]' for name in names)})" for names in columns)
        raise ValueError(f"`x` is a Hugging Face dataset of columns {x.column_names}; {model} reads its text "
                         f"columns: give them, as in {shown}.")
    if not is_table(x):
        return x
    names = list(x.columns)
    if len(names) not in {len(c) for c in columns}:
        shown = " or ".join(f"x=df[{c[0]!r}]" if len(c) == 1 else f"x=df[{list(c)!r}]" for c in columns)
        raise ValueError(f"`x` is a DataFrame of {len(names)} columns {names}; {model} reads {shown}: select those "
                         "columns.")
    label_columns = [name for name in names
                     if (is_series(y) and name == y.name) or str(name).lower() in LABEL_COLUMN_NAMES]
    if label_columns:
        text_columns = [name for name in names if name not in label_columns]
        shown = (f"x=df[{text_columns[0]!r}]" if len(text_columns) == 1 else
                 f"x=df[{text_columns!r}]" if text_columns else "x=df[[the text columns]]")
        raise ValueError(f"`x` is a DataFrame of columns {names}, and {label_columns[0]!r} holds the labels, not "
                         f"text: give x the text alone, as in {shown}, and the labels as y.")
    lists = tuple(x[name].tolist() for name in names)
    for name, values in zip(names, lists):
        number = next((value for value in values if isinstance(value, (bool, int, float, np.number, np.bool_))), None)
        if number is not None:
            raise ValueError(f"`x` column {name!r} holds {type(number).__name__} values (e.g. {number!r}), not "
                             f"text; {model} reads text columns: select them.")
    return lists[0] if len(lists) == 1 else lists


def table_as_labels(y):
    """A DataFrame given as `y` (or `sample_weight`) -> its column as a list (one column), or its rows as a 2-D array
    (several columns: multi-hot labels, one column per class); a Hugging Face dataset's column -> a list; anything
    else is returned as it is.

    Example:
    >>> import pandas as pd
    >>> table_as_labels(pd.DataFrame({"label": [1, 0]})), table_as_labels(pd.DataFrame({"a": [1], "b": [0]})).tolist()
    ([1, 0], [[1, 0]])
    """
    if is_hugging_face_column(y):
        return list(y)
    if not is_table(y):
        return y
    columns = list(y.columns)
    return y[columns[0]].tolist() if len(columns) == 1 else y.to_numpy()
