"""pandas tables as the tasks' raw inputs: a DataFrame's columns read as the lists the preprocessors take.

A user's data usually sits in a DataFrame (`pd.read_csv`). A Series is already read as a list of texts (or
labels); a DataFrame of one column is that column, of two columns the pair of lists `(texts_a, texts_b)` (a
classifier's sentence pairs, span QA's `(questions, contexts)`). pandas is not imported: a table is whatever has
`columns`, `iloc` and `to_numpy`.
"""


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


def table_as_texts(x, reads):
    """A DataFrame given as `x` -> its column as a list (one column) or its two columns as a tuple of two lists; a
    Series -> a list (of texts, or of word lists); anything else is returned as it is.

    Args:
        x: the `x` of `fit` / `evaluate` / `predict`.
        reads: what the task reads, for the error on a table of more columns (e.g. "one column of texts
            (x=df['text'])").

    Example:
    >>> import pandas as pd
    >>> table = pd.DataFrame({"question": ["Who?"], "context": ["Ann did."]})
    >>> table_as_texts(table, "two columns"), table_as_texts(table[["question"]], "one column")
    ((['Who?'], ['Ann did.']), ['Who?'])
    >>> table_as_texts(table["context"], "one column")
    ['Ann did.']
    """
    if is_series(x):
        return x.tolist()
    if not is_table(x):
        return x
    columns = list(x.columns)
    if not 1 <= len(columns) <= 2:
        raise ValueError(f"`x` is a DataFrame of {len(columns)} columns {columns}; this model reads {reads}: "
                         "select those columns.")
    lists = tuple(x[column].tolist() for column in columns)
    return lists[0] if len(lists) == 1 else lists


def table_as_labels(y):
    """A DataFrame given as `y` (or `sample_weight`) -> its column as a list (one column), or its rows as a 2-D array
    (several columns: multi-hot labels, one column per class); anything else is returned as it is.

    Example:
    >>> import pandas as pd
    >>> table_as_labels(pd.DataFrame({"label": [1, 0]})), table_as_labels(pd.DataFrame({"a": [1], "b": [0]})).tolist()
    ([1, 0], [[1, 0]])
    """
    if not is_table(y):
        return y
    columns = list(y.columns)
    return y[columns[0]].tolist() if len(columns) == 1 else y.to_numpy()
